#!/bin/bash
# space template build: a multi-stage Dockerfile (FROM an imported image, RUN, COPY from the context with
# .dockerignore, COPY --from a stage, ADD of an archive, ENV, ARG, WORKDIR, USER, LABEL, ENTRYPOINT, CMD),
# checked from inside a jail sandbox of the result; a rebuild with the last line changed reruns only that
# line; a changed context file reruns from its COPY on; --no-cache; the result's warm pool; a failing step
# leaves no template and shows its output and exit status; an unsupported instruction is refused with its
# line; nothing is read from outside the context; the context as a tar (as the API takes it).
. "$(dirname "$0")/../../lib.sh"
jail_test_setup 3G
need_built "${SPACE_UNPACK_PATH:-}" space-unpack SPACE_UNPACK_PATH
command -v python3 >/dev/null || skip "python3 missing"
command -v zstd >/dev/null || skip "zstd missing"
checks=0
ok() { checks=$((checks + 1)); }
run() { "$SPACE" run "${S[@]}" --isolation jail "$@"; }
build() { "$SPACE" template build "${S[@]}" --isolation jail "$@"; }
python3 "$(dirname "$0")/mkimage.py" three-layer "$WORK/oci" >/dev/null
expect_rc 0 "$SPACE" template import img --image "$WORK/oci" "${S[@]}"

C=$WORK/ctx
mkdir -p "$C/app/sub" "$C/data"
echo 'print("hello")' >"$C/app/main.py"
echo nested >"$C/app/sub/n.txt"
echo "do not copy" >"$C/app/private.key"
echo "keep me" >"$C/app/public.key"
ln -s /etc/passwd "$C/app/hostlink"       # copied as a symlink (the image's /etc/passwd), never followed
ln -s ../../../../../etc/shadow "$C/escape" # as a source: resolved inside the context only
printf '**/*.key\n!app/public.key\n' >"$C/.dockerignore"
mkdir -p "$WORK/arch/pkg" && echo from-archive >"$WORK/arch/pkg/file" && tar -C "$WORK/arch" -czf "$C/data/files.tar.gz" pkg
cat >"$C/Dockerfile" <<'EOF'
# syntax=docker/dockerfile:1
FROM img AS builder
USER root
RUN mkdir -p /out && echo built > /out/artifact && id -u > /out/uid

FROM img
ARG VERSION=1
ENV APP_VERSION=$VERSION \
    GREETING="hi there"
USER root
WORKDIR /srv/app
COPY app/ ./
COPY --from=builder /out/artifact artifact
ADD data/files.tar.gz /opt/extracted/
RUN echo "step ran $APP_VERSION as $(id -u)" >> /srv/app/log
USER app
LABEL org.example.stage=final
ENTRYPOINT ["/bin/sh", "-c"]
CMD ["echo from cmd; cat /srv/app/artifact"]
EOF

