#!/bin/bash
# A template from an image over `space serve`: the image is the request's body (never a host path),
# capped by --max-image-upload (refused before the body is read when Content-Length says so); a hostile
# image is refused with the reason and leaves nothing; the template's sandboxes get the image's defaults
# through the API's exec. A Dockerfile build over the API: the context as the body (capped alike), its
# output in the answer, a failing step as 422 with its exit status, a hostile context refused.
. "$(dirname "$0")/../serve/serve_lib.sh"
need_built "${SPACE_UNPACK_PATH:-}" space-unpack SPACE_UNPACK_PATH
command -v zstd >/dev/null || skip "zstd missing"
MK=(python3 "$(dirname "$0")/mkimage.py")
checks=0
ok() { checks=$((checks + 1)); }
"${MK[@]}" three-layer "$WORK/img.tar" --format oci-tar >"$WORK/digest"
"${MK[@]}" hostile-dotdot "$WORK/evil.tar" --format oci-tar >/dev/null
size=$(stat -c %s "$WORK/img.tar")
expect_rc 0 "$SPACE" init --isolation jail --state "$STATE" # the E2B plane's sandboxes: jails here
start_server --max-image-upload $((size + 1024))
H=(-H "X-API-Key: $SERVE_KEY")
post() { curl -s -o "$WORK/body" -w '%{http_code}' "${H[@]}" -H 'Content-Type: application/x-tar' "$@"; }

code=$(post --data-binary @"$WORK/img.tar" "$SERVE_URL/v1/templates/api-img/image")
[ "$code" = 201 ] || fail "upload: $code $(cat "$WORK/body")"
grep -q "$(cat "$WORK/digest")" "$WORK/body" || fail "upload answer lacks the digest: $(cat "$WORK/body")"; ok
grep -q '"working_dir":"/work"' "$WORK/body" || fail "upload answer lacks the config: $(cat "$WORK/body")"; ok
code=$(post --data-binary @"$WORK/img.tar" "$SERVE_URL/v1/templates/api-img/image")
[ "$code" = 201 ] || fail "the same image again: $code $(cat "$WORK/body")"; ok
curl -s "${H[@]}" "$SERVE_URL/v1/templates" | grep -q "\"image_digest\":\"$(cat "$WORK/digest")\"" ||
	fail "GET /v1/templates lacks image_digest"; ok

# Its sandboxes over the API: the image's user, working directory and environment.
ID=$(curl -s "${H[@]}" -d '{"template": "api-img", "isolation": "jail"}' "$SERVE_URL/v1/sandboxes" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])') || fail "create"
out=$(curl -s "${H[@]}" -d '{"argv": ["sh", "-c", "id -u; pwd; echo $GREETING"]}' "$SERVE_URL/v1/sandboxes/$ID/exec")
echo "$out" | python3 -c 'import json,sys; o=json.load(sys.stdin); assert o["stdout"] == "1000\n/work\nhello from env\n", o' ||
	fail "exec in an image sandbox: $out"; ok
curl -s -o /dev/null "${H[@]}" -X DELETE "$SERVE_URL/v1/sandboxes/$ID"

# Over the cap: refused from Content-Length, before a byte is stored.
head -c $((size + 4096)) /dev/zero >"$WORK/big"
code=$(post --data-binary @"$WORK/big" "$SERVE_URL/v1/templates/big/image")
[ "$code" = 413 ] || fail "over --max-image-upload: $code $(cat "$WORK/body")"; ok
# Hostile, not an image, a bad name: the reason, nothing left.
code=$(post --data-binary @"$WORK/evil.tar" "$SERVE_URL/v1/templates/evil/image")
[ "$code" = 403 ] && grep -q "climbs out of the root" "$WORK/body" || fail "hostile image: $code $(cat "$WORK/body")"; ok
code=$(post --data-binary 'not a tar' "$SERVE_URL/v1/templates/junk/image")
[ "$code" = 400 ] || fail "junk body: $code $(cat "$WORK/body")"; ok
code=$(post --data-binary @"$WORK/img.tar" "$SERVE_URL/v1/templates/..bad/image")
[ "$code" = 400 ] || fail "bad name: $code"; ok
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-API-Key: wrong' --data-binary @"$WORK/img.tar" \
	"$SERVE_URL/v1/templates/nokey/image")
[ "$code" = 401 ] || fail "without a key: $code"; ok
for t in evil junk big nokey; do [ ! -e "$STATE/pool/templates/$t" ] || fail "refused upload left template $t"; done
[ -z "$(ls -A "$STATE/pool/.tmp" 2>/dev/null)" ] || fail "uploads left files: $(ls -A "$STATE/pool/.tmp")"; ok

