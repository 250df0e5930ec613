#!/usr/bin/env bash
# The README's test command: installs what INCA needs, builds with -Werror,
# runs every test suite, then the unit suite again under AddressSanitizer +
# UndefinedBehaviorSanitizer, and the fuzz targets under libFuzzer (clang).
#
# Usage: deploy/test.sh [--no-install] [--quick]
#   --no-install  skip deploy/install-deps.sh
#   --quick       only the -Werror build and its tests
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
install=1
quick=0
for arg in "$@"; do
	case "$arg" in
	--no-install) install=0 ;;
	--quick) quick=1 ;;
	-h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "test.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
	esac
done

step() { printf '\n==== %s\n' "$*"; }

if [ "$install" = 1 ]; then
	step "installing dependencies (deploy/install-deps.sh)"
	"$here/deploy/install-deps.sh"
fi

# setup DIR [meson options...]: configure or reconfigure a build directory
setup() {
	local dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		meson setup --reconfigure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi
}

failed=()
run_suite() {
	local dir=$1
	shift
	if ! meson test -C "$dir" --print-errorlogs "$@"; then
		failed+=("$dir $*")
	fi
}

step "build: gcc, -Werror"
setup build-test/main -Dwerror=true
ninja -C build-test/main
step "tests: all suites"
run_suite build-test/main --no-suite bench

if [ "$quick" = 0 ]; then
	step "build: gcc, AddressSanitizer + UndefinedBehaviorSanitizer"
	setup build-test/asan -Dwerror=true -Db_sanitize=address,undefined \
		-Db_lundef=false -Dbuildtype=debug
	ninja -C build-test/asan
	step "tests: unit suite under ASan + UBSan"
	run_suite build-test/asan --suite unit

	step "build: clang, libFuzzer"
	CC=clang setup build-test/fuzz -Dwerror=true -Dfuzzing=true -Dtests=disabled
	ninja -C build-test/fuzz
	step "tests: fuzz suite (libFuzzer, bounded run)"
	run_suite build-test/fuzz --suite fuzz
fi

step "summary"
if [ "${#failed[@]}" -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
echo "all test runs passed"
