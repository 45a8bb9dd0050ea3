#!/bin/bash
# space-unpack copy: a tree copied into another, confined, as the library runs it for a jail's root disk:
# as uid 0 of a user namespace whose 0..65535 is the host's 300000..365535, fd 3 the source directory, fd 5
# the destination, fd 4 a socket for its status lines (a small python3 wrapper makes the namespace, as
# root writing its maps, and the socket). Checks owners (host 300000+k both sides), modes with set-id bits,
# mtimes, xattrs (one the namespace may not set: a warning), symlink targets (never followed), hard links
# (one beyond PATH_MAX), a FIFO, holes, a 256-deep chain, a lost+found the destination has already, device
# nodes and sockets skipped with a warning; then the refusals: the initial user namespace, --max-bytes,
# --max-entries, a full destination (ENOSPC from the write), a 300-deep chain. Needs root and user
# namespaces (else exit 77). The library runs it on idmapped detached mounts; plain directories whose
# owners are the host range already are the same to it.
set -u
U=${SPACE_UNPACK_PATH:?SPACE_UNPACK_PATH must point at space-unpack}
[ -x "$U" ] || { echo "FAIL: space-unpack not built ($U)"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a user namespace mapping a foreign uid range)"; exit 77; }
. "$(dirname "$0")/lib.sh"
# The runner: fd 4 a socket for the status lines, fds 3 and 5 passed on; --userns maps 0..65535 to $BASE..
# as uid 0 there. The start of the test, for the host's files changed since.
unpack_setup copy full
touch "$tmp/start"

# copy SRC DST STATUS [--host] ARGS...: runs the copy (in the namespace unless --host), its status lines in
# STATUS; returns its exit code.
copy() {
	local src=$1 dst=$2 status=$3 ns=--userns
	shift 3
	if [ "${1:-}" = --host ]; then
		ns=
		shift
	fi
	python3 "${RUN[@]}" $ns "$U" copy "$@" 3<"$src" 5<"$dst" >"$status"
}

# A fresh empty destination owned by the namespace's root, as the library hands it over.
fresh() {
	rm -rf "$1"
	mkdir "$1"
	chown $BASE:$BASE "$1"
}

# ---- the source tree, made as host root ----
S=$tmp/src
mkdir -p "$S"
cd "$S" || exit 1
echo "owned by 1234:55" >owned
printf '#!/bin/sh\necho root\n' >suid
mkdir ro
echo a >ro/a
echo b >ro/b
ln -s /etc/shadow shadow
ln -s ../../.. up
mkdir d1 d2
echo "one inode, two names" >d1/h1
ln d1/h1 d2/h2
mkfifo fifo
truncate -s 64M sparse
head -c 4096 /dev/urandom | dd of=sparse bs=4096 seek=4096 conv=notrunc status=none
echo "has an xattr" >xattr
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.test", b"hello xattr")' xattr
# One the namespace may not set (security.* other than capabilities needs CAP_SYS_ADMIN over the file
# system): counted and warned about, not fatal.
echo "has one it cannot keep" >secxattr
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "security.test", b"x")' secxattr
mkdir lost+found
mknod null c 1 3
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' sock
echo old >oldfile
mkdir olddir
echo inside >olddir/f
# A hard link pair under a path longer than PATH_MAX (made one directory at a time).
long=$(printf 'L%.0s' $(seq 200))
(
	for i in $(seq 25); do
		mkdir "$long" && cd "$long" || exit 1
	done
	echo "deep link" >l1
	ln l1 l2
) || { echo "FAIL: cannot build the long path"; exit 1; }
# A chain exactly COPY_DEPTH_MAX deep (the root's entries are depth 1).
(
	for i in $(seq 256); do mkdir c && cd c || exit 1; done
	echo bottom >f
) || { echo "FAIL: cannot build the 256-deep chain"; exit 1; }
chown -R -h $BASE:$BASE "$S"
chown $((BASE + 1234)):$((BASE + 55)) owned
chown $BASE:$BASE suid
chmod 4755 suid
chown $((BASE + 7)):$((BASE + 8)) fifo
chmod 0620 fifo
chown -h $((BASE + 1000)):$((BASE + 1001)) shadow
chown $((BASE + 100)):$((BASE + 100)) d1/h1
chmod 2750 d2
chown $((BASE + 5)):$((BASE + 6)) ro ro/a
chmod 0400 ro/a
chmod 0500 ro
chmod 0700 "$S"
chmod 0700 lost+found
touch -h -d 2001-01-01T00:00:00Z oldfile olddir up
touch -d 2001-01-01T00:00:00Z olddir
cd / || exit 1

