# Sourced by deploy/testbed and deploy/fabric: take a lab host away; is a
# switch just started still alive.

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

# child_alive PID: PID, a switch this script just started in the background,
# has not exited. Only its existence counts: until the forked shell has
# exec'd the switch its command line is still the script's, so matching it
# against inca-switch here would take a slow start for an exit.
child_alive() {
	[ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
