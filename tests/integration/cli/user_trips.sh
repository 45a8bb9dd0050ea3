#!/bin/bash
# Issue 20, "non-root callers" and "small things a user trips on", as a user meets them:
#  - a non-root user against a root-only state directory is told it needs root (never "not initialized"),
#    by every command, and `space doctor` says "needs root" for a closed device, not "modprobe";
#  - sizes and durations take units (--memory 1G, --timeout 10m, `space timeout ID 2h`), bad ones are refused
#    with the range, and the longest lifetime is one limit (366d) named in the refusal;
#  - `space ls` shows the time left (EXPIRES) and --json carries expires_ms;
#  - --cpus N makes `nproc` inside a jail say N;
#  - a killed log writer (space-logcap) is replaced by the next reap, and the log grows again;
#  - a jail's processes are the host OOM killer's first choice (oom_score_adj 500, never below 0 from inside);
#  - `run --help` says the default isolation is the state directory's; `logs --help` says what it shows.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
command -v setpriv >/dev/null || skip "setpriv missing (util-linux)"
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
export SPACE_QUIET_JAIL=1
checks=0
ok() { checks=$((checks + 1)); }

make_state 2G
S=(--state "$STATE")

# ---- non-root: one answer, from every command ----
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
"${NOBODY[@]}" "$SPACE" version >/dev/null 2>&1 ||
	skip "user nobody cannot run $SPACE (a build directory under a private path)"
[ "$(stat -c %a "$STATE")" = 700 ] || fail "state directory is not root-only: $(stat -c %a "$STATE")"
for c in "ls" "template ls" "checkpoints" "pool info" "kernel ls" "secret ls" "events sb-aaaaaaaaaaaaaaaa" \
	"rm sb-aaaaaaaaaaaaaaaa" "logs sb-aaaaaaaaaaaaaaaa" "create --isolation jail" "timeout sb-aaaaaaaaaaaaaaaa 5m" \
	"checkpoint sb-aaaaaaaaaaaaaaaa" "fork cp-aaaaaaaaaaaaaaaa" "pause sb-aaaaaaaaaaaaaaaa"; do
	# shellcheck disable=SC2086 # the command's words
	expect_rc 1 "${NOBODY[@]}" "$SPACE" $c "${S[@]}"
	echo "$err" | grep -q "needs root" || fail "non-root '$c' does not say it needs root: $err"
	echo "$err" | grep -qi "not initialized" && fail "non-root '$c' says 'not initialized': $err"
	ok
done
# apikey (`space serve`'s store) says the same, where the server is built.
"${NOBODY[@]}" "$SPACE" apikey ls "${S[@]}" >/dev/null 2>"$STATE.err"
grep -q "without libmicrohttpd" "$STATE.err" || grep -q "needs root" "$STATE.err" ||
	fail "non-root apikey ls: $(cat "$STATE.err")"
rm -f "$STATE.err"; ok
# doctor: a permission error is "needs root", never a missing module.
out=$("${NOBODY[@]}" "$SPACE" doctor "${S[@]}" 2>&1)
echo "$out" | grep -A1 '^FAIL  pool' | grep -q "needs root" || fail "doctor's pool check as non-root: $out"
if [ -e /dev/loop-control ] && ! "${NOBODY[@]}" test -r /dev/loop-control; then
	echo "$out" | grep -A1 '^warn  loop' | grep -q "needs root" || fail "doctor's loop check as non-root: $out"
	echo "$out" | grep -q "modprobe loop" && fail "doctor suggests modprobe for a permission error: $out"
fi
ok
# Root still sees an initialized directory.
expect_rc 0 "$SPACE" ls "${S[@]}"; ok

# ---- units, limits, the expiry column ----
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" "${S[@]}"
C=(create --template tiny --isolation jail "${S[@]}")
for bad in "--memory 1X" "--memory -1" "--memory ''" "--memory 100K" "--memory 99999999999999999999G" \
	"--timeout 1X" "--timeout -1" "--timeout ''" "--timeout 10ms" "--timeout 367d" \
	"--timeout 99999999999999999999" "--exec-timeout 2d"; do
	eval "expect_rc 2 \"\$SPACE\" \"\${C[@]}\" $bad"
	ok
done
expect_rc 2 "$SPACE" "${C[@]}" --timeout 367d
echo "$err" | grep -q "366d" || fail "the refused lifetime does not name the limit: $err"; ok
expect_rc 0 "$SPACE" "${C[@]}" --memory 1G --timeout 10m
id=$out
on_exit "'$SPACE' rm '$id' --state '$STATE'"
line=$("$SPACE" ls "${S[@]}" | grep -F "$id")
"$SPACE" ls "${S[@]}" | head -1 | grep -q ' EXPIRES ' || fail "no EXPIRES column: $("$SPACE" ls "${S[@]}")"
echo "$line" | grep -q ' 1024M ' || fail "--memory 1G is not 1024 MiB: $line"
echo "$line" | grep -Eq ' (10m|9m[0-5]?[0-9]s) ' || fail "EXPIRES of a 10m lifetime: $line"
ok
now=$(date +%s)
exp=$("$SPACE" ls --json "${S[@]}" | tr -d ' \t\n' | grep -o "\"id\":\"$id\"[^}]*" | grep -o '"expires_ms":[0-9]*' | cut -d: -f2)
[ -n "$exp" ] && [ $((exp / 1000 - now)) -ge 580 ] && [ $((exp / 1000 - now)) -le 601 ] ||
	fail "ls --json expires_ms '$exp' is not 10 minutes from $now"