snapshot() { ls -A / "$tmp"; find /etc -newer "$tmp/start" 2>/dev/null; }
D=$tmp/dst
fresh "$D"
# As in a new ext4 destination: a lost+found of its own, which the source's replaces in metadata.
mkdir -m 0755 "$D/lost+found" && chown $BASE:$BASE "$D/lost+found"
: >"$tmp/status"
before=$(snapshot)
copy "$S" "$D" "$tmp/status" --max-bytes $((1 << 30)) --max-entries 100000
rc=$?
after=$(snapshot)
cat "$tmp/status"

# ---- the copy ----
check "the copy exits 0 (rc $rc)" '[ $rc = 0 ]'
check "its first status line is ready" '[ "$(head -n 1 "$tmp/status")" = ready ]'
check "its last status line is done" '[ "$(tail -n 1 "$tmp/status")" = done ]'
check "a counts line" \
	'grep -qE "^counts entries=[0-9]+ files=[0-9]+ dirs=[0-9]+ symlinks=2 hardlinks=2 bytes=[0-9]+ skipped=2\$" "$tmp/status"'
check "a warn line for the device node and the socket" \
	'grep -qx "warn skipped 1 device nodes and 1 sockets" "$tmp/status"'
check "a warn line for the xattr it could not set" \
	'grep -qx "warn xattrs: 1 could not be copied (first: security.test: Operation not permitted, at /secxattr)" "$tmp/status"'
check "progress lines" 'grep -qE "^progress copy [0-9]+ [0-9]+\$" "$tmp/status"'

# Owner, mode, type and mtime of every entry but the skipped ones, as the host sees them.
meta() { (cd "$1" && find . \( -type c -o -type s \) -prune -o -printf '%p %U:%G %m %y %T@\n' | sort); }
meta "$S" >"$tmp/meta.src"
meta "$D" >"$tmp/meta.dst"
if cmp -s "$tmp/meta.src" "$tmp/meta.dst"; then
	ok "owners, modes, types and mtimes of all $(wc -l <"$tmp/meta.src") entries are the source's"
else
	bad "metadata differs: $(diff "$tmp/meta.src" "$tmp/meta.dst" | head -n 10 | cut -c 1-300)"
fi
check "owned is host $((BASE + 1234)):$((BASE + 55))" \
	'[ "$(stat -c %u:%g "$D/owned")" = $((BASE + 1234)):$((BASE + 55)) ]'
check "suid keeps its set-uid bit and owner" '[ "$(stat -c %a:%u "$D/suid")" = 4755:$BASE ]'
check "d2 keeps its set-gid bit" '[ "$(stat -c %a "$D/d2")" = 2750 ]'
check "ro is 0500 with its files in it" \
	'[ "$(stat -c %a "$D/ro")" = 500 ] && [ "$(cat "$D/ro/a" "$D/ro/b")" = "$(printf "a\nb")" ]'
check "oldfile's mtime is 2001-01-01" '[ "$(stat -c %Y "$D/oldfile")" = 978307200 ]'
check "olddir's mtime is 2001-01-01" '[ "$(stat -c %Y "$D/olddir")" = 978307200 ]'
check "the root's owner and mode" '[ "$(stat -c %u:%g:%a "$D")" = $BASE:$BASE:700 ]'
check "the xattr" \
	'[ "$(python3 -c "import os, sys; print(os.getxattr(sys.argv[1], \"user.test\").decode())" "$D/xattr")" = "hello xattr" ]'
check "shadow is the symlink it was, with its owner" \
	'[ -L "$D/shadow" ] && [ "$(readlink "$D/shadow")" = /etc/shadow ] &&
	 [ "$(stat -c %u:%g "$D/shadow")" = $((BASE + 1000)):$((BASE + 1001)) ]'
check "up is the symlink it was, its mtime too" \
	'[ -L "$D/up" ] && [ "$(readlink "$D/up")" = ../../.. ] && [ "$(stat -c %Y "$D/up")" = 978307200 ]'
check "no file in the copy holds /etc/shadow" \
	'[ -z "$(find "$D" -type f -size "$(stat -c %s /etc/shadow)c" -exec cmp -s {} /etc/shadow \; -print)" ]'
check "nothing made outside the destination" '[ "$after" = "$before" ]'
check "h1 and h2 are one inode, with its owner" \
	'[ "$(stat -c %i "$D/d1/h1")" = "$(stat -c %i "$D/d2/h2")" ] && [ "$(stat -c %h:%u "$D/d1/h1")" = 2:$((BASE + 100)) ]'
