# Sourced by copy.sh and receive.sh (set -u, $U checked, root checked): what both tests of space-unpack
# start with.
#   unpack_setup NAME MOUNT RUNNER-ARGS...: $tmp, a directory removed at exit after MOUNT (a path under it,
#     unmounted if mounted there); RUN, the user-namespace runner (userns_run.py) with RUNNER-ARGS; exits 77
#     where it cannot make a user namespace with a mapped uid range, 1 where it does not run at all.
#   ok, bad, check WHAT CONDITION (shell code, evaluated now), counted in $checks and $fails.
BASE=300000

unpack_setup() {
	local name=$1 mnt=$2
	shift 2
	command -v python3 >/dev/null || { echo "SKIP: python3 missing"; exit 77; }
	tmp=$(mktemp -d "/tmp/space-unpack-$name.XXXXXX")
	unpack_mnt=$tmp/$mnt
	trap 'umount "$unpack_mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT
	RUN=("$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/userns_run.py" "$@")
	export UNPACK_TEST_BASE=$BASE
	python3 "${RUN[@]}" --userns /bin/true </dev/null 2>/dev/null
	case $? in
	0) ;;
	90 | 91) echo "SKIP: user namespaces with a mapped uid range are not available here"; exit 77 ;;
	*) echo "FAIL: the namespace wrapper does not run"; exit 1 ;;
	esac
}

checks=0 fails=0
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $checks - $*"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
