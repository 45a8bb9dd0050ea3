#!/bin/bash
# Templates from container images built by hand (mkimage.py: layer tars and JSON, no registry): a
# three-layer image with whiteouts, an opaque directory, a hard link across layers, a file capability, a
# set-uid file, Env/WorkingDir/User and Entrypoint/Cmd, as an OCI layout (directory and tar) and as both
# `docker save` formats; re-import by digest; rootfs inputs that are images or have no shell. Every result
# is checked by running commands in a jail sandbox of the template.
. "$(dirname "$0")/../../lib.sh"
jail_test_setup 3G
need_built "${SPACE_UNPACK_PATH:-}" space-unpack SPACE_UNPACK_PATH
command -v python3 >/dev/null || skip "python3 missing"
command -v zstd >/dev/null || skip "zstd missing"
MK=(python3 "$(dirname "$0")/mkimage.py")
checks=0
ok() { checks=$((checks + 1)); }
run() { "$SPACE" run "${S[@]}" --isolation jail "$@"; }

# The tree every format of the three-layer image must give, seen from inside a sandbox of template $1.
check_three_layer() {
	local t=$1 out
	out=$(run --template "$t" -- sh -c 'id -u; id -g; pwd; echo "$GREETING|$IMAGE_ONLY|$HOME"') || fail "$t: run: $out"
	[ "$out" = "$(printf '1000\n1000\n/work\nhello from env|1|/home/app')" ] || fail "$t: user, cwd, env: $out"; ok
	out=$(run --template "$t" --user 0 -- sh -c '
		ls /etc/app | tr "\n" " "; echo
		ls -A /opt/data | tr "\n" " "; echo
		stat -c "%i %h %U" /srv/original /srv/link | tr "\n" " "; echo
		cat /srv/new-in-2 /work/hello.txt
		stat -c "%a %U" /usr/bin/su-like
		id -u') || fail "$t: run as root: $out"
	local want
	want=$(printf 'keep \nupper \n')
	[ "$(echo "$out" | sed -n 1,2p)" = "$want" ] || fail "$t: whiteout or opaque directory: $out"; ok
	local l3; l3=$(echo "$out" | sed -n 3p)
	set -- $l3
	[ "$1" = "$4" ] && [ "$2" = 2 ] && [ "$5" = 2 ] && [ "$3" = app ] || fail "$t: hard link across layers: $l3"; ok
	[ "$(echo "$out" | sed -n 4,5p)" = "$(printf 'two\nhello from the image')" ] || fail "$t: layer files: $out"; ok
	[ "$(echo "$out" | sed -n 6,7p)" = "$(printf '4755 root\n0')" ] || fail "$t: set-uid bit, --user 0: $out"; ok
	# Kept inside, no way up through it: the jail mounts the image nosuid and runs with no_new_privs.
	out=$(run --template "$t" -- /usr/bin/su-like) || fail "$t: su-like: $out"
	[ "$out" = 1000 ] || fail "$t: a set-uid file raised privileges: $out"; ok
	# The file capability is image metadata (the jail's image is checked read-only with debugfs).
	debugfs -R 'ea_list /usr/bin/ping-cap' "$STATE/pool/templates/$t/rootfs.ext4" 2>/dev/null |
		grep -q 'security.capability (20) = 01 00 00 02 00 20' || fail "$t: security.capability lost"; ok
	debugfs -R 'ea_list /etc/note' "$STATE/pool/templates/$t/rootfs.ext4" 2>/dev/null |
		grep -q 'user.origin (9) = "layer one"' || fail "$t: user xattr lost"; ok
	# Entrypoint and Cmd: what `space run` runs without a command; exec never prepends them.
	out=$(run --template "$t") || fail "$t: run without a command: $out"
	[ "$out" = "greet: from cmd" ] || fail "$t: Entrypoint + Cmd: $out"; ok
	out=$(run --template "$t" -- echo plain) || fail "$t: run echo: $out"
	[ "$out" = plain ] || fail "$t: a command given got the entrypoint: $out"; ok
}

# 1. OCI image layout (a directory), full import with progress per layer.
"${MK[@]}" three-layer "$WORK/oci" >"$WORK/digest" || fail "mkimage three-layer"
DIGEST=$(cat "$WORK/digest")
expect_rc 0 "$SPACE" template import img --image "$WORK/oci" "${S[@]}"
for n in 1 2 3; do
	echo "$err" | grep -q "layer $n/3 sha256:[0-9a-f]*: apply" || fail "no progress for layer $n: $err"
done; ok
expect_rc 0 "$SPACE" template ls --json "${S[@]}"
python3 - "$out" "$DIGEST" <<'EOF' || fail "template ls --json: $out"
import json, sys
t = [x for x in json.loads(sys.argv[1]) if x['name'] == 'img'][0]['image']
assert t['digest'] == sys.argv[2], t
assert t['env'] == ['PATH=/usr/local/bin:/usr/bin:/bin', 'GREETING=hello from env', 'IMAGE_ONLY=1'], t
assert (t['working_dir'], t['user'], t['uid'], t['gid'], t['home']) == ('/work', 'app', 1000, 1000, '/home/app'), t
assert t['entrypoint'] == ['/usr/bin/greet'] and t['cmd'] == ['from', 'cmd'], t
assert t['labels'] == {'org.example.test': 'three-layer'} and t['format'] == 'oci-layout', t
EOF
ok
check_three_layer img
# An exec's own cwd and env win; the sandbox's env too.
ID=$("$SPACE" create "${S[@]}" --isolation jail --template img --env GREETING=mine) || fail "create"
out=$("$SPACE" exec "${S[@]}" --cwd / --env IMAGE_ONLY=2 "$ID" -- sh -c 'pwd; echo $GREETING $IMAGE_ONLY') ||
	fail "exec: $out"
[ "$out" = "$(printf '/\nmine 2')" ] || fail "exec overrides: $out"; ok
expect_rc 0 "$SPACE" rm "$ID" "${S[@]}"

# 2. The same image again: no layer read, under 100 ms; under its own name: nothing to do.
expect_rc 0 "$SPACE" template import again --image "$WORK/oci" --json "${S[@]}"
ms=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["import_ms"])')
[ "$ms" -lt 100 ] || fail "re-import by digest took $ms ms"
echo "$err" | grep -q "layer" && fail "re-import read layers: $err"
echo "$out" | grep -q "$DIGEST" || fail "re-import lost the digest: $out"; ok
echo "re-import by digest: $ms ms"
out=$(run --template again -- cat /work/hello.txt) && [ "$out" = "hello from the image" ] || fail "again: $out"; ok
expect_rc 0 "$SPACE" template import img --image "$WORK/oci" "${S[@]}"; ok
"${MK[@]}" noshell "$WORK/other" >/dev/null
expect_rc 1 "$SPACE" template import img --image "$WORK/other" --force "${S[@]}"
echo "$err" | grep -q "already exists, made from image $DIGEST" || fail "another image, same name: $err"; ok
for t in img again; do expect_rc 0 "$SPACE" template rm "$t" "${S[@]}"; done

