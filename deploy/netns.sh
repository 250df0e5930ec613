# Sourced by deploy/testbed and deploy/fabric: take a lab host away.

# netns_del NS: end NS's processes, remove what libinca kept for that
# namespace outside it (the xdp transport's shared UMEM file, the udp and
# xdp lock files and the udp steering program's bpffs pins, all named after
# the namespace's inode: owners killed here cannot remove them), then NS
netns_del() {
	local ns=$1 ino
	ino=$(stat -L -c %i "/run/netns/$ns" 2>/dev/null || true)
	ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
	if [ -n "$ino" ]; then
		rm -f /dev/shm/inca-xdp-if*-net"$ino".umem* /run/inca/*-net"$ino".lock
		rm -rf /run/inca/bpffs/inca/*-net"$ino"
	fi
	ip netns del "$ns"
}
