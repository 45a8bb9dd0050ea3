#!/bin/bash
# Makes a minimal root tree in DIR from a static busybox: its applets, /etc/passwd and /etc/group (root,
# nobody, and a non-root account `user`, uid/gid 1000, home /home/user, as on E2B's templates), the usual
# empty mount points. The tree of the `tiny` template and of the tests.
# usage: busybox-tree.sh DIR
set -euo pipefail
root=${1:?usage: busybox-tree.sh DIR}
bb=$(command -v busybox) || { echo "busybox-tree: busybox missing (apt-get install busybox-static)" >&2; exit 1; }
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,usr/bin,usr/sbin}
cp "$bb" "$root/bin/busybox"
"$root/bin/busybox" --list-full | while read -r p; do
	[ -e "$root/$p" ] || ln -s /bin/busybox "$root/$p"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nuser:x:1000:1000:user:/home/user:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\nuser:x:1000:\n' >"$root/etc/group"
mkdir -p "$root/home/user"
# Owned by its user; a tree made without root keeps its maker's uid there (chown needs root).
if [ "$(id -u)" = 0 ]; then chown 1000:1000 "$root/home/user"; fi
chmod 0755 "$root/home/user"
chmod 1777 "$root/tmp"
