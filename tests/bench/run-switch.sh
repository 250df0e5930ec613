#!/usr/bin/env bash
# inca-switch microbenchmarks on in-memory (net_ring) ports: aggregation vs
# forwarding-only per busy worker core, for 2..32 members, and the engine
# alone. Writes OUT/switch.md. Usage: tests/bench/run-switch.sh [--out DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$here/bench-results
[ "${1:-}" = --out ] && out=${2:?}
mkdir -p "$out"
B=$here/build/tests/bench
{
	echo "# inca-switch microbenchmarks"
	echo
	echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), one worker core and one generator core; net_ring ports; fp32 sum, 1 KiB payloads; medians of 5 runs. Command: \`tests/bench/run-switch.sh\`."
	echo
	echo "| members | aggregation Mpps/busy core | ns/contribution | forwarding Mpps/busy core | ns/packet | aggregation / forwarding |"
	echo "|---:|---:|---:|---:|---:|---:|"
	for m in 2 4 8 16 32; do
		"$B/inca-bench-switch" -m "$m" -r 1000 2>/dev/null | awk -v m="$m" '
			/^aggregation  / { a = $3; an = $5 } /^forward-only/ { f = $3; fn = $5 }
			/^aggregation \/ forwarding/ { r = $NF }
			END { printf "| %s | %s | %s | %s | %s | %s |\n", m, a, an, f, fn, r }'
	done
	echo
	echo "The engine alone (\`build/tests/bench/inca-bench-agg\`, one core):"
	echo
	echo '```'
	"$B/inca-bench-agg"
	echo '```'
} > "$out/switch.md"
cat "$out/switch.md"
