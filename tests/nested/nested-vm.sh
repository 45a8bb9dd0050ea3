#!/bin/sh
# nested suite: `--isolation vm` end to end, inside ONE nested-kvm VM (the only place here with a KVM
# that boots Linux). There: `space init` (a loop pool), a template imported with Debian's kernel and
# its modules, then
#   space run --isolation vm -- uname -a; python3    prints the guest's uname (the template's kernel) and
#                                                    42 (base template only), from one boot
#   space create --isolation vm, cp in and out, exec
#   /proc/<space-vmm pid>/status: Seccomp 2, NoNewPrivs 1, CapEff 0, non-root uid, own namespaces, oom_score_adj 500
#   space pause / resume, exec after resume
#   SIGKILL of space-vmm: `space ls` shows the sandbox failed, with a reason
#   space rm: no process, mount, loop device, cgroup or runtime directory left
# The template is the base tree cached by scripts/make-templates.sh (a tree or a tarball; made into an ext4 image
# before the VM starts) when present, else a busybox tree (then the python3 step is skipped).
set -u
. "$(dirname "$0")/nested-common.sh"
src=${SPACE_SOURCE_DIR:?}
work=${SPACE_BUILD_DIR:?}/nested-vm
space=${SPACE_CLI:?}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/result.txt

nested_kernel
[ -d "$mods" ] || { echo "SKIP: $mods missing"; exit 77; }
nested_need_built "$space" "the space CLI"

base_tar=$(nested_base_tree) || base_tar=/var/cache/space/base-2-bookworm
tree=
if [ ! -e "$base_tar" ]; then
	tree=$work/tree
	rm -rf "$tree"
	bash "$src/scripts/busybox-tree.sh" "$tree" || { echo "FAIL: busybox tree"; exit 1; }
else
	# The base tree becomes an ext4 image here, where it takes seconds: inside nested-kvm, walking its
	# 11000 files through 9p under full emulation takes longer than the whole test may. The import
	# inside then reads one file (`space template import --rootfs FILE.ext4`).
	if [ -d "$base_tar" ]; then
		src_tree=$base_tar
	else
		src_tree=$work/base-tree
		rm -rf "$src_tree" && mkdir -p "$src_tree" && tar -xf "$base_tar" -C "$src_tree" ||
			{ echo "FAIL: unpack $base_tar"; exit 1; }
	fi
	rm -f "$work/base.ext4"
	mkfs.ext4 -q -F -L rootfs -i 8192 -d "$src_tree" "$work/base.ext4" 640M ||
		{ echo "FAIL: mkfs.ext4 of $base_tar"; exit 1; }
	[ "$src_tree" = "$work/base-tree" ] && rm -rf "$src_tree"
fi

