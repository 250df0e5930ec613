# Sourced by deploy/demo.sh, deploy/demo-pytorch.sh and tests/bench/run-*.sh:
# the demos' build and clean-up, and the all-reduce jobs they run on a testbed. Needs $here (the source tree) and
# INCA_TESTBED; jobs write into $WORK. INCA_BUILD: the build directory
# of the binaries (default $here/build).

# step TEXT: a section header in a demo's output
step() { printf '\n==== %s\n' "$*"; }

# demo_build INSTALL BUILD: deploy/install-deps.sh when INSTALL is 1, then
# configure (or reconfigure) and build BUILD
demo_build() {
	local install=$1 build=$2
	if [ "$install" = 1 ]; then
		step "installing dependencies (deploy/install-deps.sh)"
		"$here/deploy/install-deps.sh"
	fi
	step "building ($build/)"
	if [ -f "$build/build.ninja" ]; then meson setup --reconfigure "$build" >/dev/null
	else meson setup "$build" >/dev/null; fi
	ninja -C "$build"
}

# demo_cleanup: a demo's EXIT trap: the testbed down, the manager (MGR_PID,
# if set) stopped, $WORK removed
demo_cleanup() {
	trap - EXIT INT TERM
	echo "==== tearing down"
	"$here/deploy/testbed" down || true
	if [ -n "${MGR_PID:-}" ]; then
		kill "$MGR_PID" 2>/dev/null || true
		wait "$MGR_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}

# group_config N FILE [P]: a switch config with group 1 of hosts 1..N, and
# the matching libinca environment (INCA_SWITCH, INCA_MEMBERS, ...) exported;
# elements per packet INCA_ELEMS (default 256; libinca clamps to its MTU).
# With P: one member per rank, N ranks, P on each host in rank order (every
# rank in the network, INCA_HIER=off); without, the group of hosts a job of
# several ranks per host uses (INCA_PER_HOST: its INCA_SIZE is N x that)
group_config() {
	local n=$1 file=$2 per=${3:-} i members="" sw="" ip nic
	for i in $(seq "$n"); do
		ip=10.0.0.$i
		if [ -n "$per" ]; then
			# every rank a member; with INCA_NICS links a host, local
			# rank l on link l mod INCA_NICS (as inca_job places it)
			ip=10.0.0.$(( (i - 1) / per + 1 )) nic=$(( (i - 1) % per % ${INCA_NICS:-1} ))
			[ "$nic" = 0 ] || ip=10.0.0.$((100 + 10 * nic + (i - 1) / per + 1))
		fi
		members+="${members:+,}$ip:$((16 + i))"
		sw+="${sw:+, }{ \"ip\": \"$ip\", \"qpn\": $((16 + i)) }"
	done
	cat > "$file" <<JSON
{ "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20 },
  "groups": [ { "id": 1, "qpn": 256, "qkey": "0x1ca0d3e0", "window": 64,
                "elems_per_pkt": ${INCA_ELEMS:-256}, "members": [ $sw ] } ] }
JSON
	export INCA_SWITCH=10.0.0.254 INCA_GROUP=1 INCA_GROUP_QPN=256 INCA_QKEY=0x1ca0d3e0 \
		INCA_WINDOW=64 INCA_MEMBERS="$members" INCA_SIZE="$n"
	[ -n "$per" ] || INCA_SIZE=$(( n * ${INCA_PER_HOST:-1} ))
}

# manager_setup N DIR PORT: a topology (one switch "switch1" at 10.0.0.254
# holding hosts 1..N, tenant "demo", room for 256 jobs of 64 slots: an MPI
# program maps each communicator to a job), an admin token and a tenant token in
# DIR; exports the libinca environment for manager mode (INCA_MANAGER, ...)
# and unsets the static group variables. MANAGER_TENANTS_EXTRA: more tenants
# (JSON objects, each with a leading comma)
manager_setup() {
	local n=$1 dir=$2 port=$3 i hosts=""
	head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$dir/admin.token"
	head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$dir/demo.token"
	for i in $(seq "$n"); do
		hosts+="${hosts:+, }{ \"name\": \"h$i\", \"ip\": \"10.0.0.$i\", \"leaf\": \"switch1\" }"
		# a testbed with INCA_NICS links a host: each link's address
		for j in $(seq 2 "${INCA_NICS:-1}"); do
			hosts+=", { \"name\": \"h${i}n$j\", \"ip\": \"10.0.0.$((100 + 10 * (j - 1) + i))\", \"leaf\": \"switch1\" }"
		done
	done
	cat > "$dir/topology.json" <<JSON
{ "switches": [ { "name": "switch1", "role": "leaf", "ip": "10.0.0.254" } ],
  "hosts": [ $hosts ],
  "tenants": [ { "name": "demo", "token": "$(cat "$dir/demo.token")",
                 "max_slots_per_switch": 16384, "max_jobs": 256 }${MANAGER_TENANTS_EXTRA:-} ] }
JSON
	unset INCA_SWITCH INCA_GROUP INCA_GROUP_QPN INCA_QKEY INCA_MEMBERS
	export INCA_MANAGER="http://192.168.77.254:$port" INCA_MANAGER_TOKEN_FILE="$dir/demo.token" \
		INCA_WINDOW=64 INCA_SIZE="$n"
}

# cpus_off_switch: the CPUs the testbed's switch worker (one, on CPU 1:
# deploy/testbed) does not run on, as taskset takes them; nothing on a
# 1-CPU machine. Ranks that share the worker's CPU delay it: on the 2-CPU
# lab machines small and mid-size calls then take one of two levels
# (docs/performance.md, third session)
cpus_off_switch() {
	local n
	n=$(nproc)
	if [ "$n" -ge 3 ]; then echo "0,2-$((n - 1))"; elif [ "$n" -eq 2 ]; then echo 0; fi
}

# inca_job N OUT ARGS...: inca-allreduce-perf ARGS, N ranks on hosts 1..,
# INCA_PER_HOST (default 1) on each in rank order (transport from
# INCA_TRANSPORT); with INCA_NICS K (testbed --nics K) local rank l on the
# host's link l mod K; rank 0's table in OUT; every rank must succeed
inca_job() {
	local n=$1 out=$2 pids=() r h rc=0 epoch per=${INCA_PER_HOST:-1} nic ip
	shift 2
	# the job's own epoch: its collectives never meet an earlier job's on
	# the switch (docs/protocol.md 3.2); the ranks must share it. As
	# inca_epoch_new(): numbered from the clock in 4 µs ticks (epoch x
	# 0x9e3779b1 = tick), newer than the sets a static group retains, or
	# every first use of a set would wait for a retransmission
	epoch=$(( ($(date +%s%N) / 4000 * 0x0e8b2f51) & 0xffffffff ))
	for r in $(seq 0 $((n - 1))); do
		h=$((r / per + 1)) nic=$(( r % per % ${INCA_NICS:-1} ))
		ip=10.0.0.$h
		[ "$nic" = 0 ] || ip=10.0.0.$((100 + 10 * nic + h))
		INCA_EPOCH=$epoch INCA_RANK=$r INCA_SIZE=$n INCA_LOCAL_SIZE=$per INCA_LOCAL_RANK=$((r % per)) \
			INCA_LOCAL_IP=$ip INCA_RING_IP=192.168.77.$h \
			timeout 900 "$here/deploy/testbed" exec $h ${INCA_RANK_CPUS:+taskset -c "$INCA_RANK_CPUS"} \
			"${INCA_BUILD:-$here/build}/host-lib/inca-allreduce-perf" "$@" > "$WORK/rank$r.log" 2>&1 &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	cp "$WORK/rank0.log" "$out"
	if [ $rc -ne 0 ]; then
		echo "the in-network job failed; rank logs:" >&2
		tail -n 5 "$WORK"/rank*.log >&2
	fi
	return $rc
}

# ompi_btl PER: Open MPI's transports for PER ranks per host: TCP, and
# shared memory (vader) between the ranks of a host when there are several
# (with one rank per host vader only slowed libinca-mpi's small calls)
ompi_btl() { [ "$1" = 1 ] && echo tcp,self || echo tcp,self,vader; }

# ompi_eager: OMPI_EAGER_LIMIT=B sets Open MPI's TCP eager limit (unset: its
# own, 64 KiB with its headers). Above it the BTL sends a message in two
# phases, the first 64 KiB and the rest once the receiver has acknowledged
# it, and a ring's block waits for that acknowledgement. Taking turns on one
# testbed (2026-11-29), 1 MiB made the ring 2-10% faster from 256 KiB to 2
# MiB at 200 Mbit/s (4 ranks three rounds, 8 ranks two) and up to 20% slower
# at 512 KiB-1 MiB at 1 Gbit/s, where the CPU limits (8 ranks, three
# rounds): no one value is the best, the default stays (docs/performance.md,
# "The ring's eager limit")
ompi_eager() {
	[ -z "${OMPI_EAGER_LIMIT:-}" ] ||
		echo --mca btl_tcp_eager_limit "$OMPI_EAGER_LIMIT" --mca btl_tcp_rndv_eager_limit "$OMPI_EAGER_LIMIT"
}

# openmpi_job N OUT ARGS...: Open MPI's MPI_Allreduce at its best on hosts
# 1.. (N ranks, INCA_PER_HOST on each; two TCP connections per peer: one
# halves a bidirectional transfer; OMPI_EAGER_LIMIT: ompi_eager; shared
# memory between the ranks of a host; recursive doubling below 4 KiB, the ring
# from 4 KiB, as the rules file says; OMPI_ALLREDUCE_ALGORITHM forces one;
# OMPI_HAN=1: the hierarchical component coll/han, shared memory inside a
# host and tuned with the same rules between them), mpirun started in host
# 1 with tests/bench/ns-rsh as launcher agent. --bind-to none: the ranks
# keep the CPUs ns-rsh gives them (INCA_RANK_CPUS); Open MPI's own binding
# (to the whole socket from 3 ranks up) put them back on every CPU, the
# switch worker's too, whatever the taskset (seen 2026-11-27)
openmpi_job() {
	local n=$1 out=$2 hosts per=${INCA_PER_HOST:-1}
	shift 2
	hosts=$(seq -s, -f "10.0.0.%g:$per" 1 $(( (n + per - 1) / per )))
	if ! timeout 900 "$here/deploy/testbed" exec 1 ${INCA_RANK_CPUS:+taskset -c "$INCA_RANK_CPUS"} \
		env INCA_TESTBED="$INCA_TESTBED" INCA_RANK_CPUS="${INCA_RANK_CPUS:-}" mpirun --allow-run-as-root --oversubscribe --bind-to none --host "$hosts" -np "$n" \
		--mca plm_rsh_agent "$here/tests/bench/ns-rsh" --mca btl "$(ompi_btl "$per")" \
		--mca btl_tcp_if_include "$(seq -s, -f 'eth%g' 0 $(( ${INCA_NICS:-1} - 1 )))" \
		--mca oob_tcp_if_include eth0 --mca btl_tcp_links 2 $(ompi_eager) \
		--mca mpi_yield_when_idle 1 --mca coll_tuned_use_dynamic_rules 1 \
		${OMPI_HAN:+--mca coll_han_priority 100} \
		${OMPI_ALLREDUCE_ALGORITHM:+--mca coll_tuned_allreduce_algorithm "$OMPI_ALLREDUCE_ALGORITHM"} \
		--mca coll_tuned_dynamic_rules_filename "$here/tests/bench/ompi-allreduce-rules.conf" \
		"${INCA_BUILD:-$here/build}/tests/bench/mpi-allreduce-perf" "$@" > "$out" 2>&1; then
		echo "the Open MPI job failed:" >&2
		tail -n 5 "$out" >&2
		return 1
	fi
}

# manager_testbed N DIR PORT BUILD [TESTBED ARGS...]: inca-manager (pid in
# MGR_PID, log in DIR) and a testbed of N hosts with the management network,
# whose switch takes its groups from the manager; the libinca environment
# for manager mode exported (manager_setup). Returns 1 with the logs shown.
manager_testbed() {
	local n=$1 dir=$2 port=$3 build=$4
	shift 4
	manager_setup "$n" "$dir" "$port"
	"$build/control/inca-manager" --topology "$dir/topology.json" \
		--token-file "$dir/admin.token" --db "$dir/manager.db" \
		--listen "0.0.0.0:$port" > "$dir/manager.log" 2>&1 &
	MGR_PID=$!
	for _ in $(seq 50); do
		grep -q "inca-manager: ready" "$dir/manager.log" && break
		sleep 0.1
	done
	grep -q "inca-manager: ready" "$dir/manager.log" || { cat "$dir/manager.log" >&2; return 1; }
	printf '{ "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20 } }\n' > "$dir/switch.json"
	if ! "$here/deploy/testbed" up --hosts "$n" --config "$dir/switch.json" --mgmt \
		--switch "$build/dataplane/inca-switch" --manager "http://127.0.0.1:$port" \
		--name switch1 --token-file "$dir/admin.token" "$@" > "$dir/testbed.log" 2>&1; then
		cat "$dir/testbed.log" >&2
		return 1
	fi
}

# mpi_hosts NP PER_HOST: the launchers' host list for NP ranks, PER_HOST
# on each testbed host by its management address ("192.168.77.1:2,...")
mpi_hosts() {
	local i hosts=""
	for i in $(seq $(( ($1 + $2 - 1) / $2 ))); do
		hosts+="${hosts:+,}192.168.77.$i:$2"
	done
	echo "$hosts"
}

# mpi_ranks NP PER_HOST LIB ARGS...: mpirun from this namespace, NP ranks,
# PER_HOST per testbed host, MPI's traffic on the management network, LIB
# (libinca-mpi) preloaded with the manager's environment; INCA_MPI=0 keeps
# it out of the way (the same binary, Open MPI alone); shared memory (vader)
# between the ranks of a host (PER_HOST > 1); MPI_HAN=1: Open MPI's hierarchical coll/han
# (shared memory inside the host, tuned between hosts). MPI_NET: the network
# of MPI's own traffic (default the management network, which survives the
# switch; 10.0.0.0/24 puts it on the same links as INCA's). The ranks run
# on INCA_RANK_CPUS (ns-rsh; --bind-to none keeps Open MPI from rebinding
# them to every CPU); OMPI_EAGER_LIMIT: ompi_eager
mpi_ranks() {
	local np=$1 per=$2 lib=$3 hosts
	shift 3
	hosts=$(mpi_hosts "$np" "$per")
	timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" --host "$hosts" \
		--mca plm_rsh_agent "$here/tests/bench/ns-rsh" --mca btl "$(ompi_btl "$per")" \
		${MPI_HAN:+--mca coll_han_priority 100} \
		--mca btl_tcp_if_include "${MPI_NET:-192.168.77.0/24}" --mca btl_tcp_links 2 $(ompi_eager) \
		--mca oob_tcp_if_include 192.168.77.0/24 --mca mpi_yield_when_idle 1 \
		-x INCA_TESTBED -x LD_PRELOAD="$lib" -x INCA_MANAGER -x INCA_MANAGER_TOKEN_FILE \
		-x INCA_IFNAME=eth0 -x INCA_TRANSPORT="${INCA_TRANSPORT:-udp}" \
		-x INCA_MPI_STATS="${INCA_MPI_STATS:-1}" -x INCA_MPI_VERBOSE="${INCA_MPI_VERBOSE:-1}" -x INCA_MPI="${INCA_MPI:-1}" \
		${INCA_MPI_OFFLOAD_AFTER:+-x INCA_MPI_OFFLOAD_AFTER} \
		${INCA_MPI_MIN_BYTES:+-x INCA_MPI_MIN_BYTES} ${INCA_MPI_POOL:+-x INCA_MPI_POOL} \
		${INCA_MPI_PASS_SETTLED:+-x INCA_MPI_PASS_SETTLED} "$@"
}

# mpich_ranks NP PER_HOST LIB ARGS...: the same for MPICH (Debian's mpich,
# ch4:ucx), launched by hydra (mpiexec.hydra) through ns-rsh: LIB
# (libinca-mpi-mpich) preloaded with -genv only (an exported LD_PRELOAD
# would reach ns-rsh and the proxies too), UCX on TCP over the management
# network between hosts and on shared memory inside one (as Open MPI's
# vader: UCX_TLS tcp,self without sm hung in MPI_Finalize in about half
# the runs here, MPICH alone, UCX 1.13: openucx/ucx#8738), hydra's own
# address on it (-localhost). MPICH_NET_DEVICE: UCX's device between hosts
# instead of mgmt0 (eth0: the links and switch INCA's traffic takes);
# MPICH_ALLREDUCE, MPICH_IALLREDUCE: MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM
# (smp, nb, ...), MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM (tsp_ring, ...);
# MPICH_UCX_TLS: UCX_TLS instead of tcp,self,sm.
mpich_ranks() {
	local np=$1 per=$2 lib=$3 hosts
	shift 3
	hosts=$(mpi_hosts "$np" "$per")
	HYDRA_LAUNCHER_AUTOFORK=0 timeout 900 mpiexec.hydra -n "$np" -hosts "$hosts" \
		-launcher rsh -launcher-exec "$here/tests/bench/ns-rsh" -localhost 192.168.77.254 \
		-bind-to none -genv INCA_TESTBED "$INCA_TESTBED" -genv LD_PRELOAD "$lib" \
		-genv INCA_MANAGER "$INCA_MANAGER" -genv INCA_MANAGER_TOKEN_FILE "$INCA_MANAGER_TOKEN_FILE" \
		-genv INCA_IFNAME eth0 -genv INCA_TRANSPORT "${INCA_TRANSPORT:-udp}" \
		-genv INCA_MPI_STATS 1 -genv INCA_MPI_VERBOSE "${INCA_MPI_VERBOSE:-1}" -genv INCA_MPI "${INCA_MPI:-1}" \
		${INCA_MPI_OFFLOAD_AFTER:+-genv INCA_MPI_OFFLOAD_AFTER "$INCA_MPI_OFFLOAD_AFTER"} \
		${INCA_MPI_POOL:+-genv INCA_MPI_POOL "$INCA_MPI_POOL"} \
		${INCA_MPI_MIN_BYTES:+-genv INCA_MPI_MIN_BYTES "$INCA_MPI_MIN_BYTES"} \
		${INCA_MPI_PASS_SETTLED:+-genv INCA_MPI_PASS_SETTLED "$INCA_MPI_PASS_SETTLED"} \
		${MPICH_ALLREDUCE:+-genv MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM "$MPICH_ALLREDUCE"} \
		${MPICH_IALLREDUCE:+-genv MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM "$MPICH_IALLREDUCE"} \
		-genv UCX_TLS "${MPICH_UCX_TLS:-tcp,self,sm}" -genv UCX_NET_DEVICES "${MPICH_NET_DEVICE:-mgmt0}" \
		"$@" < /dev/null
}

# osu_side_by_side A B: two OSU-style tables (# Size, Avg Latency) joined
# per size with A/B as the speed-up of B
osu_side_by_side() {
	awk 'FNR == 1 { f++ } /^[0-9]/ { t[f, $1] = $2; if (f == 1) order[++n] = $1 }
	     END {
		printf "%-10s %16s %16s %9s\n", "# Size", "Open MPI (us)", "libinca-mpi (us)", "speed-up"
		for (i = 1; i <= n; i++) { s = order[i]
			if (!((2, s) in t)) continue
			printf "%-10s %16.2f %16.2f %8.2fx\n", s, t[1, s], t[2, s], t[1, s] / t[2, s] }
	     }' "$1" "$2"
}

# osu_best A B: the faster of two OSU-style tables at each size (Open MPI
# at its best: its tuned component and coll/han, run by run)
osu_best() {
	awk 'FNR == 1 { f++ } /^[0-9]/ { if (!(($1) in t) || $2 < t[$1]) t[$1] = $2; if (f == 1) o[++n] = $1 }
	     END { print "# Size  Avg Latency(us)"; for (i = 1; i <= n; i++) print o[i], t[o[i]] }' "$1" "$2"
}
