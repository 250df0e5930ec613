#!/usr/bin/env bash
# Installs every Debian package INCA needs to build, test and run.
# Idempotent and non-interactive; run as root (or through sudo) on Debian 12.
set -euo pipefail

PKGS=(
	# build
	build-essential meson ninja-build pkg-config clang llvm lld
	libclang-rt-14-dev
	# dataplane
	dpdk dpdk-dev libdpdk-dev
	# host library transports
	rdma-core libibverbs-dev librdmacm-dev ibverbs-utils perftest
	libbpf-dev libxdp-dev bpftool
	# control plane
	libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev nettle-dev
	openssl
	# tests and tools
	libcmocka-dev python3-scapy tshark iproute2 ethtool iputils-ping curl
	# the topology view's browser test (headless)
	chromium
	# baselines and Soft-RoCE VMs
	openmpi-bin libopenmpi-dev python3-mpi4py python3-numpy gfortran
	# the MPICH ABI (libinca-mpi-mpich; Open MPI stays the default mpicc/mpirun)
	mpich libmpich-dev
	qemu-system-x86 busybox-static cpio
	# the torch.distributed backend (host-lib/torch) and its demo
	python3-torch libtorch-dev python3-dev pybind11-dev
	# the scale model (tests/sim: SimGrid S4U, SMPI's smpicc/smpirun)
	libsimgrid-dev
	# benchmark plots (PNG)
	python3-matplotlib
	# the func tests show a stuck job's stacks (tests/func/lib.sh wait_job)
	gdb
)

usage() {
	cat <<USAGE
Usage: $0 [--check] [--help]

Installs the Debian 12 packages INCA needs (apt-get, non-interactive).
  --check   only list the packages that are missing; exit 1 if any are
  --help    this text
USAGE
}

missing_pkgs() {
	local p
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null |
			grep -qx installed || echo "$p"
	done
}

case "${1:-}" in
--help|-h) usage; exit 0 ;;
--check)
	m=$(missing_pkgs)
	if [ -n "$m" ]; then echo "missing:" $m; exit 1; fi
	echo "all ${#PKGS[@]} packages installed"; exit 0 ;;
"") ;;
*) echo "$0: unknown option '$1'" >&2; usage >&2; exit 2 ;;
esac

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "$0: run as root or install sudo" >&2; exit 1; }
	SUDO=sudo
fi

missing=$(missing_pkgs)
if [ -z "$missing" ]; then
	echo "install-deps: all ${#PKGS[@]} packages already installed"
	exit 0
fi
echo "install-deps: installing:" $missing
export DEBIAN_FRONTEND=noninteractive
# wireshark-common asks whether non-root users may capture; answer no.
echo "wireshark-common wireshark-common/install-setuid boolean false" |
	$SUDO debconf-set-selections
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
echo "install-deps: done"
