#!/bin/bash
# space template export: a template's tree as a rootfs tar and as an OCI image archive; importing either
# gives the same tree (compared file by file from inside jail sandboxes of both: type, mode with set-id
# bits, owner, size, link count, content, symlink target; device numbers and xattrs from the images), and the
# OCI archive keeps the image's Env/WorkingDir/User/Entrypoint/Cmd. Exports go whole or not at all.
. "$(dirname "$0")/../../lib.sh"
jail_test_setup 3G
need_built "${SPACE_UNPACK_PATH:-}" space-unpack SPACE_UNPACK_PATH
command -v python3 >/dev/null || skip "python3 missing"
command -v zstd >/dev/null || skip "zstd missing"
MK=(python3 "$(dirname "$0")/mkimage.py")
checks=0
ok() { checks=$((checks + 1)); }
# What a sandbox of template $1 sees of its disk, one line per entry (the mounts of a jail left out).
tree_of() {
	"$SPACE" run "${S[@]}" --isolation jail --template "$1" --user 0 -- sh -c '
		cd / && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp -o -path ./run \
			-o -path ./lost+found \) -prune -o -print | sort | while read -r f; do
			l=$(stat -c "%n %F %a %u %g %h %t:%T" "$f")
			if [ -L "$f" ]; then l="$l -> $(readlink "$f")"
			elif [ -f "$f" ]; then l="$l $(stat -c %s "$f") $(md5sum < "$f" | cut -c1-32)"; fi
			echo "$l"
		done'
}

"${MK[@]}" three-layer "$WORK/oci" >/dev/null
expect_rc 0 "$SPACE" template import orig --image "$WORK/oci" "${S[@]}"
"${MK[@]}" hostile-device "$WORK/dev" >/dev/null
expect_rc 0 "$SPACE" template import devs --image "$WORK/dev" "${S[@]}"

for t in orig devs tiny; do
	tree_of "$t" >"$WORK/$t.tree" || fail "tree of $t"
	[ "$(wc -l <"$WORK/$t.tree")" -gt 100 ] || fail "tree of $t is too short: $(wc -l <"$WORK/$t.tree")"
	for fmt in rootfs oci; do
		expect_rc 0 "$SPACE" template export "$t" -o "$WORK/$t-$fmt.tar" --format "$fmt" --json "${S[@]}"
		[ "$fmt" = oci ] && opt=--image || opt=--rootfs
		expect_rc 0 "$SPACE" template import "$t-$fmt" "$opt" "$WORK/$t-$fmt.tar" "${S[@]}"
		tree_of "$t-$fmt" >"$WORK/$t-$fmt.tree" || fail "tree of $t-$fmt"
		diff "$WORK/$t.tree" "$WORK/$t-$fmt.tree" >"$WORK/diff" || fail "$t exported as $fmt and imported differs: $(head -20 "$WORK/diff")"
		ok
	done
done
# The specifics, to be sure the listing saw them: a set-uid file, a hard link pair, a device node.
grep -q '^./usr/bin/su-like regular file 4755 0 0 1 ' "$WORK/orig-oci.tree" || fail "set-uid file: $(grep su-like "$WORK/orig-oci.tree")"; ok
grep -q '^./srv/link regular file 644 1000 1000 2 ' "$WORK/orig-rootfs.tree" || fail "hard link: $(grep srv/ "$WORK/orig-rootfs.tree")"; ok
# (A jail's disk is a tree without device nodes, core/disk_tree.h: the device is checked in the image.)
debugfs -R 'stat /dev-mem' "$STATE/pool/templates/devs-rootfs/rootfs.ext4" 2>/dev/null | tr -s ' \t' ' ' |
	grep -q 'Type: character special Mode: 0666' || fail "device: not in the image exported and imported again"
debugfs -R 'stat /dev-mem' "$STATE/pool/templates/devs-rootfs/rootfs.ext4" 2>/dev/null |
	grep -q 'Device major/minor number: 01:01' || fail "device: its numbers were not kept"; ok
for t in orig-rootfs orig-oci; do
	debugfs -R 'ea_list /usr/bin/ping-cap' "$STATE/pool/templates/$t/rootfs.ext4" 2>/dev/null |
		grep -q 'security.capability (20) = 01 00 00 02 00 20' || fail "$t lost security.capability"
	debugfs -R 'ea_list /etc/note' "$STATE/pool/templates/$t/rootfs.ext4" 2>/dev/null |
		grep -q 'user.origin (9) = "layer one"' || fail "$t lost user.origin"
done; ok

# The OCI archive carries what the image gives processes; the rootfs tar is a tree only.
out=$("$SPACE" run "${S[@]}" --isolation jail --template orig-oci -- sh -c 'id -u; pwd; echo $GREETING') ||
	fail "orig-oci: $out"
[ "$out" = "$(printf '1000\n/work\nhello from env')" ] || fail "the OCI export lost the defaults: $out"; ok
out=$("$SPACE" run "${S[@]}" --isolation jail --template orig-oci) && [ "$out" = "greet: from cmd" ] ||
	fail "the OCI export lost Entrypoint/Cmd: $out"; ok
out=$("$SPACE" run "${S[@]}" --isolation jail --template orig-rootfs -- id -u) && [ "$out" = 0 ] ||
	fail "a rootfs export is a tree only: $out"; ok

# Whole or not at all; bad input refused.
expect_rc 1 "$SPACE" template export nosuch -o "$WORK/nosuch.tar" "${S[@]}"
[ ! -e "$WORK/nosuch.tar" ] && [ ! -e "$WORK/nosuch.tar.partial" ] || fail "a failed export left a file"; ok
expect_rc 2 "$SPACE" template export orig -o "$WORK/x.tar" --format qcow2 "${S[@]}"; ok
"$SPACE" template export orig -o - "${S[@]}" 2>/dev/null | tar tf - | grep -qx 'srv/original' || fail "export to stdout"; ok

expect_rc 0 "$SPACE" ls --json "${S[@]}"
[ "$out" = "[]" ] || fail "sandboxes left: $out"
echo "export and import: $checks checks, 0 failed"
