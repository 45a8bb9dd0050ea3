#!/bin/bash
# What a sandbox can make the host print is escaped, and what it can make the host store is bounded
# (issue 14, items 5 and 4), seen through the CLI with a jail sandbox:
#  - `space events`: a detail holding ESC ] 0 ; PWNED BEL, CSI, C1 (raw and as UTF-8), DEL and invalid
#    UTF-8 prints with no raw control byte, and `--json` is valid UTF-8 JSON (python's json.loads) that
#    keeps the text; end to end, a DNS query from the sandbox's network named with the escape, refused
#    and recorded by its gateway, prints escaped too;
#  - `space logs`: escape sequences in a sandbox's log print escaped (UTF-8 text kept whole across read
#    chunks), `--raw` gives the bytes as stored;
#  - the event log's retention: a sandbox's rows beyond its share and rows older than the age limit are
#    pruned as events come; `space rm` removes a sandbox's events, `space rm --keep-events` keeps them.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
need_built "${SPACE_GATEWAY_PATH:-}" space-gateway SPACE_GATEWAY_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
command -v sqlite3 >/dev/null || skip "sqlite3 missing (the test writes rows into the store directly)"
command -v python3 >/dev/null || skip "python3 missing"
command -v nsenter >/dev/null || skip "nsenter missing (util-linux)"
export SPACE_QUIET_JAIL=1

checks=0
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }
make_state 2G
WORK=$(mktemp -d /tmp/space-hostile-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
S=(--state "$STATE")
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" "${S[@]}"
DB=$STATE/space.db
now_ms() { date +%s%3N; }

# clean FILE [json]: the bytes of FILE are what a terminal may be shown: valid UTF-8, no C0 control but
# newline and tab, no DEL, no C1; with json, also a JSON document. Prints the reason when not.
clean() {
	python3 - "$@" <<'PY'
import json, sys
data = open(sys.argv[1], "rb").read()
try:
    text = data.decode("utf-8", errors="strict")
except UnicodeDecodeError as e:
    sys.exit("invalid UTF-8: %s" % e)
for i, c in enumerate(text):
    o = ord(c)
    if (o < 0x20 and c not in "\n\t") or o == 0x7f or 0x80 <= o <= 0x9f:
        sys.exit("raw control U+%04X at %d: %r" % (o, i, text[max(0, i - 20):i + 20]))
if len(sys.argv) > 2:
    json.loads(text)
PY
}

# ---- space events: stored rows with every kind of hostile byte ---------------------------------------
fake=sb-hostiletext00001
# "dns " ESC ] 0 ; PWNED BEL ".evil.test csi:" ESC [2J " c1:" 0x9b "31m u8c1:" U+009B " del:" DEL
# " bad:" ff c0 80 " ok:" é
detail=$(printf 'dns \033]0;PWNED\007.evil.test csi:\033[2J c1:\23331m u8c1:\302\233 del:\177 bad:\377\300\200 ok:\303\251' |
	od -An -tx1 | tr -d ' \n')
sqlite3 "$DB" "INSERT INTO events(ts_ms, sandbox_id, kind, detail)
	VALUES ($(now_ms), '$fake', 'egress-denied', CAST(X'$detail' AS TEXT))" || fail "insert a row"
"$SPACE" events "$fake" "${S[@]}" >"$WORK/ev.txt" || fail "space events failed"
grep -q . "$WORK/ev.txt" || fail "space events printed nothing"
why=$(clean "$WORK/ev.txt") || fail "space events: $why"
grep -qF 'dns \x1b]0;PWNED\x07.evil.test csi:\x1b[2J c1:\x9b31m u8c1:\xc2\x9b del:\x7f bad:\xff\xc0\x80 ok:é' \
	"$WORK/ev.txt" || fail "the detail is not shown escaped: $(cat "$WORK/ev.txt")"
ok "space events shows ESC, CSI, C1, DEL and invalid UTF-8 escaped, UTF-8 text kept"

"$SPACE" events "$fake" --json "${S[@]}" >"$WORK/ev.json" || fail "space events --json failed"
why=$(clean "$WORK/ev.json" json) || fail "space events --json: $why"
python3 - "$WORK/ev.json" <<'PY' || fail "space events --json lost the text"
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))[0]["detail"]
assert "\x1b]0;PWNED\x07.evil.test" in d, d
assert "u8c1:\x9b del:\x7f bad:\ufffd" in d and d.endswith("ok:\u00e9"), d
PY
ok "space events --json is valid UTF-8 JSON that keeps the text (invalid bytes as U+FFFD)"

