#!/bin/bash
# Registered secrets and API callers' network policies (docs/network.md, "Who may write a policy"):
# `space secret set/ls/rm` round trip without ever printing a value; through `space serve`, a policy
# that names a host file, the server's environment or a CA file, or points a name at loopback, private,
# link-local or the host's own addresses is refused with 400 (and nothing is created, and the answer
# shows nothing of the host) unless `--allow-resolve` allows the range; a registered secret is accepted
# and injected; a rollback re-applies the policy with the trust and ranges it was created with and
# reads the registered secret again. Jail isolation (a weaker boundary than a VM): runs without KVM.
. "$(dirname "$0")/serve_lib.sh"
. "$(dirname "$0")/../net/egress_lib.sh"
export SPACE_GATEWAY_PATH=${SPACE_GATEWAY_PATH:-$SPACE_BUILD_DIR/src/net/space-gateway}
need_built "$SPACE_GATEWAY_PATH" space-gateway SPACE_GATEWAY_PATH
command -v openssl >/dev/null || skip "openssl missing"
command -v curl >/dev/null || skip "curl missing"
checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
rand() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# ---- space secret: set (file, environment, stdin), ls, rm; values never shown ----
VAL=reg-$(rand)
printf '%s\n' "$VAL" >"$WORK/val"
expect_rc 0 "$SPACE" secret set tok --from-file "$WORK/val" --state "$STATE"
export SECRETS_TEST_FROM_ENV=env-$(rand)
expect_rc 0 "$SPACE" secret set fromenv --from-env SECRETS_TEST_FROM_ENV --state "$STATE"
STDINVAL=stdin-$(rand)
printf '%s\n' "$STDINVAL" | "$SPACE" secret set fromstdin --state "$STATE" || fail "secret set from stdin"
[ "$(stat -c %a "$STATE/secrets")" = 700 ] || fail "secrets directory mode $(stat -c %a "$STATE/secrets")"
[ "$(stat -c %a "$STATE/secrets/tok")" = 600 ] || fail "secret file mode $(stat -c %a "$STATE/secrets/tok")"
[ "$(cat "$STATE/secrets/tok")" = "$VAL" ] || fail "stored value is not the file's text without its line break"
pass "secret set: --from-file, --from-env, stdin; stored 0600 in a 0700 directory"
expect_rc 0 "$SPACE" secret ls --state "$STATE"
ls_text=$out
expect_rc 0 "$SPACE" secret ls --json --state "$STATE"
ls_json=$out
for v in "$VAL" "$SECRETS_TEST_FROM_ENV" "$STDINVAL"; do
	case "$ls_text$ls_json" in *"$v"*) fail "secret ls printed a value: $ls_text $ls_json" ;; esac
done
echo "$ls_text" | grep -q '^tok ' && echo "$ls_text" | grep -q '^fromenv ' || fail "secret ls: $ls_text"
names=$(echo "$ls_json" | python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin) if s["created_ms"] > 0))')
[ "$names" = "fromenv fromstdin tok" ] || fail "secret ls --json names: $names ($ls_json)"
pass "secret ls (text and --json): names and times, no values"
expect_rc 1 "$SPACE" secret set ../x --from-file "$WORK/val" --state "$STATE"
printf 'a\nb\n' | "$SPACE" secret set twolines --state "$STATE" 2>/dev/null && fail "a value with a line break inside was stored"
expect_rc 2 "$SPACE" secret set --state "$STATE"
expect_rc 0 "$SPACE" secret rm fromstdin --state "$STATE"
expect_rc 1 "$SPACE" secret rm fromstdin --state "$STATE"
expect_rc 0 "$SPACE" secret ls --json --state "$STATE"
echo "$out" | grep -q fromstdin && fail "removed secret still listed: $out"
pass "secret set refuses bad names and values; secret rm removes, and says when there is nothing to remove"

