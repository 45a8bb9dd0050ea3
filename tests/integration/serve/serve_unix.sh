#!/bin/bash
# `space serve --unix PATH` for users who are not root: the socket grants nothing; the caller's uid
# (SO_PEERCRED) acts with the API key the operator granted it, and an ungranted uid (root included) gets
# 403 saying so. curl runs as nobody; the state directory stays root's alone.
. "$(dirname "$0")/serve_lib.sh"
command -v curl >/dev/null || skip "curl missing"
command -v setpriv >/dev/null || skip "setpriv missing"
checks=0
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }
S=(--state "$STATE")
NOBODY=$(id -u nobody) || skip "no user nobody"
mode_before=$(stat -c %a "$STATE")

SOCKDIR=$(mktemp -d /tmp/space-unix-XXXXXX)
chmod 755 "$SOCKDIR"
on_exit "rm -rf '$SOCKDIR'"
SOCK=$SOCKDIR/api.sock

start_unix_server "$SOCK"
[ "$(stat -c '%a %u' "$SOCK")" = "666 0" ] || fail "socket mode/owner: $(stat -c '%a %u' "$SOCK")"
grep -q "listening on http://" "$WORK/serve.err" && fail "--unix alone also listened on TCP: $(cat "$WORK/serve.err")"
ok "--unix alone: a socket of mode 0666 owned by root, and no TCP port"

# as_nobody METHOD PATH [BODY]: curl on the socket as nobody; sets code and body.
as_nobody() {
	local resp
	resp=$(setpriv --reuid="$NOBODY" --regid="$(id -g nobody)" --clear-groups -- curl -s --max-time 120 \
		--unix-socket "$SOCK" -X "$1" ${3:+-d "$3"} -w '\n%{http_code}' "http://localhost$2") || true
	code=${resp##*$'\n'}
	body=${resp%$'\n'*}
}

as_nobody GET /v1/health
[ "$code" = 200 ] || fail "health as nobody: $code $body"
as_nobody GET /v1/sandboxes
[ "$code" = 403 ] || fail "an ungranted uid: $code $body"
echo "$body" | grep -q "uid $NOBODY has no API key: the operator must grant it" || fail "403 message: $body"
ok "an ungranted uid gets 403 telling the operator to grant it"

code=$(curl -s -o "$WORK/root.out" -w '%{http_code}' --unix-socket "$SOCK" http://localhost/v1/sandboxes)
[ "$code" = 403 ] || fail "root (uid 0) without a grant: $code $(cat "$WORK/root.out")"
grep -q "uid 0 has no API key" "$WORK/root.out" || fail "root's 403: $(cat "$WORK/root.out")"
ok "root is not granted implicitly"

code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" -H "X-API-Key: $SERVE_KEY" http://localhost/v1/sandboxes)
[ "$code" = 200 ] || fail "X-API-Key on the unix socket: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" -H "X-API-Key: e2b_bad" http://localhost/v1/sandboxes)
[ "$code" = 401 ] || fail "a bad X-API-Key on the unix socket: $code"
ok "X-API-Key works on the unix socket too (a bad one is 401)"

# The operator grants nobody's uid a key: by ID, and a uid has one key at most.
expect_rc 0 "$SPACE" apikey create --name nobody --json "${S[@]}"
kid=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
expect_rc 0 "$SPACE" apikey grant "$kid" --uid nobody "${S[@]}"
expect_rc 0 "$SPACE" apikey ls --json "${S[@]}"
echo "$out" | python3 -c "import json,sys; k=[x for x in json.load(sys.stdin) if x['id']=='$kid']; assert k and k[0]['uid']==$NOBODY, k" ||
	fail "apikey ls does not show the grant: $out"
expect_rc 1 "$SPACE" apikey create --name dup --uid "$NOBODY" "${S[@]}"
echo "$out$err" | grep -q "already granted" || fail "a second key for one uid: $out $err"
ok "apikey grant ID --uid maps a uid to a key (shown by ls; one key per uid)"

as_nobody POST /v1/sandboxes '{"template": "tiny", "isolation": "jail"}'
[ "$code" = 201 ] || fail "create as granted nobody: $code $body ($(tail -5 "$WORK/serve.err"))"
id=$(echo "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
as_nobody POST "/v1/sandboxes/$id/exec" '{"argv": ["sh", "-c", "echo hello-$((6*7))"]}'
[ "$code" = 200 ] || fail "exec as granted nobody: $code $body"
echo "$body" | grep -q 'hello-42' || fail "exec output: $body"
grep -q "\"uid\":$NOBODY,\"key\":\"$kid\"" "$WORK/access.log" || fail "access log names the uid and key: $(tail -3 "$WORK/access.log")"
ok "a granted uid creates a jail sandbox and runs a command in it (the access log names uid and key)"

# A paused sandbox's agent is frozen: a file call is refused (409), never left waiting for it.
as_nobody PUT "/v1/sandboxes/$id/files?path=/tmp/x" 'data'
[ "$code" = 201 ] || fail "a file write: $code $body"
as_nobody POST "/v1/sandboxes/$id/pause"
[ "$code" = 200 ] || fail "pause: $code $body"
as_nobody GET "/v1/sandboxes/$id/files?path=/tmp/x"
[ "$code" = 409 ] && echo "$body" | grep -q "is paused" || fail "a file read of a paused sandbox: $code $body"
as_nobody PUT "/v1/sandboxes/$id/files?path=/tmp/x" 'data'
[ "$code" = 409 ] || fail "a file write to a paused sandbox: $code $body"
as_nobody POST "/v1/sandboxes/$id/resume"
as_nobody GET "/v1/sandboxes/$id/files?path=/tmp/x"
[ "$code" = 200 ] && [ "$body" = data ] || fail "a file read after resume: $code $body"
ok "file calls on a paused sandbox answer 409 at once; after resume they work"

as_nobody DELETE "/v1/sandboxes/$id"
[ "$code" = 204 ] || fail "destroy as nobody: $code $body"
expect_rc 0 "$SPACE" apikey grant "$kid" --uid none "${S[@]}"
as_nobody GET /v1/sandboxes
[ "$code" = 403 ] || fail "after the grant is taken away: $code"
ok "grant --uid none takes the grant away"

[ "$(stat -c %a "$STATE")" = "$mode_before" ] || fail "the state directory's mode changed: $(stat -c %a "$STATE")"
[ -z "$(leaks_of "$id")" ] || fail "leaks: $(leaks_of "$id")"
# A second server on the same path is refused; a stale socket (server gone) is replaced.
expect_rc 1 "$SPACE" serve --unix "$SOCK" "${S[@]}"
echo "$err" | grep -q "a server answers on it" || fail "second server: $err"
stop_pid $SERVE_PID 10 || fail "space serve did not exit 0 within 10 s of SIGTERM"
[ -e "$SOCK" ] && fail "the socket is left after the server stopped"
ok "a second server on a live socket is refused; the socket goes with the server"

# --listen and --unix together: both answer; on TCP the uid grant counts for nothing.
expect_rc 0 "$SPACE" apikey grant "$kid" --uid 0 "${S[@]}"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_unix_server "$SOCK" --listen "127.0.0.1:$port"
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null && break; sleep 0.1; done
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://localhost/v1/sandboxes)
[ "$code" = 200 ] || fail "root granted, on the socket beside TCP: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/sandboxes")
[ "$code" = 401 ] || fail "TCP without a key while root is granted: $code"
ok "--listen with --unix serves both; the grant holds on the socket only"
echo "done: $checks checks"
[ "$checks" = 10 ] || fail "expected 10 checks, ran $checks"
