#!/bin/bash
# Hostile layers cannot write outside the template: absolute paths, "..", a symlink then a file through
# it, a hard link out, device nodes, set-id files; each kept inside the image (checked in a jail sandbox of
# it) or refused, and never on the host. Also a rootfs tarball with "..", which goes through the same
# confined helper. Then the helper itself: its own uid, no capabilities, no_new_privs, seccomp, seen
# through /proc while it runs; `space doctor --verbose` lists it.
. "$(dirname "$0")/../../lib.sh"
jail_test_setup 3G
need_built "${SPACE_UNPACK_PATH:-}" space-unpack SPACE_UNPACK_PATH
command -v python3 >/dev/null || skip "python3 missing"
MK=(python3 "$(dirname "$0")/mkimage.py")
checks=0
ok() { checks=$((checks + 1)); }
run() { "$SPACE" run "${S[@]}" --isolation jail "$@"; }
img() { echo "$STATE/pool/templates/$1/rootfs.ext4"; }
# Nothing of these names may appear on the host.
HOSTILE=(/tmp/abs-escape /etc/abs-file /tmp/space-dotdot-escape /tmp/space-symlink-escape-target
	/tmp/space-symlink-escape-rel)
for p in "${HOSTILE[@]}"; do rm -rf "$p"; on_exit "rm -rf '$p'"; done
touch "$WORK/marker"
sleep 1

# Absolute names land inside the image, at the same path from its root.
"${MK[@]}" hostile-abs "$WORK/abs" >/dev/null
expect_rc 0 "$SPACE" template import abs --image "$WORK/abs" "${S[@]}"
out=$(run --template abs -- cat /etc/abs-file) && [ "$out" = absolute ] || fail "absolute path: $out"; ok
debugfs -R 'cat /tmp/abs-escape' "$(img abs)" 2>/dev/null | grep -q "inside the image only" ||
	fail "/tmp/abs-escape is not in the image"; ok

# ".." is refused, not clamped: the import fails and nothing is made.
"${MK[@]}" hostile-dotdot "$WORK/dotdot" >/dev/null
expect_rc 1 "$SPACE" template import dotdot --image "$WORK/dotdot" "${S[@]}"
echo "$err" | grep -q "climbs out of the root with '..': refused" || fail "dotdot: $err"; ok
"${MK[@]}" hostile-hardlink-escape "$WORK/hlesc" >/dev/null
expect_rc 1 "$SPACE" template import hlesc --image "$WORK/hlesc" "${S[@]}"
echo "$err" | grep -q "climbs out" || fail "hard link out: $err"; ok
"${MK[@]}" hostile-hardlink-missing "$WORK/hlmiss" >/dev/null
expect_rc 1 "$SPACE" template import hlmiss --image "$WORK/hlmiss" "${S[@]}"
echo "$err" | grep -q "which the image does not have" || fail "hard link to nothing: $err"; ok

# A symlink to a host path, then a file through it: the symlink is followed inside the image.
"${MK[@]}" hostile-symlink-escape "$WORK/sym" >/dev/null
expect_rc 0 "$SPACE" template import sym --image "$WORK/sym" "${S[@]}"
debugfs -R 'cat /tmp/space-symlink-escape-target/planted' "$(img sym)" 2>/dev/null | grep -q "through a symlink" ||
	fail "the file through the symlink is not in the image"; ok
debugfs -R 'cat /tmp/space-symlink-escape-rel' "$(img sym)" 2>/dev/null | grep -q "relative symlink" ||
	fail "the file through the relative symlink is not in the image"; ok
out=$(run --template sym -- readlink /up) && [ "$out" = /tmp/space-symlink-escape-target ] || fail "symlink: $out"; ok

# Device nodes: kept as the image's metadata (a VM's disk), dead there (mounted nodev); a jail's disk, the
# tree copied out of the image by a user namespace's root, has none (the import says it skipped them).
"${MK[@]}" hostile-device "$WORK/dev" >/dev/null
expect_rc 0 "$SPACE" template import dev --image "$WORK/dev" "${S[@]}"
echo "$err" | grep -q "skipped 2 device nodes" || fail "the import does not say it skipped the device nodes: $err"; ok
debugfs -R 'stat /dev-mem' "$(img dev)" 2>/dev/null | grep -q "Type: character special" ||
	fail "the device node is not in the image"; ok
