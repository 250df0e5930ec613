# Sourced by deploy/testbed and deploy/fabric: lab hosts and the links to
# a switch (taking a host away, port frame sizes, MTUs). Starting and
# stopping the switches is deploy/switch.sh.

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

# port_frames MTU: the net_af_packet devargs for a switch port on links of
# MTU bytes (nothing at 1500: the PMD's 2048-byte frames hold them). A
# TPACKET_V2 frame holds the kernel's 66 bytes before the Ethernet header,
# then the frame with an 802.1Q tag. The PMD addresses frame i at i x framesz,
# so a block must hold whole frames with nothing left over: frames of whole
# KiB, four to a block (whole pages). It refuses a frame size less 32 bytes
# above the switch's mbuf data room (9216 bytes): MTU 9000 gives 9216.
port_frames() {
	local mtu=$1 f
	[ "$mtu" -le 1500 ] && return 0
	f=$(( (mtu + 18 + 80 + 1023) / 1024 * 1024 ))
	echo ",framesz=$f,blocksz=$(( 4 * f )),framecnt=256"
}

# host_quiet NS: a lab host speaks IPv4 only. With IPv6 on, each host sends
# router solicitations and MLD reports on its own for seconds after its link
# comes up; flooded by the switch, they land in the same queues as a test's
# frames and are counted in the same drop counters (a lossy-class incast once
# counted 3774 drops for 3773 frames lost). Call before the link goes up.
host_quiet() {
	ip netns exec "$1" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
		net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
}

# tcp_cc_check CC: CC is a congestion control this kernel has (or "system"),
# loading its module if need be; the error said otherwise.
tcp_cc_check() {
	local avail=/proc/sys/net/ipv4/tcp_available_congestion_control
	[ "$1" = system ] && return 0
	[[ "$1" =~ ^[a-z0-9_]+$ ]] || { echo "--tcp '$1': not a congestion control name" >&2; return 1; }
	grep -qw "$1" "$avail" 2>/dev/null || modprobe -q "tcp_$1" 2>/dev/null || true
	grep -qw "$1" "$avail" 2>/dev/null && return 0
	echo "--tcp $1: this kernel has $(cat "$avail" 2>/dev/null) (or 'system')" >&2
	return 1
}

# host_tcp NS DEV CC: TCP from host NS through DEV with congestion control CC,
# asking for ECN: every route of NS's main table on DEV gets the route's own
# congctl and "features ecn" (a namespace may set its default CC only to one
# the machine's tcp_allowed_congestion_control lists; a route may use any).
# The switch marks ECN-capable frames of its lossy classes where it would
# otherwise drop them, so a CC that backs off on marks (cubic) loses nothing.
# "system": the kernel's default (on these machines BBR, which ignores the
# marks and overruns the switch's lossy queues). Call once DEV is up (its
# carrier may still be down).
host_tcp() {
	local ns=$1 dev=$2 cc=$3 r
	[ "$cc" = system ] && return 0
	while read -r r; do
		[ -n "$r" ] || continue
		# shellcheck disable=SC2086
		ip -n "$ns" route replace $r congctl "$cc" features ecn
	done < <(ip -n "$ns" route show dev "$dev" |
		 sed -e "s|^\([^ ]*\) |\1 dev $dev |" -e 's/ \(linkdown\|dead\)\b//g')
}

# port_quiet IFACE: the kernel stops at the packet taps on a switch port's
# veth end: inca-switch's af_packet socket still receives every frame, but
# the kernel no longer routes (and drops) each one in its own IP stack, work
# that a real switch's DPDK port never costs and that was charged to the
# sending host (tc ingress, classic BPF "return TC_ACT_SHOT"). Best effort.
# Nor does it speak IPv6 there: its router solicitations and MLD reports,
# sent for seconds after every (re)start of the switch sets the port up,
# reach the af_packet socket as outgoing frames and were flooded to the
# hosts in the default class (a pause test counted 101 frames for 100).
port_quiet() {
	sysctl -q -w "net.ipv6.conf.$1.disable_ipv6=1" >/dev/null 2>&1 || true
	tc qdisc add dev "$1" clsact 2>/dev/null &&
		tc filter add dev "$1" ingress bpf da bytecode '1,6 0 0 2,' 2>/dev/null || true
}

# ports_mtu MTU IFACE...: the links' MTU again on switch ports. DPDK 22.11's
# af_packet PMD claims 1518-byte frames at most (its real limit is the
# framesz above), so inca-switch configures MTU 1500 on it, which the PMD
# applies to the kernel interface (SIOCSIFMTU): the veth would then drop
# every larger frame the host sends. Called once the switch is ready.
ports_mtu() {
	local mtu=$1 i
	shift
	[ "$mtu" -le 1500 ] && return 0
	for i in "$@"; do
		[ "$(cat "/sys/class/net/$i/mtu" 2>/dev/null)" = "$mtu" ] || ip link set "$i" mtu "$mtu" || true
	done
}
