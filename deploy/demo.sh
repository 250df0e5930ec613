#!/usr/bin/env bash
# The README's main command. Today: installs, builds, and runs the
# aggregation engine benchmark. (The testbed demo replaces this when the
# switch, host library and manager land.)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
case "${1:-}" in
-h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
"") ;;
*) echo "demo.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac

echo "==== installing dependencies"
"$here/deploy/install-deps.sh"
echo "==== building (build/)"
if [ -f build/build.ninja ]; then meson setup --reconfigure build >/dev/null
else meson setup build >/dev/null; fi
ninja -C build
echo "==== aggregation engine benchmark (one core, about 15 s)"
build/tests/bench/inca-bench-agg
