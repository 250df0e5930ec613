#!/usr/bin/env bash
# Functional test of inca_torch, the torch.distributed backend "inca": 4
# ranks on a 4-host testbed (gloo's traffic and the store on the management
# network). The backend's own checks (every offloaded op and dtype against
# gloo, async work, delegated ops, bad input); a DDP job of 300 steps with
# gloo, with gloo reducing rank by rank, and with inca in a reproducible
# group from the same seed: final parameters within 1e-5 relative of gloo's
# and bit-identical to the rank-ordered run; the switch's contributions
# counter covers every gradient byte; and the switch killed mid-training:
# the job finishes on libinca's TCP ring, parameters still within 1e-5.
# Usage: tests/func/pytorch.sh BUILD_DIR   (root)
set -u
BUILD=$(cd "${1:?usage: pytorch.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
need_root
export INCA_TESTBED=incapt
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
	echo "SKIP: torch is not installed (deploy/install-deps.sh installs python3-torch libtorch-dev)"
	exit 77
fi
PYPATH=$BUILD/host-lib/torch
TRAIN=$SRC/host-lib/torch/examples/ddp_train.py
STEPS=300
# the model of ddp_train.py's defaults: 64-128-128-10
PARAMS=$(( 64 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10 ))

WORK=$(mktemp -d /tmp/inca-pt.XXXXXX)
JOB_PIDS=()
trap testbed_cleanup EXIT
if ! ls "$PYPATH"/inca_torch/_C*.so >/dev/null 2>&1; then
	not_ok "inca_torch is built ($PYPATH/inca_torch: meson option torch)"
	finish
	exit 1
fi

QKEY=0x5eed7e11
MEMBERS='[ { "ip": "10.0.0.1", "qpn": 17 }, { "ip": "10.0.0.2", "qpn": 18 },
           { "ip": "10.0.0.3", "qpn": 19 }, { "ip": "10.0.0.4", "qpn": 20 } ]'
cat > "$WORK/switch.json" <<JSON
{ "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20 },
  "groups": [ { "id": 1, "qpn": 256, "qkey": "$QKEY", "window": 64, "elems_per_pkt": 256,
                "reproducible": true, "members": $MEMBERS } ] }
JSON
# the fallback ring runs on the management network, which survives the switch
cat > "$WORK/group.json" <<JSON
{ "switch": "10.0.0.254", "group": 1, "qpn": 256, "qkey": "$QKEY", "window": 64,
  "elems_per_pkt": 256, "reproducible": true,
  "members": [ { "ip": "10.0.0.1", "qpn": 17, "ring_ip": "192.168.77.1" },
               { "ip": "10.0.0.2", "qpn": 18, "ring_ip": "192.168.77.2" },
               { "ip": "10.0.0.3", "qpn": 19, "ring_ip": "192.168.77.3" },
               { "ip": "10.0.0.4", "qpn": 20, "ring_ip": "192.168.77.4" } ] }
JSON

up() {
	"$TB" up --hosts 4 --mgmt --config "$WORK/switch.json" \
		--switch "$BUILD/dataplane/inca-switch" > "$WORK/testbed.log" 2>&1 ||
		{ cat "$WORK/testbed.log"; not_ok "testbed up"; finish; exit 1; }
}

# ranks NAME ARGS...: /usr/bin/python3 ARGS as ranks 0..3 on hosts 1..4 in
# the background (pids in JOB_PIDS), rank r's output in $WORK/NAME.r
PORT=29700
ranks() {
	local name=$1 r
	shift
	PORT=$((PORT + 1))
	JOB_PIDS=()
	for r in 0 1 2 3; do
		timeout 240 "$TB" exec $((r + 1)) env PYTHONPATH="$PYPATH" RANK=$r WORLD_SIZE=4 \
			MASTER_ADDR=192.168.77.1 MASTER_PORT=$PORT GLOO_SOCKET_IFNAME=mgmt0 \
			INCA_CONFIG="$WORK/group.json" INCA_LOG=warn OMP_NUM_THREADS=1 \
			/usr/bin/python3 "$@" > "$WORK/$name.$r" 2>&1 &
		JOB_PIDS+=($!)
	done
}
# wait_ranks NAME: every rank exited 0 (else their last lines are shown)
wait_ranks() {
	local p rc=0 r
	for p in "${JOB_PIDS[@]}"; do wait "$p" || rc=1; done
	JOB_PIDS=()
	if [ $rc -ne 0 ]; then
		for r in 0 1 2 3; do tail -n 5 "$WORK/$1.$r" | sed "s/^/    $1 rank $r: /"; done
	fi
	return $rc
}
# sum_stat NAME KEY: KEY=value from every rank's inca_torch line, summed
sum_stat() {
	cat "$WORK/$1".[0-3] | grep -o "inca_torch rank [0-9]*: .*" |
		grep -o " $2=[0-9]*" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'
}
contributions() { telemetry /inca/info contributions; }
# compare WHAT A B [--exact]: the saved parameters of runs A and B agree
compare() {
	local out rc
	out=$(/usr/bin/python3 "$SRC/tests/func/pytorch_compare.py" "$WORK/$2.pt" "$WORK/$3.pt" "${@:4}")
	rc=$?
	if [ $rc -eq 0 ]; then ok "$1 ($out)"; else not_ok "$1 ($out)"; fi
}