check "the copy's inode is not the source's" '[ "$(stat -c %i "$D/d1/h1")" != "$(stat -c %i "$S/d1/h1")" ]'
deep_links() { (cd "$1" && for i in $(seq 25); do cd "$long" || exit 1; done && stat -c %i:%h l1 l2 | sort -u | wc -l && cat l2); }
check "the hard link beyond PATH_MAX is one inode" '[ "$(deep_links "$D")" = "$(printf "1\ndeep link")" ]'
check "the fifo is a FIFO, $((BASE + 7)):$((BASE + 8)) 0620" \
	'[ -p "$D/fifo" ] && [ "$(stat -c %u:%g:%a "$D/fifo")" = $((BASE + 7)):$((BASE + 8)):620 ]'
check "the sparse file's data is the same" 'cmp -s "$S/sparse" "$D/sparse"'
check "the sparse file is 64 MiB and stays sparse ($(du -k "$D/sparse" | cut -f1) KiB)" \
	'[ "$(stat -c %s "$D/sparse")" = $((64 << 20)) ] && [ "$(du -k "$D/sparse" | cut -f1)" -le 256 ]'
check "the device node is not copied" '[ ! -e "$D/null" ] && [ ! -L "$D/null" ]'
check "the socket is not copied" '[ ! -e "$D/sock" ] && [ ! -L "$D/sock" ]'
check "the 256-deep chain is copied" '[ "$(cd "$D" && cat "$(printf "c/%.0s" $(seq 256))f")" = bottom ]'

# ---- refusals ----
fresh "$D"
copy "$S" "$D" "$tmp/status" --host --max-bytes $((1 << 30)) --max-entries 100000
rc=$?
check "the initial user namespace is refused (rc $rc: $(cat "$tmp/status"))" \
	'[ $rc = 1 ] && grep -qx "error 1 copy runs only inside a user namespace" "$tmp/status"'
check "and nothing was copied" '[ -z "$(ls -A "$D")" ]'

fresh "$D"
copy "$S" "$D" "$tmp/status" --max-bytes 8192 --max-entries 100000
rc=$?
check "--max-bytes below the tree's size fails with ENOSPC (rc $rc: $(tail -n 1 "$tmp/status"))" \
	'[ $rc = 1 ] && grep -q "^error 28 the tree needs more than 8192 bytes" "$tmp/status"'

fresh "$D"
copy "$S" "$D" "$tmp/status" --max-bytes $((1 << 30)) --max-entries 10
rc=$?
check "--max-entries below the tree's fails with E2BIG (rc $rc: $(tail -n 1 "$tmp/status"))" \
	'[ $rc = 1 ] && grep -q "^error 7 more than 10 entries" "$tmp/status"'

# A destination that fills up: ENOSPC from the write itself, for the library's "pool full".
F=$tmp/fsrc
mkdir -p "$F" "$tmp/full"
head -c $((2 << 20)) /dev/urandom >"$F/big"
chown -R $BASE:$BASE "$F"
if mount -t tmpfs -o size=1m tmpfs "$tmp/full"; then
	chown $BASE:$BASE "$tmp/full"
	copy "$F" "$tmp/full" "$tmp/status" --max-bytes $((1 << 30)) --max-entries 100
	rc=$?
	check "a full destination fails with its ENOSPC (rc $rc: $(tail -n 1 "$tmp/status"))" \
		'[ $rc = 1 ] && grep -q "^error 28 write /big: " "$tmp/status"'
	umount "$tmp/full"
else
	bad "cannot mount a small tmpfs for the full-destination check"
fi

# A chain deeper than COPY_DEPTH_MAX, in a tree of its own.
C=$tmp/deep
mkdir -p "$C"
(cd "$C" && for i in $(seq 300); do mkdir d && cd d || exit 1; done) || { echo "FAIL: cannot build the deep chain"; exit 1; }
chown -R $BASE:$BASE "$C"
fresh "$D"
copy "$C" "$D" "$tmp/status" --max-bytes $((1 << 30)) --max-entries 100000
rc=$?
check "a 300-deep chain fails with ELOOP, naming the depth (rc $rc: $(tail -n 1 "$tmp/status" | cut -c 1-60)...)" \
	'[ $rc = 1 ] && grep -q "^error 40 tree deeper than 256 directories at $(printf "/d%.0s" $(seq 257))\$" "$tmp/status"'

check "--describe-sandbox counts the copy mode's rules" '"$U" --describe-sandbox | grep -q "\"copy\":[1-9]"'
check "--describe-sandbox counts the receive mode's rules" '"$U" --describe-sandbox | grep -q "\"receive\":[1-9]"'

echo "copy test: $((checks - fails)) checks passed, $fails failed"
[ $fails = 0 ]