ok
expect_rc 0 "$SPACE" timeout "$id" 2h "${S[@]}"
"$SPACE" ls "${S[@]}" | grep -F "$id" | grep -Eq ' (2h|1h59m) ' || fail "EXPIRES after timeout 2h: $("$SPACE" ls "${S[@]}")"
expect_rc 2 "$SPACE" timeout "$id" 367d "${S[@]}"
echo "$err" | grep -q "366d" || fail "timeout over the limit does not name it: $err"
expect_rc 2 "$SPACE" timeout "$id" 1X "${S[@]}"
expect_rc 0 "$SPACE" timeout "$id" 0 "${S[@]}"
"$SPACE" ls "${S[@]}" | grep -F "$id" | grep -Eq ' 1024M +- ' || fail "EXPIRES of no lifetime is not '-': $("$SPACE" ls "${S[@]}")"
ok

# ---- --cpus N is what nproc says inside a jail ----
R=(run --template tiny --isolation jail "${S[@]}")
expect_rc 0 "$SPACE" "${R[@]}" --cpus 1 -- nproc
[ "$out" = 1 ] || fail "nproc with --cpus 1 says '$out' (host: $(nproc))"
ok
if [ "$(nproc)" -ge 2 ]; then
	expect_rc 0 "$SPACE" "${R[@]}" --cpus 2 -- nproc
	[ "$out" = 2 ] || fail "nproc with --cpus 2 says '$out'"
	ok
fi
# A sandbox may ask for more CPUs than the host has: then it sees them all.
expect_rc 0 "$SPACE" "${R[@]}" --cpus 64 -- nproc
[ "$out" = "$(nproc)" ] || fail "nproc with --cpus 64 says '$out', host $(nproc)"
ok

# ---- under host memory pressure a sandbox dies before the host's processes: its processes start at
# oom_score_adj 500; root inside may lower that to the host's default (0), never below ----
expect_rc 0 "$SPACE" "${R[@]}" -- sh -c 'cat /proc/self/oom_score_adj; echo -1 > /proc/self/oom_score_adj 2>/dev/null && echo BELOW; cat /proc/self/oom_score_adj'
[ "$(echo "$out" | head -n 1)" = 500 ] || fail "oom_score_adj inside a jail is '$(echo "$out" | head -n 1)', not 500"
echo "$out" | grep -q BELOW && fail "root in the jail set its oom_score_adj below the host's default: $out"
[ "$(echo "$out" | tail -n 1)" = 500 ] || fail "oom_score_adj after the attempt to lower it below 0: $out"
ok

# ---- a jail's log writer killed: the next reap starts a new one, and the log grows again ----
expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
lid=$out
lc=$(cut -d' ' -f1 "$STATE/run/$lid/logcap.pid" 2>/dev/null)
[ -n "$lc" ] && [ "$(cat /proc/"$lc"/comm 2>/dev/null)" = space-logcap ] || fail "no space-logcap recorded for $lid: '$lc'"
kill -KILL "$lc"
for _ in $(seq 50); do [ -d /proc/"$lc" ] || break; sleep 0.1; done
expect_rc 0 "$SPACE" ls "${S[@]}" # the reap
lc2=$(cut -d' ' -f1 "$STATE/run/$lid/logcap.pid")
[ "$lc2" != "$lc" ] && [ "$(cat /proc/"$lc2"/comm 2>/dev/null)" = space-logcap ] ||
	fail "after the reap, the log writer is '$lc2' (killed: $lc)"
luid=$(cut -d' ' -f3 "$STATE/run/$lid/logcap.pid")
wuid=$(awk '/^Uid:/ { print $2 }' /proc/"$lc2"/status 2>/dev/null)
[ -n "$luid" ] && [ "$luid" = "$wuid" ] || fail "logcap.pid records uid '$luid'; the new writer runs as '$wuid'"
expect_rc 0 "$SPACE" events "$lid" "${S[@]}"
echo "$out" | grep -q "its log writer (space-logcap) died; a new one started" || fail "no helper event: $out"
# The agent's own line at the end of its lifetime goes to the new writer.
lpid=$("$SPACE" ls --json "${S[@]}" | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['id']=='$lid'][0])")
expect_rc 0 "$SPACE" timeout "$lid" 1 "${S[@]}"
for _ in $(seq 100); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.1; done
expect_rc 0 "$SPACE" logs "$lid" "${S[@]}"
echo "$out" | grep -q "lifetime has ended" || fail "the log did not grow after the new writer started: $out"
# The writer's uid slot is recorded beside its pid (a destroy frees it without listing every slot of the
# machine), and the destroy frees it.
grep -lsF " $lid logcap" /run/space-uids/* >/dev/null || fail "no uid slot names the log writer of $lid"
expect_rc 0 "$SPACE" rm -f "$lid" "${S[@]}"
held=$(grep -lsF " $lid " /run/space-uids/*)
[ -z "$held" ] || fail "uid slots still held after rm: $held"
ok

# ---- help texts that said the wrong thing ----
expect_rc 0 "$SPACE" run --help
echo "$out" | grep -q "vm (default)" && fail "run --help still says 'vm (default)'"
echo "$out" | grep -q "state directory" || fail "run --help does not say where the default isolation comes from"
expect_rc 0 "$SPACE" logs --help
echo "$out" | grep -q "not commands' output" || fail "logs --help does not say what it shows: $out"
ok

[ -z "$(leaks_of "$id")" ] || true # removed by the exit trap; leaks are the lifecycle tests' business
echo "PASS: user-trips ($checks checks)"
