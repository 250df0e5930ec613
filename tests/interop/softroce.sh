#!/usr/bin/env bash
# Interop with a RoCE stack nobody here wrote: Linux's Soft-RoCE (rdma_rxe)
# in qemu VMs attached to inca-switch ports. (a) a group of two VM ranks on
# the verbs transport and two namespace ranks on udp all-reduces correctly;
# (b) rdma-core's ibv_ud_pingpong and perftest's ib_send_bw between the VMs
# through the switch's forwarding path; (c) a contribution with a wrong
# Q_Key is dropped and counted and rxe never gets a result; (d) tshark and
# scapy check a capture of the VMs' traffic; (e) the same mixed group set
# up by inca-manager: the verbs ranks register the QPNs rxe gave them.
# Usage: softroce.sh BUILD_DIR
BUILD=$(cd "${1:?usage: softroce.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/../func/lib.sh"
need_root
VM="$SRC/deploy/rxe-vm"
CHECK="$BUILD/tests/tools/inca-check"
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "SKIP: qemu-system-x86_64 is missing (deploy/install-deps.sh installs it)"
	exit 77
fi

WORK=$(mktemp -d /tmp/inca-interop.XXXXXX)
CAP_PID=
MGR_PID=
cleanup() {
	[ -n "$CAP_PID" ] && kill "$CAP_PID" 2>/dev/null
	[ -n "$MGR_PID" ] && kill "$MGR_PID" 2>/dev/null
	"$TB" down
	rm -rf "$WORK"
}
trap cleanup EXIT

echo "# building the VM image (cached)"
"$VM" build >/dev/null || { not_ok "rxe-vm build"; finish; exit 1; }

QKEY=0x1234abcd
# rxe numbers the first user QP 17 in every VM
MEMBERS='10.0.0.1:17,10.0.0.2:18,10.0.0.21:17,10.0.0.22:17'
cat > "$WORK/switch.json" <<JSON
{ "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20, "rate": "1gbit" },
  "qos": { "dscp_to_tc": { "26": 3, "48": 6 }, "lossless_tcs": [3], "strict_tcs": [6],
           "pfc": true, "watchdog": { "enabled": true, "action": "drop" } },
  "groups": [ { "id": 1, "qpn": 256, "qkey": "$QKEY", "window": 8, "elems_per_pkt": 256,
    "members": [ { "ip": "10.0.0.1", "qpn": 17 }, { "ip": "10.0.0.2", "qpn": 18 },
                 { "ip": "10.0.0.21", "qpn": 17 }, { "ip": "10.0.0.22", "qpn": 17 } ] } ] }
JSON
"$TB" up --hosts 2 --vms 2 --config "$WORK/switch.json" --switch "$BUILD/dataplane/inca-switch" \
	>/dev/null || { not_ok "testbed up with 2 VM ports"; finish; exit 1; }

ENV="INCA_SWITCH=10.0.0.254 INCA_GROUP=1 INCA_GROUP_QPN=256 INCA_WINDOW=8 INCA_SIZE=4 \
INCA_MEMBERS=$MEMBERS INCA_SWITCH_TIMEOUT_MS=20000 INCA_TIMEOUT_MS=120000 INCA_FALLBACK=off"

# vm J CMD: run CMD in VM J (10.0.0.2J) on tap v J, output to $WORK/vmJ.out
vm() {
	local j=$1
	shift
	"$VM" run --tap "$INCA_TESTBED-v$j" --ip "10.0.0.2$j/24" --mac "52:54:00:00:00:2$j" \
		--ping 10.0.0.254 --timeout 300 -- "$@" > "$WORK/vm$j.out" 2>&1
}

# mixed_group_done CASE WHAT: the two VM ranks ($vm1_pid, $vm2_pid) and the
# two host ranks ($h0_pid, $h1_pid) all succeeded, the VMs on the switch
mixed_group_done() {
	local rc=0 p f
	for p in $vm1_pid $vm2_pid $h0_pid $h1_pid; do wait "$p" || rc=1; done
	for f in vm1 vm2 h0 h1; do sed "s/^/    $f: /" "$WORK/$f.out" | grep -v "^    $f: $" | tail -3; done
	check "$1 2 rxe VMs (verbs) + 2 hosts (udp): $2" test $rc -eq 0
	check "$1 the VMs' ranks ran on verbs, through the switch" grep -q "0 fallbacks" "$WORK/vm1.out"
}

# (a) + (d): the mixed group, captured on the VMs' switch ports
dumpcap -q -i "$INCA_TESTBED-v1" -i "$INCA_TESTBED-v2" -f "udp port 4791" -a duration:280 \
	-w "$WORK/vms.pcapng" >/dev/null 2>&1 &
CAP_PID=$!
ARGS="-d all -o all -n 1,3,257,1000"
for j in 1 2; do
	vm $j "env $ENV INCA_QKEY=$QKEY INCA_RANK=$((j + 1)) INCA_TRANSPORT=verbs inca-check $ARGS" &
	eval "vm${j}_pid=$!"
done
# the namespace ranks start once the VMs are (nearly) booted; the
# switch timeout covers the difference
sleep 6
for r in 0 1; do
	"$TB" exec $((r + 1)) env $ENV INCA_QKEY=$QKEY INCA_RANK=$r INCA_TRANSPORT=udp \
		"$CHECK" $ARGS > "$WORK/h$r.out" 2>&1 &
	eval "h${r}_pid=$!"
done
mixed_group_done "(a)" "every dtype and op, 1..1000 elements"
sleep 1
kill "$CAP_PID" 2>/dev/null
wait "$CAP_PID" 2>/dev/null
CAP_PID=
malformed=$(tshark -r "$WORK/vms.pcapng" -Y "_ws.malformed || _ws.expert.severity >= error" 2>/dev/null | wc -l)
expect_eq "(d) tshark: malformed packets in the VMs' capture" "$malformed" 0
sends=$(tshark -r "$WORK/vms.pcapng" -Y "infiniband.bth.opcode == 100 && ip.src == 10.0.0.21" 2>/dev/null | wc -l)
check "(d) tshark: rxe's contributions are UD SEND only ($sends)" test "$sends" -gt 0
check "(d) scapy: results to the VM have valid ICRC and headers" \
	/usr/bin/python3 "$SRC/tests/func/check_results.py" "$WORK/vms.pcapng" 10.0.0.254 17 $QKEY 1

# (c) a wrong Q_Key: dropped and counted, rxe never receives a result
before=$(telemetry /inca/group,1 drops.qkey)
vm 1 "env $ENV INCA_QKEY=0x0badbadb INCA_RANK=2 INCA_TRANSPORT=verbs INCA_SWITCH_TIMEOUT_MS=3000 inca-check -d fp32 -o sum -n 1"
after=$(telemetry /inca/group,1 drops.qkey)
check "(c) wrong Q_Key from the VM: counted by the switch ($before -> $after)" test "$after" -gt "$before"
check "(c) ... and the VM got no result" grep -q "(0 of 1 packets done)" "$WORK/vm1.out"

# server_client CMD: CMD as a server in VM 1, then as its client in VM 2
# (CMD 10.0.0.21); both must succeed
server_client() {
	local srv crc src
	vm 1 "$1" &
	srv=$!
	sleep 8
	vm 2 "$1 10.0.0.21"
	crc=$?
	wait $srv
	src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ]
}