# ---- through space serve: API callers' policies are untrusted ----
HOSTFILE_TEXT=hostfile-$(rand)
echo "$HOSTFILE_TEXT" >"$WORK/hostfile"
export SERVE_ENV_SECRET=serverenv-$(rand)
egress_upstreams "$WORK/up" api.test
start_server
sandboxes() { "$SPACE" ls --json --state "$STATE" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
# post POLICY: POST /v1/sandboxes with that network policy; sets code and body.
post() {
	code=$(curl -s -o "$WORK/resp" -w '%{http_code}' -H "X-API-Key: $SERVE_KEY" -H 'Content-Type: application/json' \
		-d "{\"template\":\"tiny\",\"isolation\":\"jail\",\"network\":$1}" "$SERVE_URL/v1/sandboxes")
	body=$(cat "$WORK/resp")
}
# refused WHAT POLICY SAYS: 400 whose message says SAYS and shows nothing of the host.
refused() {
	post "$2"
	[ "$code" = 400 ] || fail "$1: HTTP $code, wanted 400: $body"
	echo "$body" | grep -qF -- "$3" || fail "$1: the message does not say '$3': $body"
	local leak
	for leak in "$HOSTFILE_TEXT" "$SERVE_ENV_SECRET" "$VAL" "$SECRETS_TEST_FROM_ENV" "$STATE" "$WORK"; do
		case "$body" in *"$leak"*) fail "$1: the answer shows '$leak': $body" ;; esac
	done
	pass "refused with 400: $1"
}
inject='"inject":[{"host":"api.test","header":"Authorization","value":"Bearer ${K}"}],"allow":["api.test"]'
refused "file:/etc/hostname" "{\"secrets\":{\"K\":\"file:/etc/hostname\"},$inject}" "only the operator's policies"
refused "file: of a host file" "{\"secrets\":{\"K\":\"file:$WORK/hostfile\"},$inject}" "only the operator's policies"
refused "env: of the server's environment" "{\"secrets\":{\"K\":\"env:SERVE_ENV_SECRET\"},$inject}" \
	"only the operator's policies"
refused "ca_file" "{\"ca_file\":\"$WORK/hostfile\",\"allow\":[\"api.test\"]}" "ca_file"
refused "an unregistered secret" "{\"secrets\":{\"K\":\"secret:nope\"},$inject}" "no registered secret named 'nope'"
refused "a removed secret" "{\"secrets\":{\"K\":\"secret:fromstdin\"},$inject}" "no registered secret"
refused "resolve to 127.0.0.1" "{\"allow\":[\"api.test\"],\"resolve\":{\"api.test\":\"127.0.0.1:$HP\"}}" \
	"may not point a name at"
refused "resolve to 10.1.2.3" "{\"allow\":[\"api.test\"],\"resolve\":{\"api.test\":\"10.1.2.3\"}}" "a private"
refused "resolve to 169.254.169.254" "{\"allow\":[\"api.test\"],\"resolve\":{\"api.test\":\"169.254.169.254:80\"}}" \
	"a link-local"
own=$(ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
if [ -n "$own" ]; then
	refused "resolve to this host's address $own" "{\"allow\":[\"api.test\"],\"resolve\":{\"api.test\":\"$own\"}}" \
		"may not point a name at"
fi
[ "$(sandboxes)" = 0 ] || fail "a refused policy left a sandbox: $("$SPACE" ls --state "$STATE")"
pass "refused policies created nothing"
post "{\"secrets\":{\"K\":\"secret:tok\"},$inject}"
[ "$code" = 201 ] || fail "a registered secret: HTTP $code, wanted 201: $body"
case "$body" in *"$VAL"*) fail "the answer shows the secret: $body" ;; esac
pass "a registered secret is accepted (201)"
stop_server

# ---- --allow-resolve: the operator lets API callers point names at a local range ----
start_server --allow-resolve 127.0.0.1/32
refused "resolve to 127.0.0.2 (outside the allowed range)" \
	"{\"allow\":[\"api.test\"],\"resolve\":{\"api.test\":\"127.0.0.2:$HP\"}}" "a loopback"