out=$(run --template dev -- sh -c 'stat -c "%F" /fifo; ls /dev-mem /dev-sda; head -c 1 /dev-mem; echo rc=$?' 2>&1)
echo "$out" | grep -q "fifo" || fail "the fifo of the image is not in the jail: $out"; ok
echo "$out" | grep -q "rc=1" && ! echo "$out" | grep -q "special file" || fail "a device node of the image in a jail: $out"; ok

# Set-id files: kept inside, no privilege from them.
"${MK[@]}" hostile-setuid "$WORK/suid" >/dev/null
expect_rc 0 "$SPACE" template import suid --image "$WORK/suid" "${S[@]}"
out=$(run --template suid --user 1000 -- sh -c 'stat -c %a /usr/bin/id /usr/bin/sgid; /usr/bin/id -u')
[ "$out" = "$(printf '4755\n2755\n1000')" ] || fail "set-id files: $out"; ok

# A rootfs tarball is hostile the same way: applied confined, ".." refused.
python3 - "$WORK/evil.tar.gz" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], 'w:gz') as t:
    h = tarfile.TarInfo('bin/sh'); h.size = 3; h.mode = 0o755; t.addfile(h, io.BytesIO(b'#!\n'))
    h = tarfile.TarInfo('../../../tmp/space-dotdot-escape'); h.size = 2; t.addfile(h, io.BytesIO(b'x\n'))
EOF
expect_rc 1 "$SPACE" template import evil --rootfs "$WORK/evil.tar.gz" "${S[@]}"
echo "$err" | grep -q "extract tarball failed: .*climbs out" || fail "rootfs tarball with ..: $err"; ok

# Nothing of it on the host: none of the names, no new set-id file or device node under the state or /tmp.
for p in "${HOSTILE[@]}"; do [ ! -e "$p" ] || fail "$p exists on the host"; done; ok
[ -z "$(find "$STATE" /tmp -xdev -newer "$WORK/marker" \( -perm -4000 -o -perm -2000 -o -type b -o -type c \) \
	-not -path "$STATE/pool/*/rootfs.ext4" 2>/dev/null)" ] || fail "set-id files or device nodes on the host"; ok
for t in dotdot hlesc hlmiss evil; do [ ! -e "$STATE/pool/templates/$t" ] || fail "refused $t left a template"; done
[ -z "$(ls -A "$STATE/pool/.tmp")" ] || fail "refused imports left work subvolumes"; ok

# The helper as the kernel sees it while it works: a bigger image, /proc sampled.
"${MK[@]}" big "$WORK/big" --size-mb 48 >/dev/null
"$SPACE" template import big --image "$WORK/big" "${S[@]}" >"$WORK/big.log" 2>&1 &
imp=$!
status=""
# A sanitized test build runs the helper without its filter (the sanitizer's runtime needs far more).
want_seccomp=2
ldd "$SPACE_UNPACK_PATH" 2>/dev/null | grep -q libasan && want_seccomp=0
for _ in $(seq 1 2000); do
	p=$(pgrep -x space-unpack | head -n 1)
	if [ -n "$p" ] && s=$(grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/$p/status 2>/dev/null) &&
		echo "$s" | grep -q "Seccomp:.$want_seccomp" && echo "$s" | grep -q 'NoNewPrivs:.1'; then
		status=$s
		break
	fi
	sleep 0.005
done
wait $imp || fail "big import: $(cat "$WORK/big.log")"
[ -n "$status" ] || fail "space-unpack never seen confined while it ran"
echo "$status" | grep -qE '^Uid:\s+(2[4-6][0-9]{8})\s' || fail "space-unpack's uid is not a slot of its own: $status"
echo "$status" | grep -q 'CapEff:.0000000000000000' && echo "$status" | grep -q 'CapBnd:.0000000000000000' &&
	echo "$status" | grep -q 'NoNewPrivs:.1' || fail "space-unpack not confined: $status"; ok
expect_rc 0 "$SPACE" doctor --verbose --json "${S[@]}"
echo "$out" | python3 -c '
import json, sys
c = [x for x in json.load(sys.stdin)["checks"] if x["name"] == "helper-unpack"][0]
assert c["status"] == "ok" and "apply" in c["detail"], c' || fail "doctor does not list space-unpack: $out"; ok

expect_rc 0 "$SPACE" ls --json "${S[@]}"
[ "$out" = "[]" ] || fail "sandboxes left: $out"
echo "hostile layers: $checks checks, 0 failed"