# (b) rdma-core and perftest between the two VMs, through the switch
check "(b) ibv_ud_pingpong VM to VM through the switch" \
	server_client "ibv_ud_pingpong -d rxe0 -g 1 -n 200"
grep -h "iters in" "$WORK"/vm*.out | sed 's/^/    /'
# in the lossless class: GRH traffic class 106 = DSCP 26 (TC3), ECT(0)
before=$(telemetry /inca/qos,2 tc3.tx_packets)
check "(b) ib_send_bw (UD, lossless class) VM to VM through the switch" \
	server_client "ib_send_bw -d rxe0 -x 1 -c UD -n 500 -F --tclass=106"
grep -h -A1 "#bytes" "$WORK/vm2.out" | sed 's/^/    /'
after=$(telemetry /inca/qos,2 tc3.tx_packets)
check "(b) ... its 500+ messages crossed the switch in lossless TC3 ($((after - before)))" \
	test $((after - before)) -ge 500
expect_eq "(b) ... no lossless drop" \
	"$(telemetry /inca/qos,2 tc3.lossless_headroom_exceeded)/$(telemetry /inca/qos,2 tc3.pfc_watchdog)" 0/0

# (e) manager mode: inca-manager in host 1 (reached by the VMs through the
# switch at 10.0.0.1, by the switch's agent over the management network),
# the switch with no static group, the VMs on verbs and the hosts on udp
"$TB" down
MPORT=18495
head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$WORK/admin.token"
TENANT=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
cat > "$WORK/topology.json" <<JSON
{ "switches": [ { "name": "switch1", "role": "leaf", "ip": "10.0.0.254" } ],
  "hosts": [ { "name": "h1", "ip": "10.0.0.1", "leaf": "switch1" },
             { "name": "h2", "ip": "10.0.0.2", "leaf": "switch1" },
             { "name": "vm1", "ip": "10.0.0.21", "leaf": "switch1" },
             { "name": "vm2", "ip": "10.0.0.22", "leaf": "switch1" } ],
  "tenants": [ { "name": "lab", "token": "$TENANT", "max_slots_per_switch": 1024, "max_jobs": 4 } ] }
