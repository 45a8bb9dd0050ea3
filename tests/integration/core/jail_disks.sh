#!/bin/bash
# Which disk a jail gets (core/disk_tree.h), on a pool directory of an operator's own btrfs:
# - without quotas: templates get no tree, jails keep ext4 images on loop devices (a full pool would turn
#   them read-only), `space doctor` warns with the command that turns quotas on; writes, a checkpoint and a
#   rollback work; nothing is left behind;
# - once the operator turned quotas on (full qgroups here: this btrfs-progs predates `--simple`), a template
#   imported then gets a tree and its jails run on it, capped at the disk size (EDQUOT); the template imported
#   before keeps the image; our own btrfs's quota setting is never changed by us.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
export SPACE_QUIET_JAIL=1
checks=0
ok() { checks=$((checks + 1)); }
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
STATE=$WORK/state
S=(--state "$STATE")
# The operator's btrfs: a loop file of our own, mounted here, with the pool a directory on it.
truncate -s 2G "$WORK/fs.img"
mkfs.btrfs -q "$WORK/fs.img" >/dev/null 2>&1 || fail "mkfs.btrfs"
mkdir "$WORK/fs"
mount -o loop "$WORK/fs.img" "$WORK/fs" || fail "mount the test's btrfs"
on_exit "umount '$WORK/fs'"
on_exit "for _id in \$('$SPACE' ls --json --state '$STATE' | grep -o '\"id\":[[:space:]]*\"sb-[a-z0-9]*\"' | cut -d'\"' -f4); do '$SPACE' rm \$_id --state '$STATE'; done"
mkdir "$WORK/fs/pool"
expect_rc 0 "$SPACE" init --pool "$WORK/fs/pool" "${S[@]}"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import old --rootfs "$WORK/tree" "${S[@]}"
[ ! -e "$WORK/fs/pool/templates/old/tree" ] || fail "a template on a pool without quotas got a tree"; ok
! btrfs qgroup show "$WORK/fs" >/dev/null 2>&1 || fail "quotas were turned on in the operator's btrfs"; ok
expect_rc 0 "$SPACE" doctor --json "${S[@]}"
d=$(echo "$out" | tr -d '\n\t')
echo "$d" | grep -q '"jail-disks",[^}]*"warn",[^}]*ext4 images[^}]*btrfs quota enable --simple' || fail "doctor on a pool without quotas: $d"; ok

# A jail on the image: ext4 as its root, writes, checkpoint and rollback.
expect_rc 0 "$SPACE" create --template old --isolation jail "${S[@]}"
id=$out
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'grep " / " /proc/mounts; echo one >/root/f'
echo "$out" | grep -q " / ext4 rw" || fail "a jail without a tree is not on its ext4 image: $out"; ok
expect_rc 0 "$SPACE" checkpoint "$id" "${S[@]}"
cp=$out
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'echo two >/root/f'
expect_rc 0 "$SPACE" rollback "$id" "$cp" "${S[@]}"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- cat /root/f
[ "$out" = one ] || fail "rollback of an image jail: $out"; ok
expect_rc 0 "$SPACE" rm "$id" --with-checkpoints "${S[@]}"
[ -z "$(leaks_of "$id")" ] || fail "an image jail left: $(leaks_of "$id")"; ok

# The operator turns quotas on: new templates get trees; the old one keeps its image.
btrfs quota enable "$WORK/fs" || fail "btrfs quota enable"
expect_rc 0 "$SPACE" template import new --rootfs "$WORK/tree" "${S[@]}"
[ -d "$WORK/fs/pool/templates/new/tree" ] || fail "a template imported with quotas on has no tree"; ok
expect_rc 0 "$SPACE" doctor --json "${S[@]}"
echo "$out" | tr -d '\n\t' | grep -q '"jail-disks",[^}]*"ok",[^}]*qgroups' || fail "doctor with qgroups: $out"; ok
expect_rc 0 "$SPACE" create --template new --isolation jail "${S[@]}"
id=$out
disk=$(stat -c %s "$WORK/fs/pool/templates/new/rootfs.ext4")
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- sh -c "grep ' / ' /proc/mounts; dd if=/dev/zero of=/root/big bs=1M count=$(((disk >> 20) + 32)) 2>&1; exit 1"
echo "$out" | grep -q " / btrfs rw" || fail "a jail of a template with a tree is not on it: $out"
echo "$out" | grep -q "Disk quota exceeded" || fail "no cap on a tree jail under qgroups: $out"; ok
expect_rc 0 "$SPACE" rm "$id" "${S[@]}"
expect_rc 0 "$SPACE" run --template old --isolation jail "${S[@]}" -- sh -c 'grep " / " /proc/mounts'
echo "$out" | grep -q " / ext4 " || fail "the template imported before quotas lost its image disk: $out"; ok
[ -z "$(leaks_of "$id")" ] || fail "a tree jail left: $(leaks_of "$id")"; ok
echo "jail-disks: $checks checks, 0 failed"