cat > "$work/inside.sh" <<INSIDE
#!/bin/bash
# Runs inside nested-kvm. Every check prints one PASS/FAIL line to result.txt.
set -u
$(nested_helper_env)
export SPACE_AGENT_PATH='${SPACE_AGENT_PATH:-}' SPACE_VMM_PATH='${SPACE_VMM_PATH:-}'
export SPACE_VM_BOOT_TIMEOUT=300
res=$work/result.txt
checks=0 # every check counts itself; the last line says how many ran (nested-judge.sh)
pass() { checks=\$((checks + 1)); echo "PASS: \$*" >> \$res; }
fail() { checks=\$((checks + 1)); echo "FAIL: \$*" >> \$res; }
S=\$(mktemp -d /tmp/space-nested-vm.XXXXXX)
SP() { '$space' --state "\$S" "\$@"; }
cleanup() {
	kill "\$copier" 2>/dev/null
	[ -n "\${id:-}" ] && SP rm "\$id" >/dev/null 2>&1
	SP pool unmount >/dev/null 2>&1
	umount "\$S/pool" 2>/dev/null
	rm -rf "\$S"
}
trap cleanup EXIT
# The sandboxes' logs (console + space-vmm) are copied out while they exist, for post-mortems.
( while sleep 2; do for f in "\$S"/run/*/sandbox.log; do [ -f "\$f" ] && cp "\$f" "$work/\$(basename "\$(dirname "\$f")").log"; done; done ) &
copier=\$!
modprobe kvm_amd 2>/dev/null; modprobe vhost_vsock 2>/dev/null
[ -c /dev/kvm ] || { fail "no /dev/kvm inside nested-kvm"; exit 1; }
SP init --loop-pool 3G > $work/init.log 2>&1 || { fail "space init: \$(tail -n 3 $work/init.log)"; exit 1; }
t0=\$(date +%s)
if [ -n '$tree' ]; then
	rootfs='$tree'
else
	rootfs='$work/base.ext4'
fi
if ! SP template import base --rootfs "\$rootfs" --kernel '$bz' --modules '$mods' > $work/import.log 2>&1; then
	# A CLI without --modules: the kernel's modules are then found under /lib/modules/$kver.
	grep -q -- "--modules" $work/import.log &&
		SP template import base --rootfs "\$rootfs" --kernel '$bz' > $work/import.log 2>&1 ||
		{ fail "template import: \$(tail -n 3 $work/import.log)"; exit 1; }
fi
echo "import: \$((\$(date +%s) - t0)) s" >> $work/timing.log

# 0. doctor: here (working KVM, ring 0 not emulated) vm isolation is usable, and it says so.
SP doctor > $work/doctor.log 2>&1
if grep -q '^vm isolation: *usable' $work/doctor.log && grep -q '^ok    kvm' $work/doctor.log; then
	pass "space doctor: \$(grep '^vm isolation' $work/doctor.log); \$(grep ring0 $work/doctor.log)"
else
	fail "space doctor does not call vm usable: \$(cat $work/doctor.log)"
fi

# 1. run: the guest's kernel answers uname, and (base template) python3 prints 42, in one boot.
t0=\$(date +%s)
if [ -z '$tree' ]; then
	out=\$(SP run --isolation vm --template base --memory 384 -- sh -c "uname -a; python3 -c 'print(6*7)'" 2> $work/run1.err)
else
	echo "SKIP: python3 (no $base_tar; busybox template)" >> \$res
	out=\$(SP run --isolation vm --template base --memory 384 -- uname -a 2> $work/run1.err)
fi
rc=\$?
echo "run uname: \$((\$(date +%s) - t0)) s" >> $work/timing.log
case "\$out" in
*'$kver'*) pass "space run --isolation vm -- uname -a: \$(echo "\$out" | head -n 1)" ;;
*) fail "uname (rc \$rc): \$out \$(tail -n 5 $work/run1.err)" ;;
esac
if [ -z '$tree' ]; then
	[ "\$(echo "\$out" | tail -n 1)" = 42 ] && pass "python3 in the VM prints 42" || fail "python3: '\$out' \$(tail -n 5 $work/run1.err)"
fi

# 3. create, cp in and out, exec.
id=\$(SP create --isolation vm --template base --memory 384 2> $work/create.err)
if [ -z "\$id" ]; then
	fail "space create --isolation vm: \$(tail -n 5 $work/create.err)"
	exit 1
fi
pass "space create --isolation vm: \$id"
head -c 300000 /dev/urandom > /tmp/vm-cp-in
SP cp /tmp/vm-cp-in "\$id:/root/data.bin" && SP cp "\$id:/root/data.bin" /tmp/vm-cp-out &&
	cmp -s /tmp/vm-cp-in /tmp/vm-cp-out && pass "space cp in and out round-trips 300000 bytes" ||
	fail "space cp round trip"
out=\$(SP exec "\$id" -- sh -c 'wc -c < /root/data.bin; hostname' 2>&1)
echo "\$out" | grep -q '^300000\$' && pass "space exec sees the copied file" || fail "space exec: \$out"
# The guest's virtio-net (eth0) on the TAP inside space-vmm's own network namespace.
out=\$(SP exec "\$id" -- cat /sys/class/net/eth0/address 2>&1)
echo "\$out" | grep -Eq '^[0-9a-f]{2}(:[0-9a-f]{2}){5}\$' && pass "guest eth0 (virtio-net) has MAC \$out" ||
	fail "no virtio-net eth0 in the guest: \$out"

# 3b. The guest's own OOM killer: the host cannot see it, the agent says it (exit 137 and the reason).
if [ -z '$tree' ]; then
	SP exec "\$id" -- python3 -c 'l = [b"x" * (32 << 20) for _ in range(100)]' > $work/oom.out 2> $work/oom.err
	rc=\$?
	if [ \$rc = 137 ] && grep -q "killed: out of memory (limit 384 MiB)" $work/oom.err; then
		pass "a VM command killed by the guest's OOM killer: exit 137, \$(tail -n 1 $work/oom.err)"
	else
		fail "VM out of memory: exit \$rc, \$(tail -n 3 $work/oom.err)"
	fi
fi

# 3c. A port of the VM reached through its agent (space port), and a detached process (the start
# command's mechanism) serving it after the exec that started it ended.
if [ -z '$tree' ]; then
	SP exec "\$id" -- sh -c 'mkdir -p /srv && echo vm-port-ok > /srv/p.txt && cd /srv &&
		setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 < /dev/null &' > $work/port-exec.log 2>&1
	ip link set lo up # the forward listens on this VM's loopback, which nested-kvm leaves down
	# Not through SP: \$! must be the forward itself, not a subshell around it (killed below).
	'$space' --state "\$S" port "\$id" 8000 --listen 127.0.0.1:0 --json > $work/port.out 2> $work/port.err &
	fwd=\$!
	got=
	deadline=\$((\$(date +%s) + 150)) # the guest's python starts slowly under nested emulation
	while [ \$(date +%s) -lt \$deadline ]; do
		addr=\$(python3 -c 'import json,sys; print(json.load(sys.stdin)["listen"])' < $work/port.out 2>/dev/null) &&
			got=\$(python3 -c 'import sys,urllib.request; print(urllib.request.urlopen("http://" + sys.argv[1] + "/p.txt", timeout=60).read().decode().strip())' "\$addr" 2>>$work/port-client.err) &&
			[ "\$got" = vm-port-ok ] && break
		sleep 3
	done
	kill \$fwd 2>/dev/null; wait \$fwd 2>/dev/null
	[ "\$got" = vm-port-ok ] && pass "space port reaches a server inside the VM through its agent" ||
		fail "space port into the VM: '\$got' \$(tail -n 3 $work/port.err) \$(tail -n 2 $work/port-client.err)"
fi

# 3d. what the VM uses (space_sandbox_get_usage through space stats): its space-vmm's cgroup, its disk
# image as the host sees it, which grows when the guest writes.
usage() { SP --json stats "\$id" | python3 -c "import json,sys; u=json.load(sys.stdin); print(u['cpus'], u['cpu_ns'], u['memory_bytes'], u['memory_limit_bytes'], u['disk_used_bytes'], u['disk_total_bytes'])"; }
set -- \$(usage)
[ \$# = 6 ] && [ "\$1" -ge 1 ] && [ "\$3" -gt 0 ] && [ "\$4" = \$((384 * 1048576)) ] && [ "\$5" -gt 0 ] &&
	[ "\$5" -le "\$6" ] && pass "space stats of the VM: \$*" || fail "space stats of the VM: '\$*'"
disk0=\${5:-0}
SP exec "\$id" -- sh -c 'dd if=/dev/urandom of=/root/big bs=1M count=20 2>/dev/null; sync' >/dev/null 2>&1
set -- \$(usage)
# Used is the image's allocated blocks: an image already fully allocated (a copy that was not kept
# sparse) cannot show the growth.
if [ "\$disk0" -ge "\${6:-0}" ]; then
	echo "SKIP: VM disk growth: the image is fully allocated (\$disk0 of \${6:-?} bytes)" >> \$res
else
	[ "\${5:-0}" -ge \$((disk0 + 16 * 1048576)) ] && pass "VM disk used grows after a 20 MiB file (\$disk0 -> \${5:-})" ||
		fail "VM disk used after a 20 MiB file: \$disk0 -> '\${5:-}'"
fi

# 3e. A full pool: the VM's disk writes wait for room (no I/O error, no read-only remount in the guest);
# the sandbox is shown paused, "pool full", with an event, and goes on by itself once space is freed.
pool=\$S/pool
avail=\$(df -k --output=avail "\$pool" | tail -n 1)
fallocate -l \$(( (avail - 8192) * 1024 )) "\$pool/filler" 2>/dev/null
dd if=/dev/zero of="\$pool/filler2" bs=1M > /dev/null 2>&1 # what btrfs still had
sync
SP exec "\$id" -- sh -c 'dd if=/dev/urandom of=/root/full bs=1M count=48 conv=fsync 2>&1 | tail -n 1; awk "\\\$2 == \"/\" { print \\\$4 }" /proc/mounts' > $work/full.out 2> $work/full.err &
wpid=\$!
vmstate() { SP ls --json | python3 -c "import json,sys; s=[s for s in json.load(sys.stdin) if s['id']=='\$id'][0]; print(s['status'] + '|' + (s.get('reason') or ''))"; }
st=
for i in \$(seq 60); do
	st=\$(vmstate)
	case "\$st" in paused\|pool\ full*) break ;; esac
	sleep 2
done
case "\$st" in
paused\|pool\ full*) pass "a VM whose disk writes find the pool full is shown paused: \$st" ;;
*) fail "a full pool: the VM is '\$st', not paused, pool full (pool: \$(df -k --output=avail "\$pool" | tail -n 1) KiB free)" ;;
esac
SP events "\$id" > $work/full-events.txt 2>&1
grep -q "pool full" $work/full-events.txt && pass "an event says the pool is full" ||
	fail "no pool-full event: \$(tail -n 3 $work/full-events.txt)"
rm -f "\$pool/filler" "\$pool/filler2"
sync
for i in \$(seq 90); do kill -0 \$wpid 2>/dev/null || break; sleep 2; done
wait \$wpid
rc=\$?
st=\$(vmstate)
case "\$rc|\$st|\$(cat $work/full.out | tr '\n' ' ')" in
"0|running|"*" copied"*" rw,"*) pass "space freed: the waiting writes went through and the guest's root stayed rw (\$(head -n 1 $work/full.out))" ;;
*) fail "after space was freed: exec rc \$rc, status '\$st', guest: \$(cat $work/full.out $work/full.err | tr '\n' ' ')" ;;
esac
cat "\$S/run/\$id/sandbox.log.1" "\$S/run/\$id/sandbox.log" 2>/dev/null | grep -q "space-vmm: paused: the pool is full" &&
	pass "space-vmm's log says the pool was full" || fail "space-vmm's log does not say the pool was full"

# 4. the space-vmm process: jailed and filtered.
pid=\$(SP ls --json | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['id']=='\$id'][0])")
st=/proc/\$pid/status
if [ -r "\$st" ]; then
	grep -q '^Seccomp:[[:space:]]*2' \$st && pass "space-vmm Seccomp 2" || fail "space-vmm \$(grep Seccomp: \$st)"
	grep -q '^NoNewPrivs:[[:space:]]*1' \$st && pass "space-vmm NoNewPrivs 1" || fail "space-vmm \$(grep NoNewPrivs \$st)"
	grep -q '^CapEff:[[:space:]]*0000000000000000' \$st && pass "space-vmm CapEff 0" || fail "space-vmm \$(grep CapEff \$st)"
	uid=\$(awk '/^Uid:/ {print \$2}' \$st)
	[ "\$uid" != 0 ] && pass "space-vmm runs as uid \$uid" || fail "space-vmm runs as root"
	adj=\$(cat /proc/\$pid/oom_score_adj)
	[ "\$adj" = 500 ] && pass "space-vmm is the host OOM killer's first choice (oom_score_adj 500)" ||
		fail "space-vmm oom_score_adj is '\$adj', not 500"
	for ns in mnt net pid; do
		[ "\$(readlink /proc/\$pid/ns/\$ns)" != "\$(readlink /proc/self/ns/\$ns)" ] && pass "space-vmm has its own \$ns namespace" ||
			fail "space-vmm shares the host's \$ns namespace"
	done
else
	fail "no space-vmm process (pid '\$pid')"
fi

# 5. pause and resume.
SP pause "\$id" && SP ls | grep "\$id" | grep -q paused && pass "space pause: paused" || fail "space pause"
sleep 2 # paused for a while: the guest must not notice (kvmclock) and exec must work after
SP resume "\$id" || fail "space resume"
out=\$(SP exec "\$id" -- echo after-resume 2>&1)
[ "\$out" = after-resume ] && pass "exec after resume" || fail "exec after resume: \$out"

# 6. SIGKILL of space-vmm: failed, with a reason.
kill -9 "\$pid"
sleep 1
line=\$(SP ls --json | python3 -c "import json,sys; s=[s for s in json.load(sys.stdin) if s['id']=='\$id'][0]; print(s['status'] + '|' + s.get('reason', ''))")
case "\$line" in
failed\|?*) pass "after SIGKILL of space-vmm: \$line" ;;
*) fail "after SIGKILL of space-vmm: '\$line'" ;;
esac

# 7. rm leaves nothing.
SP rm "\$id" || fail "space rm"
left=\$(grep -F "\$id" /proc/mounts; losetup -a | grep -F "\$id"; find /sys/fs/cgroup -maxdepth 4 -name "*\$id*" 2>/dev/null;
	ls -d "\$S/run/\$id" 2>/dev/null; pgrep -f "\$id")
[ -z "\$left" ] && pass "space rm leaves no process, mount, loop device, cgroup or runtime dir" || fail "left after rm: \$left"
id=
echo "DONE checks=\$checks" >> \$res
INSIDE

# Guest RAM of two sandboxes plus the pool in the VM's tmpfs: more memory than nested_run's default.
export NESTED_RUN_TIMEOUT=${NESTED_RUN_TIMEOUT:-600} # its usual run is a few minutes: beyond, a failure
nested_run "$work" "$work/inside.sh" --mem 4096 > "$work/nested.log" 2>&1
run_rc=$?
rm -f "$work/base.ext4"
cat "$work/timing.log" 2>/dev/null
nested_report "$work" "$run_rc"
