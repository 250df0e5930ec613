# Sourced by deploy/testbed and deploy/fabric: start, find and stop an
# inca-switch the script runs, with one timeout for both.

# How long a switch may take to log "inca-switch: ready" (the fabric's
# switches start one after another on a loaded 2-core machine).
SWITCH_READY_S=30

# child_alive PID: PID, a switch this script just started in the background,
# has not exited. Only its existence counts: until the forked shell has
# exec'd the switch its command line is still the script's, so matching it
# against inca-switch here would take a slow start for an exit.
child_alive() {
	[ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# switch_pid PIDFILE: the pid PIDFILE holds, if that process is still an
# inca-switch (only a process we started).
switch_pid() {
	local pid
	[ -f "$1" ] || return 1
	pid=$(cat "$1")
	[ -d "/proc/$pid" ] && grep -q inca-switch "/proc/$pid/cmdline" 2>/dev/null || return 1
	echo "$pid"
}

# switch_stop PIDFILE [SIGNAL]: send SIGNAL (TERM) to the switch, and
# SIGKILL if it has not exited 5 s later.
switch_stop() {
	local pid i
	pid=$(switch_pid "$1") || return 0
	kill -"${2:-TERM}" "$pid" 2>/dev/null || true
	for i in $(seq 50); do
		[ -d "/proc/$pid" ] || return 0
		sleep 0.1
	done
	echo "switch $pid did not stop in 5 s, killing it" >&2
	kill -KILL "$pid" 2>/dev/null || true
}

# switch_start CMDFILE LOG PIDFILE: run the command CMDFILE declares (the
# arrays cmd and args) in a session of its own, appending to LOG, its pid
# in PIDFILE, and wait for a new "inca-switch: ready" line in LOG.
# Returns 0 when ready; 1 when it exited, 2 when not ready within
# SWITCH_READY_S (either way the log's last lines go to stderr).
switch_start() {
	local cmdfile=$1 log=$2 pidfile=$3 before i cmd args attempt
	# shellcheck disable=SC1090
	source "$cmdfile"
	touch "$log"
	# DPDK's af_packet PMD names its PACKET_FANOUT group after its pid and
	# the interface's index; a group of another process in the namespace
	# with the same number refuses it (EINVAL, seen once in a CI run):
	# another pid is another number, so such a start is tried once more
	for attempt in 1 2; do
		before=$(grep -c "inca-switch: ready" "$log" || true)
		setsid "${cmd[@]}" "${args[@]}" >> "$log" 2>&1 < /dev/null &
		echo $! > "$pidfile"
		for i in $(seq $((SWITCH_READY_S * 10))); do
			if [ "$(grep -c "inca-switch: ready" "$log" || true)" -gt "$before" ]; then
				return 0
			fi
			if ! child_alive "$(cat "$pidfile")"; then
				if [ "$attempt" = 1 ] && tail -20 "$log" | grep -q "could not set PACKET_FANOUT"; then
					echo "switch: PACKET_FANOUT refused (a fanout group of the same number): starting again" >> "$log"
					continue 2
				fi
				tail -20 "$log" >&2
				return 1
			fi
			sleep 0.1
		done
		tail -20 "$log" >&2
		return 2
	done
}
