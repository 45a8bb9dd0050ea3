#!/bin/bash
# space-unpack receive: real btrfs send streams (made here by the kernel, on a loop btrfs) applied confined,
# as the library runs it for `space template receive`: as uid 0 of a user namespace whose 0..65535 is the
# host's 300000.., fd 0 the stream, fd 3 the parent's tree, fd 5 the destination, fd 4 its status lines.
# A whole stream of a tree holding every kind of entry a stream can make (directories, files with holes,
# set-id bits, owners, an xattr, a symlink, a hard link, a FIFO, a reflinked copy), then a stream of a
# snapshot of it against it (renames, unlinks, a truncate, a rewrite, clones from the parent, new entries)
# applied onto a copy: both give the trees the kernel sent, entry by entry (type, mode, owner, size,
# content, link target). Then an incremental stream announced as whole is refused. Needs root, btrfs, loop
# devices and user namespaces (else exit 77).
set -u
U=${SPACE_UNPACK_PATH:?SPACE_UNPACK_PATH must point at space-unpack}
[ -x "$U" ] || { echo "FAIL: space-unpack not built ($U)"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
command -v mkfs.btrfs >/dev/null && command -v btrfs >/dev/null || { echo "SKIP: btrfs-progs missing"; exit 77; }
grep -qw btrfs /proc/filesystems || modprobe btrfs 2>/dev/null || { echo "SKIP: no btrfs in this kernel"; exit 77; }
[ -e /dev/loop-control ] || { echo "SKIP: no loop devices"; exit 77; }
. "$(dirname "$0")/lib.sh"
# The runner: CMD as uid 0 of a new user namespace mapping 0..65535 to $BASE.., its stdin passed on, fd 4 a
# socket for the status lines, fds 3 and 5 passed on.
unpack_setup receive mnt --userns --stdin

# ---- the trees, made by host root on a loop btrfs; their streams made by the kernel ----
truncate -s 300M "$tmp/img"
mkfs.btrfs -q "$tmp/img" >/dev/null 2>&1 || { echo "SKIP: mkfs.btrfs failed"; exit 77; }
mkdir "$tmp/mnt"
mount -o loop "$tmp/img" "$tmp/mnt" || { echo "SKIP: cannot mount a loop btrfs"; exit 77; }
M=$tmp/mnt
btrfs subvolume create "$M/a" >/dev/null
(
	cd "$M/a" || exit 1
	mkdir -p d/e srv
	printf 'hello' >d/f
	head -c 200000 /dev/urandom >big
	truncate -s 8M sparse
	head -c 4096 /dev/urandom | dd of=sparse bs=4096 seek=1000 conv=notrunc status=none
	ln -s ../f d/e/l
	ln -s /etc/shadow abs-link
	ln d/f hl
	mkfifo fifo
	printf '#!/bin/sh\n' >suid
	chmod 4755 suid
	chown 1000:1000 d/f
	chown 65534:65534 srv
	cp --reflink=always big big-copy
	python3 -c 'import os; os.setxattr("d/f", "user.note", b"kept")'
)
btrfs property set "$M/a" ro true
btrfs send -q "$M/a" -f "$tmp/a.stream" || { echo "FAIL: btrfs send"; exit 1; }
btrfs subvolume snapshot "$M/a" "$M/b" >/dev/null
(
	cd "$M/b" || exit 1
	echo more >>d/f
	mv d/e e2
	rm fifo abs-link
	truncate -s 100 hl
	head -c 5000 /dev/urandom | dd of=big bs=1 seek=100000 conv=notrunc status=none
	cp --reflink=always big big2
	mkdir -p new/deep
	echo new >new/deep/file
	chmod 700 new
)
btrfs property set "$M/b" ro true
btrfs send -q -p "$M/a" "$M/b" -f "$tmp/b.stream" || { echo "FAIL: btrfs send -p"; exit 1; }

# listing DIR OFFSET: every entry below DIR: path, type, mode, owner (less OFFSET), size, content, target.
listing() {
	(cd "$1" && find . -mindepth 1 | LC_ALL=C sort | while read -r f; do
		l=$(stat -c "%n %F %a" "$f")
		l="$l $(($(stat -c %u "$f") - $2)):$(($(stat -c %g "$f") - $2))"
		if [ -L "$f" ]; then l="$l -> $(readlink "$f")"
		elif [ -f "$f" ]; then l="$l $(stat -c %s "$f") $(md5sum <"$f" | cut -c1-32)"; fi
		echo "$l"
	done)
}
# receive STREAM PARENT DST STATUS ARGS...: the helper, confined, fd 0 the stream.
receive() {
	local s=$1 p=$2 d=$3 st=$4
	shift 4
	python3 "${RUN[@]}" "$U" receive "$@" <"$s" 3<"$p" 5<"$d" >"$st"
}

# ---- whole ----
D=$tmp/dst
mkdir "$D"
chown $BASE:$BASE "$D"
receive "$tmp/a.stream" "$D" "$D" "$tmp/a.status" --max-bytes $((1 << 30)) --max-entries 1000
rc=$?
check "a whole stream is received (rc $rc: $(tail -1 "$tmp/a.status"))" '[ $rc = 0 ] && grep -qx done "$tmp/a.status"'
listing "$M/a" 0 >"$tmp/a.want"
listing "$D" $BASE >"$tmp/a.got"
check "the tree received is the one sent ($(wc -l <"$tmp/a.want") entries)" \
	'diff "$tmp/a.want" "$tmp/a.got" >"$tmp/a.diff" || { head -20 "$tmp/a.diff"; false; }'
check "the set-uid bit, the owners and a hard link are kept" \
	'grep -q "^./suid regular file 4755 0:0 " "$tmp/a.got" && grep -q "^./d/f regular file 644 1000:1000 " "$tmp/a.got" &&
	 [ "$(stat -c %h "$D/hl")" = 2 ] && [ "$(stat -c %i "$D/hl")" = "$(stat -c %i "$D/d/f")" ]'
check "the user xattr is kept" '[ "$(python3 -c "import os,sys; print(os.getxattr(sys.argv[1], \"user.note\").decode())" "$D/d/f")" = kept ]'
check "holes stay holes (8 MiB file, one 4 KiB block)" '[ "$(stat -c %b "$D/sparse")" -lt 64 ]'
check "a symlink to a host file is a symlink, never followed" '[ -L "$D/abs-link" ] && [ "$(readlink "$D/abs-link")" = /etc/shadow ]'
check "the counts line" 'grep -q "^counts commands=[0-9]* entries=[0-9]* bytes=[0-9]*" "$tmp/a.status"'

# ---- against the parent: onto a copy of the whole tree, clones read from the parent (fd 3) ----
I=$tmp/inc
cp -a "$D" "$I"
receive "$tmp/b.stream" "$D" "$I" "$tmp/b.status" --max-bytes $((1 << 30)) --max-entries 1000 --incremental 1
rc=$?
check "an incremental stream is received (rc $rc: $(tail -1 "$tmp/b.status"))" '[ $rc = 0 ] && grep -qx done "$tmp/b.status"'
listing "$M/b" 0 >"$tmp/b.want"
listing "$I" $BASE >"$tmp/b.got"
check "the tree made is the snapshot sent ($(wc -l <"$tmp/b.want") entries)" \
	'diff "$tmp/b.want" "$tmp/b.got" >"$tmp/b.diff" || { head -20 "$tmp/b.diff"; false; }'
check "its stream was a fraction of the whole ($(stat -c %s "$tmp/b.stream") of $(stat -c %s "$tmp/a.stream") bytes)" \
	'[ "$(stat -c %s "$tmp/b.stream")" -lt $(($(stat -c %s "$tmp/a.stream") / 4)) ]'

# ---- refused ----
# refused WHAT STREAM NAME TEXT ARGS...: STREAM received into an empty $tmp/NAME (the namespace's root owns
# it) fails, and its last status line says TEXT.
refused() {
	local what=$1 stream=$2 dir=$tmp/$3 text=$4 st=$tmp/$3.status
	shift 4
	mkdir "$dir"
	chown $BASE:$BASE "$dir"
	receive "$stream" "$dir" "$dir" "$st" "$@"
	rc=$?
	check "$what (rc $rc: $(tail -1 "$st"))" '[ $rc = 1 ] && grep -q "$text" "$st"'
}
refused "an incremental stream where a whole one is announced is refused" "$tmp/b.stream" wrong \
	"an incremental stream where a full one was announced" --max-bytes $((1 << 30)) --max-entries 1000
refused "data over --max-bytes is refused" "$tmp/a.stream" small "more than 100000 bytes of data" \
	--max-bytes 100000 --max-entries 1000
refused "entries over --max-entries are refused" "$tmp/a.stream" few "more than 3 entries" \
	--max-bytes $((1 << 30)) --max-entries 3

echo "receive test: $((checks - fails)) checks passed, $fails failed"
echo "DONE checks=$checks"
[ $fails = 0 ] && [ $checks -gt 0 ]
