# Shared helpers for the shell tests. Source it; it sets `set -u` and a cleanup trap runner.
set -u
SPACE=${SPACE_CLI:?SPACE_CLI must point at the built space binary}
# Ours: a CLI that is not there is a broken build (a failure), never a reason to skip.
[ -x "$SPACE" ] || { echo "FAIL: the space CLI not built (SPACE_CLI=$SPACE)" >&2; exit 1; }
_cleanups=()
on_exit() { _cleanups+=("$*"); }
_run_cleanups() {
	local i
	for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do eval "${_cleanups[$i]}" >/dev/null 2>&1 || true; done
}
trap _run_cleanups EXIT
# A test killed on its timeout (SIGTERM from meson) or interrupted still cleans up after itself.
trap 'exit 143' TERM
trap 'exit 130' INT
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || skip "needs root"; }
need_btrfs() { grep -qw btrfs /proc/filesystems || modprobe btrfs 2>/dev/null || skip "no btrfs in this kernel"; command -v mkfs.btrfs >/dev/null || skip "mkfs.btrfs missing (btrfs-progs)"; }
need_loop() { [ -e /dev/loop-control ] || skip "no /dev/loop-control"; }
# need_sdk PACKAGE@RANGE...: the npm packages (an SDK), installed once into $SDK
# (${SPACE_E2B_SDK_DIR:-/var/cache/space/npm/sdk}; another directory tries other versions). Skips when node,
# or npm for an install, is missing, or the registry cannot be reached. Sets SDK.
need_sdk() {
	command -v node >/dev/null || skip "node missing"
	SDK=${SPACE_E2B_SDK_DIR:-/var/cache/space/npm/sdk}
	local req= p
	for p in "$@"; do req="$req require('${p%@*}');"; done
	(cd "$SDK" 2>/dev/null && node -e "$req" 2>/dev/null) && return 0
	command -v npm >/dev/null || skip "npm missing"
	mkdir -p "$SDK" || skip "cannot create $SDK"
	[ -f "$SDK/package.json" ] || echo '{"name":"space-e2b-sdk-cache","private":true}' >"$SDK/package.json"
	(cd "$SDK" && timeout 300 npm install --no-audit --no-fund --cache /var/cache/space/npm/cache "$@") \
		>/dev/null 2>&1 || skip "cannot install $* with npm (registry unreachable?)"
}
# need_built PATH WHAT [VAR]: a program of ours the test needs (VAR: the variable that names it). Skips are
# for what the host lacks; a missing build product is a broken build, and fails.
need_built() { [ -x "$1" ] || fail "$2 not built (${3:+$3=}${1:-unset}): a missing build product fails the test"; }
# expect_rc WANT CMD...: runs CMD, stores stdout/stderr in $out/$err, fails unless it exits WANT.
expect_rc() {
	local want=$1; shift
	local tmpo tmpe
	tmpo=$(mktemp); tmpe=$(mktemp)
	"$@" >"$tmpo" 2>"$tmpe"; rc=$?
	out=$(cat "$tmpo"); err=$(cat "$tmpe"); rm -f "$tmpo" "$tmpe"
	[ "$rc" = "$want" ] || fail "'$*' exited $rc, wanted $want; stdout: $out; stderr: $err"
}
# A busybox root tree in $1 (needs busybox-static).
make_busybox_tree() {
	local bb
	bb=$(command -v busybox) || skip "busybox missing (busybox-static)"
	file -L "$bb" 2>/dev/null | grep -q 'dynamically' && skip "busybox is not static (install busybox-static)"
	"${SPACE_SOURCE_DIR:-$(dirname "${BASH_SOURCE[0]}")/..}/scripts/busybox-tree.sh" "$1" || fail "busybox tree"
}
# State dir with a loop pool in a fresh temp dir; unmounted and removed at exit.
make_state() {
	STATE=$(mktemp -d /tmp/space-test-XXXXXX)
	on_exit "rm -rf '$STATE'"
	on_exit "'$SPACE' pool unmount --state '$STATE'; umount '$STATE/pool' 2>/dev/null"
	# Before the pool goes: any sandbox a failed test did not remove itself (they all are the test's).
	on_exit "for _id in \$('$SPACE' ls --json --state '$STATE' | grep -o '\"id\":[[:space:]]*\"sb-[a-z0-9]*\"' | cut -d'\"' -f4); do '$SPACE' rm \$_id --state '$STATE'; done"
	"$SPACE" init --loop-pool "${1:-2G}" --state "$STATE" >/dev/null 2>&1 || fail "space init failed"
}
# Everything a sandbox could leak on the host, for the ids given: mounts, loop devices, processes,
# cgroups, network namespaces. Prints what is left; empty when clean.
leaks_of() {
	[ $# -gt 0 ] || return 0
	local ids
	ids=$(mktemp)
	printf '%s\n' "$@" >"$ids"
	# Each source is read once and matched against every id (thousands of ids after a kill harness).
	grep -F -f "$ids" /proc/mounts
	losetup -a | grep -F -f "$ids"
	find /sys/fs/cgroup -maxdepth 4 -type d -name 'sb-*' 2>/dev/null | grep -F -f "$ids"
	ip netns list | grep -F -f "$ids"
	# A process of a jail: its agent's "--hostname ID" argument, at the end or followed by a space.
	pgrep -a -f -- '--hostname sb-' | grep -E -f <(sed 's/.*/--hostname &( |$)/' "$ids")
	rm -f "$ids"
	return 0
}
# is_ours PID: PID is still a child of this shell. A child that has ended and been waited for leaves its
# number free, and pids wrap (32768 here, and a fork bomb test goes through thousands): a number kept for a
# cleanup at exit may be another test's process by then, which must never be signalled.
is_ours() { [ -n "${1:-}" ] && [ "$(sed -n 's/.*) [A-Za-z] \([0-9]*\) .*/\1/p' "/proc/$1/stat" 2>/dev/null)" = "$$" ]; }
# kill_ours [-SIG] PID...: SIGTERM (or SIG) to each PID that is still a child of this shell (is_ours); others
# are left alone.
kill_ours() {
	local p sig=-TERM
	case "${1:-}" in -*) sig=$1; shift ;; esac
	for p in "$@"; do is_ours "$p" && kill "$sig" "$p" 2>/dev/null; done
	return 0
}
# stop_pid PID SECONDS: SIGTERM to a child of this shell, SIGKILL if it has not exited SECONDS later; returns
# 0 only when it exited on the SIGTERM, with status 0. A PID that is no longer our child is not signalled.
stop_pid() {
	local i
	is_ours "$1" || { wait "$1" 2>/dev/null; return 1; }
	kill -TERM "$1" 2>/dev/null
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || { wait "$1"; return; }
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1"
	return 1
}
# start_unix_server SOCK [ARGS...]: `space serve --unix SOCK` on $STATE, its access log and stderr in
# $WORK/access.log and $WORK/serve.err; sets SERVE_PID once the socket is there; stopped at exit (SIGKILL
# after 10 s: a server stuck in its shutdown fails its test, it does not outlive it).
start_unix_server() {
	local sock=$1 _
	shift
	"$SPACE" serve --unix "$sock" --state "$STATE" "$@" >"$WORK/access.log" 2>"$WORK/serve.err" &
	SERVE_PID=$!
	on_exit "stop_pid $SERVE_PID 10"
	for _ in $(seq 100); do
		[ -S "$sock" ] && return 0
		kill -0 "$SERVE_PID" || fail "space serve exited: $(cat "$WORK/serve.err")"
		sleep 0.1
	done
	fail "no socket at $sock: $(cat "$WORK/serve.err")"
}
# A jail test's whole set-up: root, btrfs, loop devices, the agent and namespaces (else it skips), a state
# directory with a pool of SIZE (default 2G), a work directory $WORK, a busybox template "tiny" imported
# from $WORK/tree, and S=(--state "$STATE") for the CLI.
jail_test_setup() {
	need_root; need_btrfs; need_loop
	need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
	unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
	export SPACE_QUIET_JAIL=1
	make_state "${1:-2G}"
	WORK=$(mktemp -d /tmp/space-work-XXXXXX)
	on_exit "rm -rf '$WORK'"
	make_busybox_tree "$WORK/tree"
	expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
	S=(--state "$STATE")
}
# Port forward tests (issue 18). PORT_SERVERS: a script for `sh -c` inside a busybox sandbox that starts a
# file server on 127.0.0.1:8000 (/srv/hello.txt) and an "upgrade" server on 9000 (answers 101 to a request
# head, then echoes every line).
PORT_SERVERS='
	mkdir -p /srv && echo "hello from the sandbox" >/srv/hello.txt
	printf "%s\n" "#!/bin/sh" "while read -r l && [ \"\$l\" != \"\$(printf \"\\r\")\" ]; do :; done" \
		"printf \"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: echo\\r\\nConnection: Upgrade\\r\\n\\r\\n\"" \
		"exec cat" >/up.sh && chmod +x /up.sh
	httpd -p 127.0.0.1:8000 -h /srv
	setsid nc -ll -p 9000 -e /up.sh </dev/null >/dev/null 2>&1 &
	sleep 0.3'
# upgrade_echo HOST:PORT [HOST-HEADER [ACCESS-TOKEN [HEADER...]]]: sends an Upgrade request (with the extra
# header lines), then a line after the answer's head; prints "<status line> | <line echoed>" (upgrade_echo.py).
upgrade_echo() { python3 "$(dirname "${BASH_SOURCE[0]}")/upgrade_echo.py" "$1" "${2:-x}" "${3:-}" "${@:4}"; }
# host_listener DIR: a listener on the host's 127.0.0.1 (an ephemeral port, in $HP) that writes DIR/reached
# when anything connects; killed at exit.
host_listener() {
	python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
open(sys.argv[1], "w").write("reached")' "$1/reached" >"$1/host.port" &
	on_exit "kill_ours $!"
	local i
	for i in $(seq 50); do [ -s "$1/host.port" ] && break; sleep 0.1; done
	HP=$(cat "$1/host.port")
	[ -n "$HP" ] || fail "host listener"
}