# A build over the API: the context is the body (a tar), its Dockerfile inside it; RUN's output comes back.
mkdir -p "$WORK/ctx/app"
echo from-context >"$WORK/ctx/app/file"
printf 'FROM api-img\nUSER root\nCOPY app/file /opt/\nRUN echo "built by $(id -u)" && cat /opt/file > /opt/copy\n' \
	>"$WORK/ctx/Dockerfile"
tar --owner=4321 --group=4321 -C "$WORK/ctx" -cf "$WORK/ctx.tar" .
code=$(post --data-binary @"$WORK/ctx.tar" "$SERVE_URL/v1/templates/api-built/build?isolation=jail")
[ "$code" = 201 ] || fail "build upload: $code $(cat "$WORK/body")"
python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); assert o["name"] == "api-built" and "built by 0" in o["output"] and o["image"]["format"] == "dockerfile", o' \
	"$WORK/body" || fail "build answer: $(cat "$WORK/body")"; ok
ID=$(curl -s "${H[@]}" -d '{"template": "api-built", "isolation": "jail"}' "$SERVE_URL/v1/sandboxes" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])') || fail "create from the built template"
out=$(curl -s "${H[@]}" -d '{"argv": ["sh", "-c", "stat -c %u:%g /opt/file; cat /opt/copy; pwd"]}' "$SERVE_URL/v1/sandboxes/$ID/exec")
echo "$out" | python3 -c 'import json,sys; o=json.load(sys.stdin); assert o["stdout"] == "0:0\nfrom-context\n/work\n", o' ||
	fail "exec in the built template: $out"; ok
curl -s -o /dev/null "${H[@]}" -X DELETE "$SERVE_URL/v1/sandboxes/$ID"
# The E2B plane creates it by name.
ID=$(curl -s "${H[@]}" -d '{"templateID": "api-built"}' "$SERVE_URL/sandboxes" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["sandboxID"])') || fail "E2B create from the built template"
out=$(curl -s "${H[@]}" -d '{"argv": ["cat", "/opt/copy"]}' "$SERVE_URL/v1/sandboxes/$ID/exec")
echo "$out" | python3 -c 'import json,sys; o=json.load(sys.stdin); assert o["stdout"] == "from-context\n", o' ||
	fail "exec in the E2B-created sandbox: $out"; ok
curl -s -o /dev/null "${H[@]}" -X DELETE "$SERVE_URL/sandboxes/$ID"
# A failing step: 422, its line, exit status and output; no template.
printf 'FROM api-img\nRUN echo going down; exit 7\n' >"$WORK/ctx/Dockerfile.bad"
tar -C "$WORK/ctx" -cf "$WORK/ctx.tar" .
code=$(post --data-binary @"$WORK/ctx.tar" "$SERVE_URL/v1/templates/api-bad/build?isolation=jail&dockerfile=Dockerfile.bad")
[ "$code" = 422 ] || fail "a failing build step: $code $(cat "$WORK/body")"
python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); assert o["error"]["code"] == "step_failed" and "exit status 7" in o["error"]["message"] and "going down" in o["output"], o' \
	"$WORK/body" || fail "failing build answer: $(cat "$WORK/body")"; ok
# A context climbing out with "..", a Dockerfile named outside it: refused, nothing left.
python3 - "$WORK/evilctx.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for name, data in (("Dockerfile", b"FROM api-img\nCOPY x /x\n"), ("../../x", b"x")):
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
PY
code=$(post --data-binary @"$WORK/evilctx.tar" "$SERVE_URL/v1/templates/api-evil/build?isolation=jail")
[ "$code" = 403 ] && grep -q "climbs out of the root" "$WORK/body" || fail "hostile context: $code $(cat "$WORK/body")"; ok
code=$(post --data-binary @"$WORK/ctx.tar" "$SERVE_URL/v1/templates/api-evil/build?dockerfile=../../etc/passwd")
[ "$code" = 400 ] || fail "a Dockerfile outside the context: $code $(cat "$WORK/body")"; ok
code=$(post --data-binary @"$WORK/big" "$SERVE_URL/v1/templates/api-big/build")
[ "$code" = 413 ] || fail "a context over the cap: $code"; ok
for t in api-bad api-evil api-big; do [ ! -e "$STATE/pool/templates/$t" ] || fail "refused build left template $t"; done
[ -z "$(ls -A "$STATE/pool/.tmp" 2>/dev/null)" ] || fail "builds left files: $(ls -A "$STATE/pool/.tmp")"; ok
stop_server
echo "image serve: $checks checks, 0 failed"