up
echo "# the backend's own checks: every op and dtype against gloo, async, delegated, bad input"
ranks ops "$SRC/tests/func/pytorch_ops.py"
check "pytorch_ops.py: every rank exits 0" wait_ranks ops
for r in 0 1 2 3; do
	line=$(grep "pytorch_ops rank $r: [0-9]* passed" "$WORK/ops.$r")
	check "rank $r: ${line#pytorch_ops rank $r: }" grep -q "passed, 0 failed" <<< "$line"
done
grep -h "FAIL" "$WORK"/ops.[0-3] | head -10 | sed 's/^/    /'
check "delegated ops are logged once per kind (rank 0)" \
	grep -q "inca_torch: gather goes to gloo (not in libinca)" "$WORK/ops.0"

echo "# DDP, $STEPS steps, 4 ranks, the same seed: gloo, gloo rank-ordered, inca"
ranks gloo "$TRAIN" --backend gloo --steps $STEPS --out "$WORK/gloo.pt"
check "DDP on gloo" wait_ranks gloo
ranks ordered "$TRAIN" --backend gloo --ordered --steps $STEPS --out "$WORK/ordered.pt"
check "DDP on gloo, gradients summed in rank order" wait_ranks ordered
before=$(contributions)
ranks inca "$TRAIN" --backend inca --steps $STEPS --out "$WORK/inca.pt"
check "DDP on inca" wait_ranks inca
after=$(contributions)
paste <(grep -h "^step\|^#" "$WORK/gloo.0") <(grep -h "^step\|^#" "$WORK/inca.0") |
	awk -F'\t' '{printf "    %-60s | %s\n", substr($1, 1, 60), $2}'
compare "inca's final parameters within 1e-5 relative of gloo's" inca gloo
compare "reproducible group: bit-identical to the rank-ordered run" inca ordered --exact
expect_eq "inca: no fallback to the ring (fallbacks summed over ranks)" "$(sum_stat inca fallbacks)" 0
# every rank sends each step's gradients (PARAMS fp32) in packets of at
# most 248 elements (IB MTU 1024: (1024 - 32) / 4), one bucket at a time
need=$(( 4 * STEPS * ( (PARAMS + 247) / 248 ) ))
got=$(( after - before ))
check "the switch counted the gradients' contributions ($got >= 4 x $STEPS x ceil($PARAMS / 248) = $need)" \
	test "$got" -ge "$need"
sent=$(sum_stat inca packets_sent)
# (the count is read after the job's last collective, a barrier)
expect_eq "... exactly the packets the ranks sent (libinca's packets_sent summed)" "$got" "$sent"
echo "# time per step: gloo $(grep -o "[0-9.]* ms per step" "$WORK/gloo.0"), inca $(grep -o "[0-9.]* ms per step" "$WORK/inca.0")"

echo "# the switch killed mid-training"
rm -f "$WORK/progress"
ranks kill "$TRAIN" --backend inca --steps $STEPS --out "$WORK/kill.pt" --progress "$WORK/progress"
wait_for_line "$WORK/progress" "^step 100$" "${JOB_PIDS[0]}"
check "training was under way (step 100) when the switch was killed" \
	grep -q "^step 100$" "$WORK/progress"
kill_switch
check "DDP on inca finished after the switch died" wait_ranks kill
fb=$(sum_stat kill fallbacks)
check "the ranks finished on the TCP ring (fallbacks $fb)" test "$fb" -gt 0
echo "# buckets completed in-network at some ranks before the kill, run again on the ring: $(sum_stat kill replays)"
compare "final parameters still within 1e-5 relative of gloo's" kill gloo
finish