# ---- space events: end to end, a query from the sandbox's own network --------------------------------
# An empty policy: no egress, and a gateway that records every attempt (without a policy none runs).
echo '{}' >"$STATE/empty-policy.json"
expect_rc 0 "$SPACE" create --template tiny --isolation jail --policy "$STATE/empty-policy.json" "${S[@]}"
A=$out
on_exit "'$SPACE' rm '$A' --state '$STATE'"
pidA=$("$SPACE" ls --json "${S[@]}" | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['id']=='$A'][0])")
[ -d "/proc/$pidA" ] || fail "no PID 1 for $A"
# The sandbox's network namespace (its PID 1's): a query to its gateway, as any process inside can send.
rcode=$(nsenter -t "$pidA" -n python3 - <<'PY'
import socket, struct
labels = [b"\x1b]0;PWNED\x07", b"evil", b"test"]
q = struct.pack(">HHHHHH", 4242, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l for l in labels) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, ("10.201.0.1", 53))
try:
    print(s.recv(1500)[3] & 15)
except socket.timeout:
    print("timeout")
PY
)
[ "$rcode" = 3 ] || [ "$rcode" = 5 ] || fail "the gateway did not refuse the query: rcode '$rcode'"
found=0
for _ in $(seq 50); do
	"$SPACE" events "$A" "${S[@]}" >"$WORK/evA.txt" 2>/dev/null || true
	grep -qi 'evil\.test' "$WORK/evA.txt" && { found=1; break; }
	sleep 0.1
done
[ $found = 1 ] || fail "the refused query is not in the events of $A: $(cat "$WORK/evA.txt")"
why=$(clean "$WORK/evA.txt") || fail "space events $A: $why"
grep -qiF '\x1b]0;pwned\x07.evil.test' "$WORK/evA.txt" || fail "the query is not shown escaped: $(cat "$WORK/evA.txt")"
"$SPACE" events "$A" --json "${S[@]}" >"$WORK/evA.json" || fail "space events --json $A"
why=$(clean "$WORK/evA.json" json) || fail "space events --json $A: $why"
ok "a DNS query named ESC ] 0 ; PWNED BEL from the sandbox shows escaped in space events (text and JSON)"

# ---- space logs ------------------------------------------------------------------------------------
# The descriptors of its PID 1 are the way a jail used to reach its log (issue 14): tried, and reported.
expect_rc 0 "$SPACE" exec "$A" "${S[@]}" -- sh -c \
	'for f in /proc/1/fd/1 /proc/1/fd/2; do printf "\033]0;PWNED-JAIL\007\033[2J\n" 2>/dev/null >"$f" && echo "wrote $f"; done; true'
channel=${out:-closed}
# What any VM guest can always do (its serial console is the log), appended as space-vmm writes it; plus
# 300 KB of UTF-8 text in characters of 2, 3 and 4 bytes, which read chunks are bound to cut.
log=$STATE/run/$A/sandbox.log
[ -f "$log" ] || fail "no $log"
printf 'console: \033]0;PWNED\007 \033[31mred\033[0m c1:\233 del:\177 bad:\377 tab:\tend\n' >>"$log"
python3 -c 'import sys; sys.stdout.write("text:" + "é中😀" * 33000 + ":text\n")' >>"$log"
"$SPACE" logs "$A" "${S[@]}" >"$WORK/logs.txt" || fail "space logs failed"
why=$(clean "$WORK/logs.txt") || fail "space logs: $why"
grep -qF 'console: \x1b]0;PWNED\x07 \x1b[31mred\x1b[0m c1:\x9b del:\x7f bad:\xff tab:	end' "$WORK/logs.txt" ||
	fail "the console line is not shown escaped: $(grep console "$WORK/logs.txt")"
grep -q '^text:' "$WORK/logs.txt" && ! grep '^text:' "$WORK/logs.txt" | grep -qF '\x' ||
	fail "UTF-8 text was escaped (a character cut between read chunks?)"
if [ "$channel" != closed ]; then
	grep -qF '\x1b]0;PWNED-JAIL\x07' "$WORK/logs.txt" || fail "what the jail wrote ($channel) is not shown escaped"
fi
"$SPACE" logs --raw "$A" "${S[@]}" >"$WORK/logs.raw" || fail "space logs --raw failed"
grep -qF $'console: \e]0;PWNED\a' "$WORK/logs.raw" || fail "space logs --raw does not give the bytes as stored"
ok "space logs shows a log's escape sequences escaped, UTF-8 whole, --raw as stored (jail's own way in: $channel)"

