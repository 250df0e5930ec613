#!/usr/bin/env bash
# The systemd units and example configurations (deploy/systemd, deploy/etc),
# without systemd as PID 1: the units rendered as `meson install` renders
# them but pointing at this build, checked by `systemd-analyze verify`;
# the example configs loaded (the topology by inca-manager --check); then
# each unit's ExecStartPre/ExecStart line run as systemd would run it, with
# the example env files' variables: the manager serves TLS with its
# example's arguments, and the switch (net_null ports instead of the
# example's NICs, no hugepages) registers with it, heartbeats, and serves
# /metrics where its env file says (the address adapted to the loopback).
# Usage: services.sh BUILD_DIR
set -u
BUILD=$(cd "$1" && pwd)
# shellcheck source=tests/func/lib.sh
. "$(dirname "$0")/lib.sh"
need_root
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze missing"; exit 77; }

WORK=$(mktemp -d /tmp/inca-svc.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$WORK"
}
trap cleanup EXIT

# the layout of an install: bin/, etc/inca/, the state directory
mkdir -p "$WORK/bin" "$WORK/etc/inca/tls" "$WORK/units" "$WORK/state" "$WORK/doc"
ln -s "$BUILD/control/inca-manager" "$BUILD/control/incactl" "$BUILD/dataplane/inca-switch" "$WORK/bin/"
for u in inca-manager.service inca-switch@.service; do
	sed -e "s|@bindir@|$WORK/bin|g" -e "s|@sysconfdir@|$WORK/etc|g" -e "s|@docdir@|$WORK/doc|g" \
		-e "s|/var/lib/inca|$WORK/state|g" "$SRC/deploy/systemd/$u.in" > "$WORK/units/$u"
done
cp "$SRC/deploy/etc/topology.example.json" "$WORK/etc/inca/topology.json"
cp "$SRC/deploy/etc/switch.example.json" "$WORK/etc/inca/switch-leaf1.json"
out=$(cd "$WORK/units" && systemd-analyze verify inca-manager.service 2>&1)
expect_eq "systemd-analyze verify inca-manager.service" "$out" ""
ln -s inca-switch@.service "$WORK/units/inca-switch@leaf1.service"
out=$(cd "$WORK/units" && systemd-analyze verify inca-switch@leaf1.service 2>&1)
expect_eq "systemd-analyze verify inca-switch@leaf1.service" "$out" ""
check "the units as meson renders them name the installed binaries" \
	grep -q "^ExecStart=/usr/local/bin/inca-manager --topology /usr/local/etc/inca/topology.json" \
	"$BUILD/deploy/inca-manager.service"

# a unit's command line: ExecStart (or ExecStartPre) with its continuation
# lines joined, $VAR and ${VAR} from the env file, %i the instance
exec_line() {
	local unit=$1 key=$2 env=$3 inst=${4:-}
	/usr/bin/python3 - "$unit" "$key" "$env" "$inst" <<'PY'
import re, shlex, sys
unit, key, env, inst = sys.argv[1:]
text = open(unit).read().replace("\\\n", " ")
line = next(l for l in text.splitlines() if l.startswith(key + "="))[len(key) + 1:]
vars = {}
if env:
    for l in open(env):
        l = l.strip()
        if l and not l.startswith("#"):
            k, v = l.split("=", 1)
            vars[k] = shlex.split(v)[0] if v else ""
out = []
for w in shlex.split(line.replace("%i", inst)):
    m = re.fullmatch(r"\$\{(\w+)\}", w)
    if m:
        out.append(vars.get(m.group(1), ""))
    elif w.startswith("$"):
        out += vars.get(w[1:], "").split()      # unbraced: split on spaces
    else:
        out.append(re.sub(r"\$\{(\w+)\}", lambda m: vars.get(m.group(1), ""), w))
print("\0".join(out), end="")
PY
}

# the example configs, as shipped
check "the example topology loads (inca-manager --check)" \
	quiet "$BUILD/control/inca-manager" --check --topology "$SRC/deploy/etc/topology.example.json"
check "the example switch config loads (the unit's config, in the switch below)" \
	test -s "$WORK/etc/inca/switch-leaf1.json"