expect_rc 0 build app "$C"
echo "$err" | grep -q "step 3/16 (line 4): RUN mkdir -p /out" || fail "no progress per step: $err"; ok
expect_rc 0 "$SPACE" template ls --json "${S[@]}"
python3 - "$out" <<'EOF' || fail "template ls --json: $out"
import json, sys
t = [x for x in json.loads(sys.argv[1]) if x["name"] == "app"][0]["image"]
assert t["format"] == "dockerfile" and t["user"] == "app" and t["uid"] == 1000 and t["working_dir"] == "/srv/app", t
assert "APP_VERSION=1" in t["env"] and "GREETING=hi there" in t["env"], t
assert t["entrypoint"] == ["/bin/sh", "-c"] and t["cmd"] == ["echo from cmd; cat /srv/app/artifact"], t
assert t["labels"]["org.example.stage"] == "final" and t["labels"]["org.example.test"] == "three-layer", t
EOF
ok
out=$(run --template app -- sh -c 'id -u; pwd; echo "$APP_VERSION|$GREETING"; ls -A /srv/app | tr "\n" " "; echo
	cat /srv/app/sub/n.txt /srv/app/artifact /opt/extracted/pkg/file /srv/app/log; readlink /srv/app/hostlink') ||
	fail "run in the built template: $out"
want=$(printf '1000\n/srv/app\n1|hi there\nartifact hostlink log main.py public.key sub \nnested\nbuilt\nfrom-archive\nstep ran 1 as 0\n/etc/passwd')
[ "$out" = "$want" ] || fail "the built tree: $out"; ok
out=$(run --template app) && [ "$out" = "$(printf 'from cmd\nbuilt')" ] || fail "Entrypoint + Cmd: $out"; ok

# The same Dockerfile again: every step from the cache, well under a second.
expect_rc 0 build app "$C"
echo "$err" | grep -q "RUN mkdir -p /out.*, cached" && echo "$err" | grep -q "RUN echo \"step ran.*, cached" ||
	fail "an unchanged rebuild ran steps: $err"; ok
# The last line changed: only it is new; the build takes well under a second (no RUN runs).
sed -i 's|^CMD .*|CMD ["echo changed last line"]|' "$C/Dockerfile"
t0=$(date +%s%N)
expect_rc 0 build app "$C"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$(echo "$err" | grep -c ', cached')" = 6 ] || fail "last line changed: not all disk steps cached: $err"
[ "$ms" -lt 1000 ] || fail "a rebuild with the last line changed took $ms ms"; ok
echo "rebuild, last line changed: $ms ms"
out=$(run --template app) && [ "$out" = "changed last line" ] || fail "the changed CMD: $out"; ok
# A context file changed: its COPY and what follows run again, what comes before does not.
echo 'print("changed")' >"$C/app/main.py"
expect_rc 0 build app "$C"
echo "$err" | grep -q "WORKDIR /srv/app, cached" && ! echo "$err" | grep -q "COPY app/ ./, cached" &&
	! echo "$err" | grep -q "RUN echo \"step ran.*, cached" || fail "a changed context file: $err"; ok
out=$(run --template app -- cat /srv/app/main.py) && [ "$out" = 'print("changed")' ] || fail "changed file: $out"; ok
# A build argument and --no-cache.
expect_rc 0 build app "$C" --build-arg VERSION=7 --no-cache
echo "$err" | grep -q ", cached" && fail "--no-cache used the cache: $err"
out=$(run --template app -- sh -c 'echo $APP_VERSION; cat /srv/app/log') && [ "$out" = "$(printf '7\nstep ran 7 as 0')" ] ||
	fail "--build-arg: $out"; ok

# A warm pool of the built template: a default create takes a pooled sandbox, with the Dockerfile's defaults.
expect_rc 0 "$SPACE" init --isolation jail "${S[@]}"
expect_rc 0 "$SPACE" template set-pool app 1 "${S[@]}"
on_exit 'for x in $(ls "$STATE/pool/sandboxes" 2>/dev/null); do "$SPACE" rm "$x" --state "$STATE"; done'
expect_rc 0 "$SPACE" pool fill app "${S[@]}"
[ "$out" = "1 sandbox created and pooled" ] || fail "a warm pool of the built template: $out"
pooled=$(ls "$STATE/pool/sandboxes")
expect_rc 0 "$SPACE" create --template app "${S[@]}"
id=$out
[ "$id" = "$pooled" ] || fail "create did not take the pooled sandbox: $id, pool $pooled"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'id -u; pwd; echo $APP_VERSION'
[ "$out" = "$(printf '1000\n/srv/app\n7')" ] || fail "a pooled sandbox of the built template: $out"; ok
expect_rc 0 "$SPACE" rm "$id" "${S[@]}"
expect_rc 0 "$SPACE" template set-pool app 0 "${S[@]}"

# A failing step: its output and exit status; no template made, the previous one untouched.
mkdir -p "$WORK/bad"
printf 'FROM img\nUSER root\nRUN echo about to fail && exit 3\nCMD ["never"]\n' >"$WORK/bad/Dockerfile"
expect_rc 1 build broken "$WORK/bad"
echo "$err" | grep -q "about to fail" || fail "a failing step's output: $err"
echo "$err" | grep -q "line 3: RUN echo about to fail && exit 3: exit status 3" || fail "failing step: $err"; ok
[ ! -e "$STATE/pool/templates/broken" ] || fail "a failed build left a template"; ok
expect_rc 0 "$SPACE" template ls --json "${S[@]}"
echo "$out" | grep -q '"broken"' && fail "a failed build is listed"
# Refused before anything runs: an unsupported instruction, a source outside the context, an escaping link.
printf 'FROM img\nRUN touch /ran\nEXPOSE 80\n' >"$WORK/bad/Dockerfile"
expect_rc 1 build broken "$WORK/bad"
echo "$err" | grep -q "line 3: instruction EXPOSE is not supported" || fail "unsupported instruction: $err"
echo "$err" | grep -q "RUN touch" && fail "steps ran before the refusal: $err"; ok
printf 'FROM img\nCOPY ../ctx/app /x\n' >"$WORK/bad/Dockerfile"
expect_rc 1 build broken "$WORK/bad"
echo "$err" | grep -q "outside the build context" || fail "COPY ../: $err"; ok
printf 'FROM img\nCOPY escape /x\n' >"$C/Dockerfile.escape"
expect_rc 1 build broken "$C" -f "$C/Dockerfile.escape"
echo "$err" | grep -q "No such file" || fail "a symlink out of the context: $err"; ok
[ ! -e "$STATE/pool/templates/broken" ] && [ -z "$(ls -A "$STATE/pool/.tmp")" ] || fail "refused builds left files"; ok

# The context as a tar (what an API caller uploads): made a file system by space-unpack, never extracted
# on the host; a file into a directory, a directory, a top that looks like an image; owned by root unless
# --chown; COPY --from a stage's file into a directory. A '..' member, a link out: refused or inert.
T=$WORK/tctx
mkdir -p "$T/app/sub" && echo one >"$T/app/a.txt" && echo two >"$T/app/sub/b.txt" && echo '{}' >"$T/manifest.json"
ln -s /etc "$T/hostetc"
cat >"$T/Dockerfile.t" <<'EOF'
FROM img AS first
USER root
RUN mkdir /made && echo made >/made/it
FROM img
USER root
COPY app/a.txt /srv/
COPY app /srv/tree
COPY --chown=app manifest.json app/sub/b.txt /srv/own/
COPY --from=first /made/it /srv/
EOF
tar --owner=4321 --group=4321 -C "$T" -cf "$WORK/tctx.tar" .
expect_rc 0 build tarred "$WORK/tctx.tar" -f Dockerfile.t
out=$(run --template tarred -- sh -c 'cd /srv; for f in a.txt tree/a.txt tree/sub/b.txt own/manifest.json own/b.txt it; do
	echo "$f $(stat -c %u "$f") $(cat "$f")"; done') || fail "run in the template built from a tar: $out"
want=$(printf 'a.txt 0 one\ntree/a.txt 0 one\ntree/sub/b.txt 0 two\nown/manifest.json 1000 {}\nown/b.txt 1000 two\nit 0 made')
[ "$out" = "$want" ] || fail "the tree built from a context tar: $out"; ok
printf 'FROM img\nCOPY hostetc/passwd /x\n' >"$T/Dockerfile.t"
tar -C "$T" -cf "$WORK/tctx.tar" .
expect_rc 1 build broken "$WORK/tctx.tar" -f Dockerfile.t
echo "$err" | grep -q "/hostetc/passwd is not in the image" || fail "a link out of a context tar: $err"; ok
python3 - "$WORK/evil.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for name, data in (("Dockerfile", b"FROM img\nCOPY x /x\n"), ("../../evil", b"x")):
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
PY
expect_rc 1 build broken "$WORK/evil.tar"
echo "$err" | grep -q "climbs out of the root" || fail "a context tar with '..': $err"
[ ! -e "$WORK/evil" ] && [ ! -e "$(dirname "$WORK")/evil" ] || fail "a context tar wrote on the host"
[ ! -e "$STATE/pool/templates/broken" ] && [ -z "$(ls -A "$STATE/pool/.tmp")" ] || fail "context tars left files"; ok

expect_rc 0 "$SPACE" ls --json "${S[@]}"
[ "$out" = "[]" ] || fail "sandboxes left: $out"
echo "template build: $checks checks, 0 failed"