post "{\"secrets\":{\"K\":\"secret:tok\"},$inject,\"resolve\":{\"api.test\":\"127.0.0.1:$HP\"}}"
[ "$code" = 201 ] || fail "resolve inside --allow-resolve: HTTP $code: $body"
id=$(echo "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
pass "resolve to 127.0.0.1 accepted with --allow-resolve 127.0.0.1/32"
# get PATH: the sandbox fetches http://api.test/PATH through its gateway; the upstream logs the request.
get() { "$SPACE" exec "$id" --state "$STATE" -- wget -q -O - "http://api.test/$1"; }
seen() { grep "\"/$1\"" "$WORK/up/requests.log"; }
expect_rc 0 get first
seen first | grep -qF "\"Bearer $VAL\"" || fail "upstream did not get the registered secret: $(cat "$WORK/up/requests.log")"
expect_rc 0 "$SPACE" exec "$id" --state "$STATE" -- sh -c "grep -r '$VAL' /etc /root /tmp 2>/dev/null; true"
[ -z "$out" ] || fail "the secret is inside the sandbox: $out"
pass "the registered secret is injected upstream and is not in the sandbox"

# The stored policy keeps its trust: untrusted for this API sandbox, trusted for one of the operator's CLI.
meta() { python3 -c 'import json,sqlite3,sys; c=sqlite3.connect(sys.argv[1]); m=json.loads(c.execute("SELECT metadata FROM sandboxes WHERE id=?",(sys.argv[2],)).fetchone()[0]); print(m.get("network_trusted", False), m.get("network_allow_resolve"))' "$STATE/space.db" "$1"; }
[ "$(meta "$id")" = "False ['127.0.0.1/32']" ] || fail "API sandbox's stored trust: $(meta "$id")"
expect_rc 0 "$SPACE" create --template tiny --isolation jail --allow api.test --secret K=env:SERVE_ENV_SECRET \
	--secret tok --inject 'api.test:X-Reg=${tok}' --state "$STATE"
cli_id=$out
[ "$(meta "$cli_id")" = "True None" ] || fail "CLI sandbox's stored trust: $(meta "$cli_id")"
expect_rc 0 "$SPACE" rm "$cli_id" --state "$STATE"
pass "the trust is stored with the policy (API: untrusted with the server's ranges; CLI: trusted, env: and a registered --secret NAME)"

# Rollback re-applies the policy: the registered secret is read again (a new value shows), with the
# stored --allow-resolve range (the server below has none); once the secret is gone, no egress.
code=$(curl -s -o "$WORK/resp" -w '%{http_code}' -H "X-API-Key: $SERVE_KEY" -H 'Content-Type: application/json' \
	-d '{"name":"cp1"}' "$SERVE_URL/v1/sandboxes/$id/checkpoints")
[ "$code" = 201 ] || [ "$code" = 200 ] || fail "checkpoint: HTTP $code $(cat "$WORK/resp")"
cp=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$WORK/resp")
stop_server
start_server
rollback() {
	code=$(curl -s -o "$WORK/resp" -w '%{http_code}' -H "X-API-Key: $SERVE_KEY" -H 'Content-Type: application/json' \
		-d "{\"checkpoint\":\"$cp\"}" "$SERVE_URL/v1/sandboxes/$id/rollback")
	[ "$code" = 200 ] || fail "rollback: HTTP $code $(cat "$WORK/resp")"
}
VAL2=reg2-$(rand)
printf '%s' "$VAL2" | "$SPACE" secret set tok --state "$STATE" || fail "secret set (new value)"
rollback
expect_rc 0 get second
seen second | grep -qF "\"Bearer $VAL2\"" || fail "after rollback, upstream saw: $(seen second)"
pass "rollback re-applies the API caller's policy with its stored range and the secret's new value"
expect_rc 0 "$SPACE" secret rm tok --state "$STATE"
rollback
expect_rc 1 get third
seen third && fail "egress after its secret was removed: $(seen third)"
expect_rc 0 "$SPACE" exec "$id" --state "$STATE" -- true
code=$(curl -s -o "$WORK/resp" -w '%{http_code}' -X POST -H "X-API-Key: $SERVE_KEY" "$SERVE_URL/v1/checkpoints/$cp/fork")
[ "$code" = 400 ] || fail "fork with a removed secret: HTTP $code $(cat "$WORK/resp")"
grep -q "no registered secret named 'tok'" "$WORK/resp" || fail "fork refusal: $(cat "$WORK/resp")"
pass "a removed secret: rollback leaves no egress, fork is refused with 400"
stop_server
echo "serve secrets: $checks checks passed"
echo "PASS"
