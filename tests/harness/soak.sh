#!/bin/bash
# The soak (soak.c): N clients, half through the library and half through `space serve --unix` (their uid's
# grant, no key sent), run mixed lifecycle operations on jail sandboxes for a duration, with a leak check
# every minute and at the end. Judged by its last line:
#   soak: minutes=M clients=N ops=N errors=0 leaks=0 serve_rss_start_kib=A serve_rss_end_kib=B
# (errors and leaks 0, B within 10% of A, ops > 0), and by leaks_of the run's ids here afterwards.
# usage: soak.sh SOAK [ci|long]   ci: 3 minutes, 16 clients; long: 30 minutes, 16 clients
#   $SOAK_SEED replays a run's choices (the seed is printed first); $SOAK_SECONDS overrides the duration.
. "$(dirname "$0")/../lib.sh"
SOAK=${1:?soak}; MODE=${2:-ci}
need_built "$SOAK" soak
case $MODE in
ci) seconds=180 ;;
long) seconds=1800 ;;
*) fail "mode $MODE: ci or long" ;;
esac
seconds=${SOAK_SECONDS:-$seconds}
jail_test_setup 4G
"$SPACE" serve --help >/dev/null 2>&1 || skip "space built without libmicrohttpd"
export SPACE_STATE_DIR=$STATE SPACE_API_TEMPLATE=tiny
# The HTTP clients are this process's threads: root's uid acts with the key the operator grants it.
expect_rc 0 "$SPACE" apikey create --name soak --uid 0 "${S[@]}"
SOCK=$WORK/api.sock
start_unix_server "$SOCK"

"$SOAK" --seconds "$seconds" --clients 16 --socket "$SOCK" --serve-pid "$SERVE_PID" ${SOAK_SEED:+--seed "$SOAK_SEED"} \
	| tee "$WORK/soak.out"
rc=${PIPESTATUS[0]}
kill -0 $SERVE_PID || fail "space serve died during the soak: $(tail -20 "$WORK/serve.err")"
line=$(grep '^soak: minutes=' "$WORK/soak.out" | tail -1)
[ -n "$line" ] || fail "the soak printed no result line (exit $rc)"
echo "$line" | grep -Eq ' ops=[1-9][0-9]* errors=0 leaks=0 ' || fail "soak: $line"
[ "$rc" = 0 ] || fail "soak exited $rc: $line"
# The run's own ids, by the shell's sources too (lib.sh).
ids=$(grep -o '"sandbox":"sb-[a-z2-7]\{16\}"' "$WORK/access.log" | cut -d'"' -f4 | sort -u)
left=$(leaks_of $ids)
[ -z "$left" ] || fail "leaks_of the HTTP clients' sandboxes: $left"
stop_pid $SERVE_PID 30 || fail "space serve did not exit 0 within 30 s of SIGTERM: $(tail -5 "$WORK/serve.err")"
[ -e "$SOCK" ] && fail "socket left after the server stopped"
echo "soak: ok ($line)"
