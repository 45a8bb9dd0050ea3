#!/bin/bash
# Makes a minimal root tree in DIR from a static busybox: its applets, /etc/passwd and /etc/group, the
# usual empty mount points. The tree of the `tiny` template and of the tests.
# usage: busybox-tree.sh DIR
set -euo pipefail
root=${1:?usage: busybox-tree.sh DIR}
bb=$(command -v busybox) || { echo "busybox-tree: busybox missing (apt-get install busybox-static)" >&2; exit 1; }
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,usr/bin,usr/sbin}
cp "$bb" "$root/bin/busybox"
"$root/bin/busybox" --list-full | while read -r p; do
	[ -e "$root/$p" ] || ln -s /bin/busybox "$root/$p"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"