# ---- retention ---------------------------------------------------------------------------------------
export SPACE_EVENTS_KEEP_PER_SANDBOX=50
expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
B=$out
on_exit "'$SPACE' rm '$B' --state '$STATE'"
# Rows for B (as a flood of refusals would leave them), 10 of them 40 days old, so many that B's next
# event is a pruning one (every 128th row by seq, store/db.h).
seq=$(sqlite3 "$DB" "SELECT seq FROM sqlite_sequence WHERE name = 'events'")
n=$((400 + (128 - (seq + 400 + 1) % 128) % 128))
old=$(($(now_ms) - 40 * 86400000))
sqlite3 "$DB" "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $n)
	INSERT INTO events(ts_ms, sandbox_id, kind, detail)
	SELECT CASE WHEN i <= 10 THEN $old ELSE $(now_ms) END, '$B', 'egress-denied', 'filler ' || i FROM c" ||
	fail "insert rows"
before=$(sqlite3 "$DB" "SELECT count(*) FROM events WHERE sandbox_id = '$B'")
[ "$before" -gt 400 ] || fail "only $before rows for $B"
expect_rc 0 "$SPACE" pause "$B" "${S[@]}" # one event of B's: the pruning one
after=$(sqlite3 "$DB" "SELECT count(*) FROM events WHERE sandbox_id = '$B'")
stale=$(sqlite3 "$DB" "SELECT count(*) FROM events WHERE sandbox_id = '$B' AND ts_ms < $(now_ms) - 30 * 86400000")
[ "$after" -le 52 ] || fail "$after rows for $B after its next event (cap 50)"
[ "$stale" = 0 ] || fail "$stale rows older than 30 days left"
oldest=$(sqlite3 "$DB" "SELECT min(CAST(substr(detail, 8) AS INTEGER)) FROM events WHERE sandbox_id = '$B'
	AND detail LIKE 'filler %'")
[ "$oldest" -gt $((n - 50)) ] || fail "not the newest rows kept: the oldest left is filler $oldest of $n"
expect_rc 0 "$SPACE" events "$B" "${S[@]}"
echo "$out" | tail -1 | grep -q paused || fail "the newest event is not kept: $(echo "$out" | tail -2)"
expect_rc 0 "$SPACE" resume "$B" "${S[@]}"
unset SPACE_EVENTS_KEEP_PER_SANDBOX
ok "a sandbox's $before rows pruned to $after at its next event (cap 50), none older than 30 days"

# A bad setting is refused, not read as "no limit".
expect_rc 1 env SPACE_EVENTS_KEEP=lots "$SPACE" events "$B" "${S[@]}"
echo "$err" | grep -q SPACE_EVENTS_KEEP || fail "no word of the bad setting: $err"
ok "SPACE_EVENTS_KEEP=lots is refused with its name"
n_before=$(sqlite3 "$DB" "SELECT count(*) FROM sandboxes")
expect_rc 1 env SPACE_CREATE_CONCURRENCY=-1 "$SPACE" create --template tiny --isolation jail "${S[@]}"
echo "$err" | grep -q "SPACE_CREATE_CONCURRENCY='-1'" || fail "no word of the bad setting: $err"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM sandboxes")" = "$n_before" ] || fail "a refused create left a row"
ok "SPACE_CREATE_CONCURRENCY=-1 refuses the create with its name, before anything is made"

# ---- removal with the sandbox ------------------------------------------------------------------------
expect_rc 0 "$SPACE" rm "$B" "${S[@]}"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM events WHERE sandbox_id = '$B'")" = 0 ] || fail "rows of $B left after rm"
expect_rc 1 "$SPACE" events "$B" "${S[@]}"
expect_rc 0 "$SPACE" rm --keep-events "$A" "${S[@]}"
expect_rc 0 "$SPACE" events "$A" "${S[@]}"
echo "$out" | tail -1 | grep -q destroyed || fail "--keep-events: the events of $A: $out"
expect_rc 2 "$SPACE" rm --keep-evnts "$A" "${S[@]}"
ok "space rm removes a sandbox's events; --keep-events keeps them"

left=$(leaks_of "$A" "$B")
[ -z "$left" ] || fail "left behind: $left"
echo "hostile-text: $checks checks passed"
[ "$checks" = 8 ] || fail "ran $checks checks of 8"