# 3. The other formats, each a full import: an OCI archive, `docker save` (legacy and Docker 25's).
"${MK[@]}" three-layer "$WORK/oci.tar" --format oci-tar >/dev/null
"${MK[@]}" three-layer "$WORK/legacy.tar" --format docker-legacy >/dev/null
"${MK[@]}" three-layer "$WORK/docker-oci.tar" --format docker-oci >/dev/null
for pair in oci:oci.tar docker-legacy:legacy.tar docker-oci:docker-oci.tar; do
	f=${pair%%:*} src=$WORK/${pair#*:}
	expect_rc 0 "$SPACE" template import "t-$f" --image "$src" --json "${S[@]}"
	echo "$out" | grep -q "$DIGEST" || fail "$f: digest: $out"
	check_three_layer "t-$f"
	expect_rc 0 "$SPACE" template rm "t-$f" "${S[@]}"
done

# 4. A multi-platform index: the linux/amd64 image (not arm64, not the attestation).
"${MK[@]}" hostile-index-multi "$WORK/multi" >/dev/null
expect_rc 0 "$SPACE" template import multi --image "$WORK/multi" "${S[@]}"
out=$(run --template multi -- cat /work/hello.txt) && [ "$out" = "hello from the image" ] || fail "multi: $out"; ok

# 5. Inputs that are not what they say, refused with the reason; nothing left behind.
expect_rc 1 "$SPACE" template import x --image docker://debian:12 "${S[@]}"
echo "$err" | grep -q "skopeo copy docker://IMAGE oci-archive:image.tar" || fail "registry ref: $err"; ok
expect_rc 1 "$SPACE" template import x --image debian:12 "${S[@]}"
echo "$err" | grep -q "pulls from no registry" || fail "bare ref: $err"; ok
"${MK[@]}" noshell "$WORK/noshell" >/dev/null
expect_rc 1 "$SPACE" template import x --image "$WORK/noshell" "${S[@]}"
echo "$err" | grep -q "no /bin/sh" || fail "no shell: $err"; ok
expect_rc 0 "$SPACE" template import forced --image "$WORK/noshell" --force "${S[@]}"; ok
mkdir -p "$WORK/bare/etc" && echo x >"$WORK/bare/etc/x"
expect_rc 1 "$SPACE" template import x --rootfs "$WORK/bare" "${S[@]}"
echo "$err" | grep -q "no /bin/sh" || fail "dir without shell: $err"; ok
# A tree or tarball that is an image: imported as one (plain), or refused with the reason (compressed).
expect_rc 0 "$SPACE" template import asrootfs --rootfs "$WORK/oci" --json "${S[@]}"
echo "$out" | grep -q "$DIGEST" || fail "an image given as --rootfs was not imported as one: $out"; ok
gzip -c "$WORK/oci.tar" >"$WORK/oci.tar.gz"
expect_rc 1 "$SPACE" template import x --rootfs "$WORK/oci.tar.gz" "${S[@]}"
echo "$err" | grep -q "looks like a container image" || fail "compressed image as rootfs: $err"; ok
expect_rc 1 "$SPACE" template import x --image "$WORK/oci.tar.gz" "${S[@]}"
echo "$err" | grep -q "decompress it first" || fail "compressed image: $err"; ok
"${MK[@]}" hostile-platform "$WORK/arm" >/dev/null
expect_rc 1 "$SPACE" template import x --image "$WORK/arm" "${S[@]}"
echo "$err" | grep -q "image is for linux/arm64; this host runs linux/amd64" || fail "platform: $err"; ok
"${MK[@]}" hostile-digest "$WORK/baddigest" >/dev/null
expect_rc 1 "$SPACE" template import x --image "$WORK/baddigest" "${S[@]}"
echo "$err" | grep -q "layer 2: digest mismatch" || fail "digest: $err"; ok
[ ! -e "$STATE/pool/templates/x" ] && [ -z "$(ls -A "$STATE/pool/.tmp")" ] || fail "a refused import left files"; ok
grep -ls unpack /run/space-uids/* 2>/dev/null | grep -q . && fail "space-unpack uid slots left"; ok
pgrep -x space-unpack >/dev/null && fail "space-unpack processes left"; ok

expect_rc 0 "$SPACE" ls --json "${S[@]}"
[ "$out" = "[]" ] || fail "sandboxes left: $out"
echo "image import: $checks checks, 0 failed"
