#!/bin/bash
# The server's own store (issue 15): API keys, envd tokens and client metadata live in <state>/serve.db
# (0600), not in the library's space.db. A host upgraded from a version that kept them in space.db keeps
# them: the first open of serve.db imports those rows, once; nothing is written to space.db any more.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
command -v sqlite3 >/dev/null || skip "sqlite3 (the CLI) missing"
command -v curl >/dev/null || skip "curl missing"
command -v python3 >/dev/null || skip "python3 missing"
"$SPACE" serve --help >/dev/null 2>&1 || skip "space built without libmicrohttpd"
checks=0
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }
make_state 1G
S=(--state "$STATE")
DB=$STATE/space.db
[ ! -e "$STATE/serve.db" ] || fail "space init made serve.db (the server's store is the server's)"

# An older host: its key, a token and metadata in space.db's tables (the library's schema still has them).
old_key=e2b_$(printf '%064d' 7)
old_hash=$(printf '%s' "$old_key" | sha256sum | cut -d' ' -f1)
sqlite3 "$DB" "INSERT INTO api_keys (id, name, hash, created_ms) VALUES ('key-old', 'old', X'$old_hash', 1);
	INSERT INTO sandbox_metadata (sandbox_id, metadata) VALUES ('sb-gone0000000000', '{\"a\":1}');
	INSERT INTO sandbox_tokens (hash, sandbox_id, created_ms) VALUES (X'$old_hash', 'sb-gone0000000000', 1)" ||
	fail "seed space.db"

expect_rc 0 "$SPACE" apikey ls --json "${S[@]}"
echo "$out" | grep -q '"key-old"' || fail "the old key was not imported: $out"
ok "the first open of serve.db imports the keys an older space.db held"
[ "$(stat -c %a "$STATE/serve.db")" = 600 ] || fail "serve.db mode $(stat -c %a "$STATE/serve.db")"
n=$(sqlite3 "$STATE/serve.db" "SELECT count(*) FROM sandbox_metadata; SELECT count(*) FROM sandbox_tokens" | tr '\n' ' ')
[ "$n" = "1 1 " ] || fail "metadata and tokens imported: $n"
ok "serve.db is 0600 and holds the imported metadata and token"

expect_rc 0 "$SPACE" apikey create --name new "${S[@]}"
new_key=$out
[ "$(sqlite3 "$DB" "SELECT count(*) FROM api_keys")" = 1 ] || fail "a new key was written to space.db"
[ "$(sqlite3 "$STATE/serve.db" "SELECT count(*) FROM api_keys")" = 2 ] || fail "the new key is not in serve.db"
ok "a new key goes to serve.db only"

expect_rc 0 "$SPACE" apikey rm key-old "${S[@]}"
expect_rc 0 "$SPACE" apikey ls --json "${S[@]}"
echo "$out" | grep -q '"key-old"' && fail "a removed key came back (imported twice): $out"
ok "the import happens once: a removed key stays removed"

# The server authenticates with serve.db and prunes its rows of sandboxes the library does not know.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$SPACE" serve --listen "127.0.0.1:$port" "${S[@]}" >/dev/null 2>"$STATE/serve.err" &
pid=$!
on_exit "kill_ours $pid; wait $pid"
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null 2>&1 && break; sleep 0.1; done
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $new_key" "http://127.0.0.1:$port/v1/sandboxes")
[ "$code" = 200 ] || fail "the new key: $code ($(cat "$STATE/serve.err"))"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $old_key" "http://127.0.0.1:$port/v1/sandboxes")
[ "$code" = 401 ] || fail "the removed key: $code"
ok "the server checks keys against serve.db"
for _ in $(seq 150); do # the reaper runs every 5 s
	n=$(sqlite3 "$STATE/serve.db" "SELECT count(*) FROM sandbox_metadata; SELECT count(*) FROM sandbox_tokens" | tr '\n' ' ')
	[ "$n" = "0 0 " ] && break
	sleep 0.1
done
[ "$n" = "0 0 " ] || fail "rows of a sandbox the library does not know were not pruned: $n ($(cat "$STATE/serve.err"); $(sqlite3 "$STATE/serve.db" "SELECT * FROM sandbox_metadata"))"
ok "the server prunes its rows of sandboxes that are gone (asking the library)"
kill -TERM $pid; wait $pid
echo "done: $checks checks"
[ "$checks" = 6 ] || fail "expected 6 checks, ran $checks"
