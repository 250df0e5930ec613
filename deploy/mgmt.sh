# Sourced by deploy/testbed and deploy/fabric: the lab's management network.
# Host i gets mgmt0 192.168.77.i/24; this machine bridges them as
# PREFIX-mbr with 192.168.77.254, so hosts reach inca-manager here and each
# other without the data fabric (libinca's fallback ring: INCA_RING_IP).

# mgmt_add PREFIX I NS: host I (namespace NS) joins the management network
mgmt_add() {
	local prefix=$1 i=$2 ns=$3
	if ! ip link show "$prefix-mbr" >/dev/null 2>&1; then
		ip link add "$prefix-mbr" type bridge
		ip addr add 192.168.77.254/24 dev "$prefix-mbr"
		ip link set "$prefix-mbr" up
	fi
	ip link add "$prefix-m$i" type veth peer name "$prefix-n$i"
	ip link set "$prefix-n$i" netns "$ns"
	ip -n "$ns" link set "$prefix-n$i" name mgmt0
	ip -n "$ns" addr add "192.168.77.$i/24" dev mgmt0
	ip -n "$ns" link set mgmt0 up
	ip link set "$prefix-m$i" master "$prefix-mbr"
	ip link set "$prefix-m$i" up
}

# mgmt_del PREFIX: remove the bridge and the hosts' links to it
mgmt_del() {
	local prefix=$1 l
	for l in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' |
		   grep -E "^$prefix-(m[0-9]+|mbr)$" || true); do
		ip link del "$l" 2>/dev/null || true
	done
}