# the manager's env file: the example's arguments, a free port on the
# loopback and the lab CA's files where the example says /etc/inca/tls
PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
MPORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
quiet "$SRC/deploy/lab-ca" "$WORK/etc/inca/tls"
sed -e "s|0.0.0.0:8473|127.0.0.1:$PORT|" -e "s|/etc/inca|$WORK/etc/inca|g" \
	"$SRC/deploy/etc/manager.env.example" > "$WORK/etc/inca/manager.env"
head -c 24 /dev/urandom | base64 > "$WORK/etc/inca/admin.token"
pre=$(exec_line "$WORK/units/inca-manager.service" ExecStartPre "$WORK/etc/inca/manager.env" | tr '\0' ' ')
check "the manager unit's ExecStartPre passes ($pre)" quiet $pre
mapfile -d '' -t cmd < <(exec_line "$WORK/units/inca-manager.service" ExecStart "$WORK/etc/inca/manager.env")
"${cmd[@]}" > "$WORK/manager.log" 2>&1 &
PIDS+=($!)
wait_for_line "$WORK/manager.log" "inca-manager: ready" "${PIDS[-1]}"
check "the manager unit's ExecStart serves https on the example's arguments" \
	grep -q "listening on 127.0.0.1:$PORT (https), state in $WORK/state/manager.db" "$WORK/manager.log"

# the switch's env file: the example's, with net_null ports for its NICs
sed -e "s|^INCA_EAL_ARGS=.*|INCA_EAL_ARGS=\"-l 0,1 --no-huge -m 256 --no-pci --vdev net_null0 --vdev net_null1 --file-prefix incasvc\"|" \
	-e "s|^INCA_MANAGER=.*|INCA_MANAGER=https://127.0.0.1:$PORT|" \
	-e "s|/etc/inca|$WORK/etc/inca|g" -e "s|10.10.0.11:9473|127.0.0.1:$MPORT|" \
	"$SRC/deploy/etc/switch.env.example" > "$WORK/etc/inca/switch-leaf1.env"
mapfile -d '' -t cmd < <(exec_line "$WORK/units/inca-switch@.service" ExecStart "$WORK/etc/inca/switch-leaf1.env" leaf1)
( set -a; . "$WORK/etc/inca/switch-leaf1.env"; set +a; exec "${cmd[@]}" ) > "$WORK/switch.log" 2>&1 &
PIDS+=($!)
wait_for_line "$WORK/switch.log" "inca-switch: ready" "${PIDS[-1]}"
check "the switch unit's ExecStart starts inca-switch with the example config" \
	grep -q "inca-switch: ready: 2 ports, 0 groups" "$WORK/switch.log"
for _ in $(seq 50); do
	grep -q "switch leaf1 registered" "$WORK/manager.log" && break
	sleep 0.1
done
check "... its agent registered with the manager over TLS (INCA_MANAGER_CACERT)" \
	grep -q "switch leaf1 registered" "$WORK/manager.log"
out=$("$BUILD/control/incactl" --manager "https://127.0.0.1:$PORT" --cacert "$WORK/etc/inca/tls/ca.pem" \
	--token-file "$WORK/etc/inca/admin.token" switches 2>&1)
check "incactl: leaf1 is up" grep -q "^leaf1 .* up " <<< "$out"
check "the switch serves /metrics where its env file says" \
	grep -q '^inca_switch_info{switch_ip="10.0.0.251",ports="2",workers="1"} 1$' \
	<(curl -s "http://127.0.0.1:$MPORT/metrics")

# the Grafana dashboard asks only for metrics that exist: every inca_*
# name in its queries is a family the switch or the manager publishes
curl -s "http://127.0.0.1:$MPORT/metrics" > "$WORK/switch.metrics"
curl -s --cacert "$WORK/etc/inca/tls/ca.pem" -H "Authorization: Bearer $(cat "$WORK/etc/inca/admin.token")" \
	"https://127.0.0.1:$PORT/metrics" > "$WORK/manager.metrics"
unknown=$(/usr/bin/python3 - "$SRC/deploy/grafana/inca-fabric.json" "$WORK/switch.metrics" "$WORK/manager.metrics" <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
known = set()
for f in sys.argv[2:]:
    known |= set(re.findall(r"^# TYPE (\w+) ", open(f).read(), re.M))
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
used = set(n for e in exprs for n in re.findall(r"\binca_\w+", e))
if len(exprs) < 10 or not used:
    print("too few queries: %d" % len(exprs))
print(" ".join(sorted(used - known)))
PY
)
expect_eq "the Grafana dashboard's queries name only published metrics" "$unknown" ""
finish
