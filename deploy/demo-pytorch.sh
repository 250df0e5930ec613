#!/usr/bin/env bash
# PyTorch training through the switch: installs what INCA needs, builds it
# (with inca_torch, the torch.distributed backend "inca"), brings up
# inca-manager, inca-switch and 4 hosts, and trains the same small MLP on
# synthetic data with DistributedDataParallel twice from the same seed: on
# gloo, then on inca (gradients reduced in the switch; the manager sets up
# the group). Prints both loss curves side by side, the time per step of
# each, and the switch's counters. Tears everything down (also on Ctrl-C).
#
# Usage: deploy/demo-pytorch.sh [--steps N] [--rate R|none] [--hidden H]
#            [--bucket-mb MB] [--build DIR] [--no-install]
#   --steps N       training steps (300)
#   --rate R        shape every host link, tc syntax (200mbit); none: unshaped
#   --hidden H      the MLP's hidden width (128: 26122 parameters)
#   --bucket-mb MB  DDP's bucket size (0.025)
#   --build DIR     the build directory (build)
#   --no-install    skip deploy/install-deps.sh
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
steps=300 rate=200mbit hidden=128 bucket=0.025 build=build install=1
while [ $# -gt 0 ]; do
	case "$1" in
	--steps) steps=${2:?}; shift 2 ;;
	--rate) rate=${2:?}; shift 2 ;;
	--hidden) hidden=${2:?}; shift 2 ;;
	--bucket-mb) bucket=${2:?}; shift 2 ;;
	--build) build=${2:?}; shift 2 ;;
	--no-install) install=0; shift ;;
	-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "demo-pytorch.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
done
[[ "$steps" =~ ^[0-9]+$ ]] && [ "$steps" -ge 20 ] ||
	{ echo "demo-pytorch.sh: --steps wants a number >= 20" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "demo-pytorch.sh: run as root (namespaces, DPDK)" >&2; exit 1; }

export INCA_TESTBED=incatorch
hosts=4
WORK=$(mktemp -d /tmp/inca-demo-pytorch.XXXXXX)
PORT=18471
MGR_PID=
# shellcheck source=deploy/jobs.sh
source "$here/deploy/jobs.sh"
trap demo_cleanup EXIT
trap 'echo; echo "demo-pytorch.sh: interrupted"; exit 130' INT TERM

demo_build "$install" "$build"
ls "$build"/host-lib/torch/inca_torch/_C*.so >/dev/null 2>&1 ||
	{ echo "demo-pytorch.sh: inca_torch was not built (python3-torch, libtorch-dev)" >&2; exit 1; }

step "inca-manager and the testbed: inca-switch + $hosts hosts${rate:+, links shaped to $rate}"
testbed_args=()
[ "$rate" != none ] && testbed_args=(--rate "$rate")
# (sets MGR_PID, exports INCA_MANAGER and its token for the ranks)
manager_testbed "$hosts" "$WORK" "$PORT" "$here/$build" "${testbed_args[@]}" ||
	{ echo "demo-pytorch.sh: the manager or the testbed did not come up" >&2; exit 1; }

# train BACKEND: ddp_train.py as ranks 0..3 on hosts 1..4; rank 0's output
# in $WORK/BACKEND.txt. The store and rendezvous on the management network,
# gloo's data on the same links as INCA's (eth0, through the switch).
train() {
	local backend=$1 r pids=() rc=0 port=29601
	[ "$backend" = inca ] && port=29602
	for r in $(seq 0 $((hosts - 1))); do
		timeout 600 "$here/deploy/testbed" exec $((r + 1)) env \
			PYTHONPATH="$here/$build/host-lib/torch" RANK=$r WORLD_SIZE=$hosts \
			MASTER_ADDR=192.168.77.1 MASTER_PORT=$port \
			GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
			INCA_JOB=demo-pytorch INCA_LOCAL_IP=10.0.0.$((r + 1)) \
			INCA_RING_IP=192.168.77.$((r + 1)) \
			/usr/bin/python3 "$here/host-lib/torch/examples/ddp_train.py" --backend "$backend" \
			--steps "$steps" --hidden "$hidden" --bucket-mb "$bucket" \
			> "$WORK/$backend.$r" 2>&1 &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	if [ $rc -ne 0 ]; then
		echo "the $backend job failed; the ranks' last lines:" >&2
		tail -n 5 "$WORK/$backend".* >&2
		return 1
	fi
	cp "$WORK/$backend.0" "$WORK/$backend.txt"
}

step "DDP on gloo ($hosts ranks, $steps steps)"
train gloo
cat "$WORK/gloo.txt"
step "DDP on inca: the same job, gradients reduced in the switch"
before=$(echo /inca/info | dpdk-telemetry.py -f "$INCA_TESTBED-tb" 2>/dev/null |
	/usr/bin/python3 -c 'import json,sys; print(list(json.load(sys.stdin).values())[0]["contributions"])')
train inca
after=$(echo /inca/info | dpdk-telemetry.py -f "$INCA_TESTBED-tb" 2>/dev/null |
	/usr/bin/python3 -c 'import json,sys; print(list(json.load(sys.stdin).values())[0]["contributions"])')
cat "$WORK/inca.txt"
grep -h "inca_torch" "$WORK"/inca.[0-9] | sed 's/^/  /'

step "side by side (rank 0's loss; the same seed, so the curves match to float rounding)"
printf '%-8s %14s %14s\n' "step" "gloo loss" "inca loss"
join <(awk '/^step/ { print $2, $4 }' "$WORK/gloo.txt") \
	<(awk '/^step/ { print $2, $4 }' "$WORK/inca.txt") |
	awk '{ printf "%-8s %14s %14s\n", $1, $2, $3 }'
g=$(grep -o "[0-9.]* ms per step" "$WORK/gloo.txt" | cut -d' ' -f1)
i=$(grep -o "[0-9.]* ms per step" "$WORK/inca.txt" | cut -d' ' -f1)
printf '%-8s %11s ms %11s ms   (gloo / inca: %sx)\n' "per step" "$g" "$i" \
	"$(awk -v g="$g" -v i="$i" 'BEGIN { printf "%.2f", g / i }')"
echo "the switch took $((after - before)) contributions from the ranks during the inca job"

cat <<EOF

Where to look next:
  the backend     docs/pytorch.md; host-lib/torch/ (C++ over inca.h), inca_torch.stats()
  the test        tests/func/pytorch.sh BUILD (ops x dtypes against gloo, DDP, a dead switch)
  switch counters echo /inca/info | dpdk-telemetry.py -f $INCA_TESTBED-tb   (while it runs)
EOF
