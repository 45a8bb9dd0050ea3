#!/bin/bash
# The kill -9 harness on the lifecycle workload: two killpoints_worker processes share one state directory
# (loop btrfs pool, busybox template, jail isolation) and are killed with SIGKILL at seeded random moments
# (killpoints), then killpoints_check reaps, checks the invariants (no lost, doubled or mis-stated
# sandbox), removes everything and checks nothing leaked; then leaks_of the journalled ids here.
# usage: killpoints.sh KILLPOINTS WORKER CHECK [ci|soak|helpers|helpers-soak]
#   ci: 50 kills, 200..2000 ms apart (about a minute);  soak: 500 kills (meson test --benchmark)
#   helpers: 20 kills of the sandboxes' own processes instead of the workers (the jail's PID 1, space-logcap,
#   space-gateway, space-snapd: killpoints_check --victims lists them) and of `space serve` (a third worker,
#   killpoints_serve.sh, drives the lifecycle through it), each followed by an after-kill check
#   (killpoints_check --after: the sandbox converges); helpers-soak: 200 of them.
#   $KILLPOINTS_SEED replays a run's kill schedule (the seed is printed first).
. "$(dirname "$0")/../lib.sh"
KP=${1:?killpoints}; WORKER=${2:?worker}; CHECK=${3:?checker}; MODE=${4:-ci}
need_built "$KP" killpoints; need_built "$WORKER" killpoints_worker; need_built "$CHECK" killpoints_check
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
case $MODE in
ci) kills=50 ;;
soak) kills=500 ;;
helpers) kills=20 ;;
helpers-soak) kills=200 ;;
*) fail "mode $MODE: ci, soak, helpers or helpers-soak" ;;
esac
make_state 2G
WORK=$(mktemp -d /tmp/space-killpoints-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
export SPACE_STATE_DIR=$STATE SPACE_API_TEMPLATE=tiny
victims=()
workers=2
worker_cmd="'$WORKER'"
case $MODE in
helpers*)
	# A third worker drives `space serve` over HTTP (killpoints_serve.sh), and the server is a victim too.
	command -v curl >/dev/null || skip "curl missing"
	setpriv --help 2>&1 | grep -q pdeathsig || skip "setpriv --pdeathsig missing (util-linux)"
	KILLPOINTS_API_KEY=$("$SPACE" apikey create --state "$STATE" 2>/dev/null) || fail "space apikey create"
	export KILLPOINTS_API_KEY KILLPOINTS_HELPERS=1 KILLPOINTS_SERVE_WORKER=2 KILLPOINTS_SERVE_PID=$WORK/serve.pid
	workers=3
	worker_cmd="'$(dirname "$0")/killpoints_serve.sh' '$WORKER'"
	victims=(--victims "'$CHECK' --victims" --after-kill "'$CHECK' --after")
	;;
esac
# Whatever a failed run leaves (processes and cgroups of sandboxes that no row names any more): ended by
# pid and removed, so a failure does not leak into the next test. Runs before make_state's own cleanup.
cleanup_orphans() {
	local id p h
	# Processes holding files of the state directory (a creator's forked child left waiting, say).
	for p in $(ls /proc | grep -E '^[0-9]+$'); do
		[ "$p" = $$ ] && continue
		ls -l "/proc/$p/fd" 2>/dev/null | grep -qF -- "$STATE/" && kill -9 "$p"
	done
	# Only what a journalled id names, each source read once (a run journals a thousand ids and more).
	local ids
	ids=$(mktemp)
	grep -o 'sb-[a-z2-7]\{16\}' "$WORK/journal" 2>/dev/null | sort -u >"$ids"
	local killed=0
	for p in $(pgrep -a -f -- 'sb-[a-z2-7]' | grep -F -f "$ids" | awk '{print $1}'); do
		[ "$p" = $$ ] || { kill -9 "$p" && killed=1; }
	done
	[ $killed = 1 ] && sleep 0.2
	for h in /sys/fs/cgroup /sys/fs/cgroup/pids /sys/fs/cgroup/memory /sys/fs/cgroup/cpu /sys/fs/cgroup/freezer; do
		for d in $(ls -d "$h"/space/sb-* "$h"/space-helpers/sb-* 2>/dev/null | grep -F -f "$ids"); do rmdir "$d"; done
	done
	rm -f "$ids"
}
on_exit cleanup_orphans
"$KP" ${KILLPOINTS_SEED:+--seed "$KILLPOINTS_SEED"} --kills "$kills" --workers "$workers" --min-ms 200 --max-ms 2000 \
	--journal "$WORK/journal" --worker "$worker_cmd" --check "'$CHECK'" "${victims[@]}" >"$WORK/out" 2>&1
rc=$?
# Not through a pipe: a process left behind with the worker's stdout would keep a reader waiting.
cat "$WORK/out"
last=$(tail -n 1 "$WORK/out")
echo "$last" | grep -q "^killpoints: [0-9]* kills" || fail "killpoints did not complete (exit $rc)"
done_kills=$(echo "$last" | awk '{print $2}')
grep -q "^killpoints-check: [0-9]* checks, [0-9]* failed$" "$WORK/out" || fail "the checker did not complete"
echo "journal: $(grep -c ' begin ' "$WORK/journal") operations begun, $(grep -c ' end .* rc=0' "$WORK/journal") succeeded"
if [ "$rc" != 0 ]; then
	# The journal's history of every sandbox an invariant names, for whoever reads the failure.
	for id in $(grep '^INVARIANT' "$WORK/out" | grep -o 'sb-[a-z2-7]\{16\}' | sort -u); do
		echo "history of $id:"
		grep -F "$id" "$WORK/journal" | sed 's/^/    /'
	done
	fail "invariants failed ($last); journal lines: $(wc -l <"$WORK/journal")"
fi
[ "$done_kills" -ge "$kills" ] || fail "only $done_kills kills"
if [ ${#victims[@]} -gt 0 ]; then
	# Each kill of a helper was checked; most kills must have found one (a worker is killed when none runs).
	helper_kills=$(echo "$last" | grep -o '[0-9]* helper kills' | awk '{print $1}')
	checks=$(echo "$last" | grep -o '[0-9]* after-kill checks' | awk '{print $1}')
	[ -n "$helper_kills" ] && [ "$checks" = "$helper_kills" ] || fail "no completion record of the helper kills"
	[ "$helper_kills" -ge $((kills / 2)) ] || fail "only $helper_kills of $done_kills kills found a helper"
	echo "helper kills by victim: $(grep -o '^killpoints: kill [0-9]*: [a-z]*' "$WORK/out" | awk '{print $4}' | sort | uniq -c | tr '\n' ' ')"
fi
ids=$(grep -o 'sb-[a-z2-7]\{16\}' "$WORK/journal" | sort -u)
left=$(leaks_of $ids)
if [ -n "$left" ]; then
	for id in $(echo "$left" | grep -o 'sb-[a-z2-7]\{16\}' | sort -u); do
		echo "history of $id:"
		grep -F "$id" "$WORK/journal" | sed 's/^/    /'
	done
	fail "left on the host: $left"
fi
echo "killpoints ($MODE): ok, $done_kills kills, $(echo "$ids" | grep -c sb-) sandboxes, nothing left"