JSON
printf '{ "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20, "rate": "1gbit" } }\n' > "$WORK/switch-mgr.json"
if "$TB" up --hosts 2 --vms 2 --mgmt --config "$WORK/switch-mgr.json" \
	--switch "$BUILD/dataplane/inca-switch" --manager "http://192.168.77.1:$MPORT" \
	--token-file "$WORK/admin.token" > "$WORK/tb-mgr.log" 2>&1; then
	"$TB" exec 1 "$BUILD/control/inca-manager" --topology "$WORK/topology.json" \
		--token-file "$WORK/admin.token" --db "$WORK/manager.db" \
		--listen "0.0.0.0:$MPORT" > "$WORK/manager.log" 2>&1 &
	MGR_PID=$!
	for _ in $(seq 100); do
		"$BUILD/control/incactl" -m "http://192.168.77.1:$MPORT" -k "$WORK/admin.token" \
			switches 2>/dev/null | grep -q "switch1.* up" && break
		sleep 0.1
	done
	MENV="INCA_MANAGER=http://10.0.0.1:$MPORT INCA_MANAGER_TOKEN=$TENANT INCA_JOB=verbs-mgr \
INCA_SIZE=4 INCA_WINDOW=8 INCA_SWITCH_TIMEOUT_MS=20000 INCA_TIMEOUT_MS=120000 INCA_FALLBACK=off"
	ARGS="-d fp32,int64,bf16 -o sum,max -n 1,257,1000"
	for j in 1 2; do
		vm $j "env $MENV INCA_LOCAL_IP=10.0.0.2$j INCA_RANK=$((j + 1)) INCA_TRANSPORT=verbs \
INCA_LOG=info inca-check $ARGS" &
		eval "vm${j}_pid=$!"
	done
	sleep 6
	for r in 0 1; do
		"$TB" exec $((r + 1)) env $MENV INCA_LOCAL_IP=10.0.0.$((r + 1)) INCA_RANK=$r \
			INCA_TRANSPORT=udp "$CHECK" $ARGS > "$WORK/h$r.out" 2>&1 &
		eval "h${r}_pid=$!"
	done
	# the job's tree while it lives (it goes when the ranks leave)
	tree=""
	for _ in $(seq 600); do
		tree=$("$BUILD/control/incactl" -m "http://192.168.77.1:$MPORT" \
			-k "$WORK/admin.token" tree verbs-mgr 2>&1)
		case "$tree" in *"10.0.0.21 qpn"*) break ;; esac
		kill -0 "$h0_pid" 2>/dev/null || break
		sleep 0.1
	done
	mixed_group_done "(e)" "manager mode, results exact"
	vqpn=$(sed -n 's/.*verbs: UD QP \([0-9]*\),.*/\1/p' "$WORK/vm1.out" | head -1)
	echo "$tree" | sed 's/^/    /'
	check "(e) the manager's tree has VM 1 with the QPN rxe gave it (${vqpn:-none})" \
		bash -c "[ -n '$vqpn' ] && echo '$tree' | grep -q '10.0.0.21 qpn $vqpn\$'"
else
	cat "$WORK/tb-mgr.log"
	not_ok "(e) testbed with the management network and the manager"
fi
finish
