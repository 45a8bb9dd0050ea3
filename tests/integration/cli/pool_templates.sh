#!/bin/bash
# space init, the btrfs pool, templates: what a user sees, including every bad input.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 missing (e2fsprogs)"

STATE=$(mktemp -d /tmp/space-test-XXXXXX)
on_exit "rm -rf '$STATE'"
on_exit "umount '$STATE/pool'"
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"

# Usage errors exit 2; --help exits 0.
expect_rc 2 "$SPACE" init --loop-pool lots --state "$STATE"
expect_rc 2 "$SPACE" init --pool /x --loop-pool 1G --state "$STATE"
expect_rc 2 "$SPACE" frobnicate
expect_rc 0 "$SPACE" --help
expect_rc 0 "$SPACE" template --help
expect_rc 0 "$SPACE" version --json
echo "$out" | grep -q '"version"' || fail "version --json: $out"

# Before init: a clear error naming the fix.
expect_rc 1 "$SPACE" template ls --state "$STATE"
echo "$err" | grep -q "space init" || fail "uninitialized state error does not name space init: $err"

# A pool that is not btrfs: exit 1, message names btrfs and the fix; nothing left initialized.
expect_rc 1 "$SPACE" init --pool "$WORK" --state "$STATE"
echo "$err" | grep -q "not btrfs" || fail "non-btrfs error: $err"
echo "$err" | grep -q -- "--loop-pool" || fail "non-btrfs error gives no fix: $err"
[ ! -e "$STATE/space.db" ] || fail "failed init left a store behind"

# Loop pool; init is idempotent.
expect_rc 0 "$SPACE" init --loop-pool 2G --state "$STATE"
on_exit "'$SPACE' pool unmount --state '$STATE'"
expect_rc 0 "$SPACE" init --loop-pool 2G --state "$STATE" --json
echo "$out" | grep -q '"pool"' || fail "init --json: $out"
[ "$(stat -f -c %T "$STATE/pool")" = btrfs ] || fail "pool is not btrfs"
# Settings alone (no --pool, no --loop-pool) leave the pool as it is: still a loop pool, with its image.
expect_rc 0 "$SPACE" init --isolation jail --state "$STATE"
expect_rc 0 "$SPACE" pool --json --state "$STATE"
echo "$out" | grep -q "\"loop_image\":[[:space:]]*\"$STATE/pool.img\"" || fail "init without a pool forgot the loop image: $out"

# Templates from a directory, a tarball and an ext4 image.
make_busybox_tree "$WORK/tree"
echo hello-from-template >"$WORK/tree/etc/marker"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
tar -C "$WORK/tree" -czf "$WORK/tree.tar.gz" .
expect_rc 0 "$SPACE" template import fromtar --rootfs "$WORK/tree.tar.gz" --state "$STATE"
expect_rc 0 "$SPACE" template import fromext4 --rootfs "$STATE/pool/templates/tiny/rootfs.ext4" --size 256M --state "$STATE"
expect_rc 0 "$SPACE" template ls --json --state "$STATE"
for t in tiny fromtar fromext4; do
	echo "$out" | grep -q "\"name\":[[:space:]]*\"$t\"" || fail "template ls --json lacks $t: $out"
	img="$STATE/pool/templates/$t/rootfs.ext4"
	e2fsck -n -f "$img" >/dev/null 2>&1 || fail "$t: rootfs.ext4 is not clean (e2fsck -n)"
	btrfs subvolume show "$STATE/pool/templates/$t" >/dev/null 2>&1 || fail "$t is not a btrfs subvolume"
	debugfs -R 'cat /etc/marker' "$img" 2>/dev/null | grep -q hello-from-template || fail "$t: content missing"
done
[ "$(stat -c %s "$STATE/pool/templates/fromext4/rootfs.ext4")" = $((256 << 20)) ] || fail "--size not applied"

# Bad input: clear errors, nothing half-made behind.
expect_rc 1 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
echo "$err" | grep -q "already exists" || fail "duplicate: $err"
expect_rc 1 "$SPACE" template import 'a/b' --rootfs "$WORK/tree" --state "$STATE"
echo "$err" | grep -q "invalid template name" || fail "bad name: $err"
expect_rc 1 "$SPACE" template import .. --rootfs "$WORK/tree" --state "$STATE"
expect_rc 1 "$SPACE" template import x --rootfs "$WORK/missing" --state "$STATE"
echo "$err" | grep -q "No such file" || fail "missing rootfs: $err"
head -c 100000 /dev/urandom >"$WORK/junk.bin"
expect_rc 1 "$SPACE" template import x --rootfs "$WORK/junk.bin" --state "$STATE"
echo "$err" | grep -q "neither a directory, a tarball nor an ext4 image" || fail "junk rootfs: $err"
printf '\x1f\x8b\x08garbage' >"$WORK/broken.tar.gz"
expect_rc 1 "$SPACE" template import x --rootfs "$WORK/broken.tar.gz" --state "$STATE"
echo "$err" | grep -q "extract tarball failed" || fail "broken tarball: $err"
expect_rc 1 "$SPACE" template import x --rootfs "$WORK/tree" --kernel "$WORK/nokernel" --state "$STATE"
[ -z "$(ls -A "$STATE/pool/.tmp")" ] || fail "failed imports left staging subvolumes: $(ls "$STATE/pool/.tmp")"
[ ! -e "$STATE/pool/templates/x" ] || fail "failed import left a template"
expect_rc 0 "$SPACE" template ls --json --state "$STATE"
[ "$(echo "$out" | grep -c '"name"')" = 3 ] || fail "expected exactly 3 templates: $out"

# rm: unknown name fails; known ones go with their subvolumes.
expect_rc 1 "$SPACE" template rm nosuch --state "$STATE"
for t in tiny fromtar fromext4; do expect_rc 0 "$SPACE" template rm "$t" --state "$STATE"; done
[ -z "$(ls -A "$STATE/pool/templates")" ] || fail "template rm left subvolumes"
[ -z "$(btrfs subvolume list "$STATE/pool" 2>/dev/null)" ] || fail "subvolumes left: $(btrfs subvolume list "$STATE/pool")"

# The loop pool is re-mounted on demand after an unmount (as after a reboot).
expect_rc 0 "$SPACE" pool unmount --state "$STATE"
grep -q " $STATE/pool " /proc/mounts && fail "pool still mounted after unmount"
expect_rc 0 "$SPACE" template ls --state "$STATE"
grep -q " $STATE/pool " /proc/mounts || fail "pool not re-mounted on use"
expect_rc 0 "$SPACE" pool unmount --state "$STATE"
losetup -a | grep -q "$STATE" && fail "loop devices leaked: $(losetup -a | grep "$STATE")"
echo "pool and templates: ok"
