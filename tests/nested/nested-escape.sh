#!/bin/sh
# nested suite: the escape suite's VM half. Inside ONE nested-kvm VM, three VM sandboxes (`space create
# --isolation vm`, the base template, or the busybox one as nested-vm.sh picks) are attacked as root from
# their guests by vm-escape-probe (vm_escape_probe.c, static, copied in with `space cp`):
#   A  reaches for the host (TCP/UDP/DNS/ping to the nested host's addresses, where this test listens;
#      the gateway's ports), for sandbox B (its guest address, AF_VSOCK to CID 3 and others, the host
#      CID 2 on ports nothing serves); then a memory bomb, a disk fill and a fork bomb
#   B  the victim: TCP and vsock listeners that must never see a connection; answers `space exec` to the end
#   C  hostile virtqueues: its virtio-rng and virtio-net are unbound from their drivers and driven
#      through /dev/mem with malformed descriptor chains; its space-vmm must survive or end cleanly
# Every attack asserts failure AND a host unchanged afterwards (mounts, processes, network namespaces,
# a canary tree). Also: A's device threads (vsock host side, virtio-net receive) run in the seccomp
# DEVICE role through real vsock and eth0 traffic without a violation.
# Usage: nested-escape.sh PROBE   Prints "escape suite (vm): N attacks, 0 succeeded".
set -u
. "$(dirname "$0")/nested-common.sh"
src=${SPACE_SOURCE_DIR:?}
work=${SPACE_BUILD_DIR:?}/nested-escape
space=${SPACE_CLI:?}
probe=${1:?usage: nested-escape.sh PROBE}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/result.txt "$work"/id-* "$work"/host.* "$work"/memmin "$work"/ps.txt
nested_kernel
[ -d "$mods" ] || { echo "SKIP: $mods missing"; exit 77; }
nested_need_built "$space" "the space CLI"
nested_need_built "$probe" vm-escape-probe
cp "$probe" "$work/probe"

# The template: the base tree as an ext4 image, made here where it takes seconds (nested-vm.sh).
base_tar=$(nested_base_tree) || base_tar=/var/cache/space/base-2-bookworm
# The attacks need its python3, ip and fallocate; the busybox template has too little.
[ -d "$base_tar" ] || { echo "SKIP: no base template tree at $base_tar"; exit 77; }
rootfs=$work/base.ext4
rm -f "$rootfs"
mkfs.ext4 -q -F -L rootfs -i 8192 -d "$base_tar" "$rootfs" 640M || { echo "FAIL: mkfs.ext4 of $base_tar"; exit 1; }

cat > "$work/inside.sh" <<INSIDE
# Runs under sh (nested_run): POSIX shell only.
# Inside nested-kvm. Attacks print "blocked:"/"ESCAPED:" lines, other checks PASS/FAIL, to result.txt.
set -u
$(nested_helper_env)
export SPACE_AGENT_PATH='${SPACE_AGENT_PATH:-}' SPACE_VMM_PATH='${SPACE_VMM_PATH:-}'
# Three boot side by side in about 55 s here: a boot beyond this has hung, and the create says so
# (with the run's 700 s, a hung boot must leave time for the report).
export SPACE_VM_BOOT_TIMEOUT=200
W='$work'
res=\$W/result.txt
# Checks and attacks count themselves; the last line says how many ran (nested-judge.sh).
checks=0 attacks=0
blocked() { attacks=\$((attacks + 1)); echo "blocked: \$*" >> \$res; }
escaped() { attacks=\$((attacks + 1)); echo "ESCAPED: \$*" >> \$res; }
pass() { checks=\$((checks + 1)); echo "PASS: \$*" >> \$res; }
fail() { checks=\$((checks + 1)); echo "FAIL: \$*" >> \$res; }
S=\$(mktemp -d /tmp/space-nested-escape.XXXXXX)
SP() { '$space' --state "\$S" "\$@"; }
pids=
CANARY=
cleanup() {
	for p in \$pids; do kill "\$p" 2>/dev/null; done
	for n in a b c; do [ -s \$W/id-\$n ] && SP rm "\$(cat \$W/id-\$n)" >/dev/null 2>&1; done
	SP pool unmount >/dev/null 2>&1
	umount "\$S/pool" 2>/dev/null
	rm -rf "\$S" "\$CANARY"
}
trap cleanup EXIT
modprobe kvm_amd 2>/dev/null; modprobe vhost_vsock 2>/dev/null
[ -c /dev/kvm ] || { fail "no /dev/kvm inside nested-kvm"; exit 1; }
SP init --loop-pool 3G > \$W/init.log 2>&1 || { fail "space init: \$(tail -n 3 \$W/init.log)"; exit 1; }
SP template import base --rootfs '$rootfs' --kernel '$bz' --modules '$mods' > \$W/import.log 2>&1 ||
	{ fail "template import: \$(tail -n 3 \$W/import.log)"; exit 1; }

# ---- the host before: a canary tree, listeners on every address, the snapshot ----
token=escape-\$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
CANARY=\$(mktemp -d /tmp/space-escape-canary.XXXXXX)
mkdir -p "\$CANARY/dir" && echo "\$token" > "\$CANARY/secret" && echo "\$token" > "\$CANARY/dir/file"
port=\$((20000 + \$(od -An -N2 -tu2 /dev/urandom) % 20000))
snapshot() {
	awk -v s="\$S" 'index(\$2, s) != 1 { print \$1, \$2, \$3, \$4 }' /proc/self/mounts | grep -v -e '^nsfs ' -e ' /sys/fs/cgroup' | sort
	echo "--- netns"; ip netns list 2>/dev/null | sort
	echo "--- links"; ip -o link show | awk '{print \$2}' | sort
	echo "--- canary"; (cd "\$CANARY" && find . -printf '%p %y %s %m %U\n' | sort && cat secret dir/file)
	# processes other than kernel threads, this script's own short-lived tools and the nested run's
	# watchdog (its sleep comes and goes: NESTED_WATCHDOG, nested-judge.sh)
	# (ps writes to a file first: a pipeline's members are briefly "sh" before they exec)
	ps -N --ppid 2 -o pid=,ppid=,user=,comm= > \$W/ps.txt
	echo "--- processes"
	awk -v dog="\${NESTED_WATCHDOG:-0}" '\$1 != dog && \$2 != dog && \$4 != "ps" { print \$3, \$4 }' \$W/ps.txt | sort | uniq -c
}
snapshot > \$W/host.before
# Listeners on every address of this host; each answers the token, and logs what reached it.
python3 - "\$port" "\$token" > \$W/host-listener.log 2>&1 <<'PY' &
import socket, sys, threading
port, token = int(sys.argv[1]), sys.argv[2].encode()
def tcp(s, p):
    while True:
        c, a = s.accept(); print("ACCEPTED tcp", p, a, flush=True); c.sendall(token + b" host"); c.close()
def udp(s, p):
    while True:
        d, a = s.recvfrom(2048); print("RECEIVED udp", p, a, flush=True); s.sendto(token + b" host", a)
for f, p, kind in ((tcp, port, socket.SOCK_STREAM), (tcp, 80, socket.SOCK_STREAM), (tcp, 443, socket.SOCK_STREAM),
                   (udp, port, socket.SOCK_DGRAM), (udp, 53, socket.SOCK_DGRAM)):
    try:
        s = socket.socket(socket.AF_INET, kind)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", p))
        if kind == socket.SOCK_STREAM:
            s.listen(16)
        threading.Thread(target=f, args=(s, p), daemon=True).start()
    except OSError as e:
        print("NOBIND", p, e, flush=True)
print("READY", flush=True)
threading.Event().wait()
PY
pids="\$pids \$!"
# Each sandbox's log (console + space-vmm) is copied out while it exists.
# The log rotates (sandbox.log.1 holds the older half): both parts, older first.
( while sleep 2; do for f in "\$S"/run/*/sandbox.log; do [ -f "\$f" ] && cat "\$f.1" "\$f" > "\$W/sb-\$(basename "\$(dirname "\$f")").log" 2>/dev/null; done; done ) &
pids="\$pids \$!"
host_addrs=\$(ip -o -4 addr show | awk '{ split(\$4, a, "/"); print a[1] }')
mem_before=\$(awk '/MemAvailable/ {print \$2}' /proc/meminfo)

# ---- three VM sandboxes, booted side by side ----
t0=\$(date +%s)
creates=
# A's log gets the smallest cap, so its console flood can pass it within the emulator's time (each byte
# is an exit: about 3 KB/s here); B and C keep the default.
create_vm() { # n
	if [ \$1 = a ]; then
		SPACE_SANDBOX_LOG_MAX=8K SP create --isolation vm --template base --memory 320
	else
		SP create --isolation vm --template base --memory 320
	fi
}
for n in a b c; do
	create_vm \$n > \$W/id-\$n 2> \$W/create-\$n.err &
	creates="\$creates \$!"
	sleep 3 # staggered: the store's writers queue rather than collide
done
wait \$creates
waited=\$((\$(date +%s) - t0))
for n in a b c; do
	if [ ! -s \$W/id-\$n ] && [ \$waited -lt 150 ]; then
		# A collision in the store (which fails at once, unlike a boot that hung): once more, alone.
		create_vm \$n > \$W/id-\$n 2>> \$W/create-\$n.err
	fi
	[ -s \$W/id-\$n ] || { fail "space create --isolation vm (\$n): \$(tail -n 5 \$W/create-\$n.err)"; exit 1; }
done
A=\$(cat \$W/id-a) B=\$(cat \$W/id-b) C=\$(cat \$W/id-c)
echo "boot of three VM sandboxes: \$((\$(date +%s) - t0)) s" >> \$W/timing.log
for id in \$A \$B \$C; do
	SP cp '$work/probe' "\$id:/root/probe" && SP exec "\$id" -- chmod 755 /root/probe ||
		{ fail "space cp of the probe into \$id"; exit 1; }
done
pass "three VM sandboxes up: A=\$A B=\$B C=\$C"
# Guest addresses on eth0 (the same subnet: anything bridging the TAPs would let A reach B).
netup() { SP exec "\$1" -- sh -c "ip link set eth0 up; ip -4 addr show eth0 | grep -q inet || ip addr add \$2/24 dev eth0; ip route add default via 10.201.0.1 dev eth0 2>/dev/null; true"; }
netup \$A 10.201.0.2; netup \$B 10.201.0.10

# ---- B listens (TCP and vsock on \$port) for the whole attack ----
SP exec \$B -- /root/probe listen \$port "\$token" 400 > \$W/b-listen.log 2>&1 &
pids="\$pids \$!"
for i in \$(seq 30); do grep -q LISTENING \$W/b-listen.log && break; sleep 1; done
grep -q LISTENING \$W/b-listen.log && pass "sandbox B listens on tcp and vsock port \$port" ||
	fail "B's listener: \$(cat \$W/b-listen.log)"

count_probe() { # \$1: probe output file; its BLOCKED/ESCAPED lines become attacks
	grep -E '^(BLOCKED|ESCAPED) ' "\$1" | sed -e 's/^BLOCKED /blocked: /' -e 's/^ESCAPED /ESCAPED: /' >> \$res
	attacks=\$((attacks + \$(grep -cE '^(BLOCKED|ESCAPED) ' "\$1")))
	grep -qE '^(BLOCKED|ESCAPED) ' "\$1" || fail "the probe reported nothing: \$(tail -n 5 "\$1")"
}

# ---- A -> the host's network, B's address, the gateway's ports ----
addrs="\$host_addrs 127.0.0.1 10.201.0.1 10.201.0.10 10.0.2.2 10.0.2.15 10.0.2.3 169.254.169.254 192.168.122.1 172.17.0.1"
t0=\$(date +%s)
SP exec \$A -- /root/probe net \$port,80,443,53 "\$token" \$addrs > \$W/a-net.log 2>&1
count_probe \$W/a-net.log
# ---- A -> B and the host over AF_VSOCK ----
SP exec \$A -- /root/probe vsock \$port "\$token" > \$W/a-vsock.log 2>&1
count_probe \$W/a-vsock.log
echo "network and vsock attacks: \$((\$(date +%s) - t0)) s" >> \$W/timing.log
if grep -q . \$W/host-listener.log && grep -qv -e READY -e NOBIND \$W/host-listener.log; then
	escaped "the host listeners saw traffic from a guest: \$(grep -v READY \$W/host-listener.log | head -n 3)"
else
	blocked "no guest packet reached the host listeners (tcp \$port/80/443, udp \$port/53)"
fi
if grep -q ACCEPTED \$W/b-listen.log; then
	escaped "sandbox B accepted a connection: \$(grep ACCEPTED \$W/b-listen.log | head -n 3)"
else
	blocked "sandbox B's listeners saw no connection from A"
fi
# A's device threads served that: vsock (exec) and eth0 (the attacks' frames) in the DEVICE role.
out=\$(SP exec \$A -- sh -c 'cat /sys/class/net/eth0/statistics/tx_packets' 2>&1)
[ "\${out:-0}" -gt 0 ] 2>/dev/null && pass "A's eth0 sent \$out frames and A still answers exec (device threads alive)" ||
	fail "A after network traffic: '\$out'"
# Every thread of A's space-vmm but the main one has stacked its role's filter on the process filter
# (the control thread after its first request since the filter: a pause and a resume).
SP pause \$A > /dev/null && SP resume \$A > /dev/null || fail "space pause/resume of A"
pid=\$(SP ls --json | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['id']=='\$A'][0])")
nthreads=\$(ls /proc/\$pid/task | wc -l)
narrowed=\$(grep -l '^Seccomp_filters:[[:space:]]*2' /proc/\$pid/task/*/status 2>/dev/null | wc -l)
[ "\$nthreads" -gt 3 ] && [ "\$narrowed" = \$((nthreads - 1)) ] &&
	pass "A's space-vmm: \$narrowed of \$nthreads threads run in their role's filter (vCPU, control, vsock and net device threads)" ||
	fail "A's space-vmm: \$narrowed of \$nthreads threads have their role's filter: \$(grep -H Seccomp_filters /proc/\$pid/task/*/status | tr '\n' ' ')"

# ---- C: hostile virtqueues through /dev/mem on its unbound virtio-rng and virtio-net ----
t0=\$(date +%s)
timeout -s KILL 400 '$space' --state "\$S" exec \$C -- sh -c '
	# The agent mounts /sys read-only; root in the guest may remount it.
	mount -o remount,rw /sys || { mkdir -p /tmp/sysfs && mount -t sysfs sysfs /tmp/sysfs; }
	sys=/sys
	[ -w /sys/bus/platform/drivers/virtio-mmio/unbind ] || sys=/tmp/sysfs
	devs=
	for d in \$sys/bus/virtio/devices/virtio*; do
		case \$(cat \$d/device) in
		0x0001|0x0004)
			p=\$(basename \$(readlink -f \$d/..))
			echo \$p > \$sys/bus/platform/drivers/virtio-mmio/unbind && devs="\$devs \$p" ;;
		esac
	done
	[ -n "\$devs" ] || { echo "VIRTQ-UNAVAILABLE: no virtio-rng or virtio-net could be unbound"; exit 2; }
	echo "UNBOUND\$devs"
	exec /root/probe virtq \$devs' > \$W/c-virtq.log 2>&1
rc=\$?
echo "virtqueue attacks: \$((\$(date +%s) - t0)) s" >> \$W/timing.log
grep -q '^VIRTQ-UNAVAILABLE' \$W/c-virtq.log && echo "NOTE: \$(grep '^VIRTQ-UNAVAILABLE' \$W/c-virtq.log | head -n 3)" >> \$res
if grep -q '^VIRTQ-DONE [1-9]' \$W/c-virtq.log; then
	count_probe \$W/c-virtq.log
	SP exec \$C -- true > /dev/null 2>&1 && pass "C's space-vmm survived \$(grep -c '^BLOCKED' \$W/c-virtq.log) hostile virtqueues and still answers exec" ||
		fail "C no longer answers exec after the virtqueue attacks"
else
	line=\$(SP ls --json | python3 -c "import json,sys; s=[s for s in json.load(sys.stdin) if s['id']=='\$C'][0]; print(s['status'] + '|' + s.get('reason', ''))")
	case "\$line" in
	*SIG*|*signal*|*seccomp*) escaped "virtqueue attacks: C's space-vmm crashed: \$line" ;;
	failed\|?*) blocked "virtqueue attacks: C's space-vmm stopped cleanly, sandbox marked failed: \$line" ;;
	*) fail "virtqueue attacks did not run (rc \$rc, C: \$line): \$(tail -n 5 \$W/c-virtq.log)" ;;
	esac
fi
SP exec \$B -- true && pass "B answers exec after the virtqueue attacks on C" || fail "B after the attacks on C"

# ---- A: memory bomb, disk fill, fork bomb; B and the host must not notice ----
min_mem() { awk '/MemAvailable/ {print \$2}' /proc/meminfo; }
t0=\$(date +%s)
# The host's lowest MemAvailable while the bombs run.
min_mem > \$W/memmin
( while sleep 1; do v=\$(min_mem); [ "\$v" -lt "\$(cat \$W/memmin)" ] && echo "\$v" > \$W/memmin; done ) &
sampler=\$!
pids="\$pids \$sampler"
timeout -s KILL 150 '$space' --state "\$S" exec \$A -- python3 -c '
chunks = []
try:
    while True:
        b = bytearray(8 << 20)
        for i in range(0, len(b), 4096): b[i] = 1
        chunks.append(b)
except MemoryError:
    print("MemoryError after", len(chunks) * 8, "MiB")' > \$W/a-membomb.log 2>&1
echo "status \$? (137: the guest's OOM killer)" >> \$W/a-membomb.log
low=\$(cat \$W/memmin)
SP exec \$B -- true && [ "\$low" -gt 262144 ] &&
	blocked "memory bomb in A: \$(tail -n 1 \$W/a-membomb.log); B answers; host MemAvailable \$((low / 1024)) MiB" ||
	escaped "memory bomb in A hurt the host or B (host MemAvailable \$((low / 1024)) MiB)"
img=\$(find "\$S" -path "*\$A*" -name rootfs.ext4 2>/dev/null | head -n 1)
size0=\$(stat -c %s "\$img" 2>/dev/null)
pool0=\$(df -k --output=avail "\$S/pool" 2>/dev/null | tail -n 1)
timeout -s KILL 200 '$space' --state "\$S" exec \$A -- sh -c 'fallocate -l 4G /root/fill 2>&1 ||
	python3 -c "
import os
fd = os.open(\"/root/fill\", os.O_CREAT | os.O_WRONLY)
off = 0
try:
    while True:
        os.posix_fallocate(fd, off, 16 << 20); off += 16 << 20
except OSError as e:
    print(\"full after\", off >> 20, \"MiB:\", e)"
	dd if=/dev/zero of=/root/fill2 bs=1M count=32 2>&1 | tail -n 1; df -k / | tail -n 1' > \$W/a-diskfill.log 2>&1
size1=\$(stat -c %s "\$img" 2>/dev/null)
pool1=\$(df -k --output=avail "\$S/pool" 2>/dev/null | tail -n 1)
SP exec \$B -- true && [ -n "\$size0" ] && [ "\$size0" = "\$size1" ] &&
	blocked "disk fill in A: \$(tail -n 1 \$W/a-diskfill.log | tr -s ' '); its image stays \$((size0 >> 20)) MiB; pool free \$((pool0 / 1024)) -> \$((pool1 / 1024)) MiB" ||
	escaped "disk fill in A: image \$size0 -> \$size1 bytes, or B stopped answering"
procs0=\$(ls /proc | grep -c '^[0-9]')
timeout -s KILL 60 '$space' --state "\$S" exec \$A -- sh -c 'b() { b | b & }; b; sleep 20' > /dev/null 2>&1 &
bomb=\$!
sleep 25
procs1=\$(ls /proc | grep -c '^[0-9]')
SP exec \$B -- true && [ \$((procs1 - procs0)) -lt 40 ] &&
	blocked "fork bomb in A: host processes \$procs0 -> \$procs1; B answers exec" ||
	escaped "fork bomb in A: host processes \$procs0 -> \$procs1 or B stopped answering"
kill \$bomb 2>/dev/null; wait \$bomb 2>/dev/null # timeout passes the signal on to space exec
echo "bombs: \$((\$(date +%s) - t0)) s" >> \$W/timing.log
mem_after=\$(cat \$W/memmin)

# ---- A floods its serial console: the host keeps at most A's log cap (8 KiB, both parts) ----
# The emulated serial port takes a few hundred bytes a second here: the flood is 12 KB (one and a half
# caps; each byte is two exits through the emulated SVM, whose storms are what this suite must not
# depend on), bounded at 60 s, and is judged by the log having rotated (more than half the cap went
# through) while the host holds no more than the cap.
t0=\$(date +%s)
timeout -s KILL 60 '$space' --state "\$S" exec \$A -- sh -c 'head -c 12288 /dev/zero | tr "\\0" A > /dev/ttyS0' > \$W/a-console.log 2>&1
logs=\$(ls "\$S"/run/\$A/sandbox.log* 2>/dev/null)
held=\$(cat \$logs 2>/dev/null | wc -c)
[ -f "\$S/run/\$A/sandbox.log.1" ] && [ "\$held" -le \$((8 * 1024)) ] &&
	blocked "console flood from A: the log rotated and the host holds \$held bytes of it (cap 8 KiB)" ||
	escaped "console flood from A: the host holds \$held bytes (files: \$(echo \$logs))"
echo "console flood: \$((\$(date +%s) - t0)) s" >> \$W/timing.log

# ---- B writes a forged VMM failure reason to its console, then powers off: it must not be believed ----
SP exec \$B -- sh -c 'for i in 1 2 3; do echo "space-vmm: FORGED-BY-GUEST"; done > /dev/ttyS0; sync; echo o > /proc/sysrq-trigger' > /dev/null 2>&1
sleep 5
reason=\$(SP ls --json 2>/dev/null | python3 -c "import json,sys; print([s.get('reason') or '' for s in json.load(sys.stdin) if s['id']=='\$B'][0])" 2>&1)
case "\$reason" in
*FORGED*) escaped "a guest's console line became B's failure reason: \$reason" ;;
*) blocked "a forged 'space-vmm:' console line is not taken as the reason (B: '\$reason')" ;;
esac

# ---- no seccomp violation in any space-vmm (the device threads narrowed and kept working) ----
v=\$(grep -h 'seccomp violation' \$W/sb-*.log 2>/dev/null | head -n 3)
[ -z "\$v" ] && pass "no seccomp violation in any space-vmm (vCPU, device and control threads)" || fail "seccomp: \$v"

# ---- the host afterwards: unchanged once the sandboxes are gone ----
kill \$(echo \$pids) 2>/dev/null; pids=
for n in a b c; do
	# A space-vmm whose guest touched all its RAM may take longer to exit under emulation than rm
	# waits: once more after a while.
	SP rm "\$(cat \$W/id-\$n)" > \$W/rm-\$n.log 2>&1 || { sleep 15; SP rm "\$(cat \$W/id-\$n)" >> \$W/rm-\$n.log 2>&1; } ||
		fail "space rm (\$n): \$(tail -n 2 \$W/rm-\$n.log)"
	grep -q 'did not die' \$W/rm-\$n.log && echo "NOTE: space rm (\$n) needed a second call: \$(head -n 1 \$W/rm-\$n.log)" >> \$res
	: > \$W/id-\$n
done
sleep 3 # the log copier's last sleep
snapshot > \$W/host.after
if diff \$W/host.before \$W/host.after > \$W/host.diff; then
	blocked "host unchanged afterwards: mounts, network namespaces, links, processes, canary"
else
	escaped "the host changed: \$(head -n 8 \$W/host.diff | tr '\n' ' ')"
fi
echo "host MemAvailable: \$((mem_before / 1024)) MiB before, \$((mem_after / 1024)) MiB at the lowest during the bombs" >> \$W/timing.log
echo "DONE checks=\$checks attacks=\$attacks" >> \$res
INSIDE

# Guest RAM of three sandboxes plus the pool in the VM's tmpfs.
# Its usual run is several minutes: beyond this it is a failure (an emulator hang is nested-kvm's 75).
export NESTED_RUN_TIMEOUT=${NESTED_RUN_TIMEOUT:-700}
nested_run "$work" "$work/inside.sh" --mem 4096 > "$work/nested.log" 2>&1
run_rc=$?
rm -f "$work/base.ext4"
rm -rf "$work/tree"
cat "$work/timing.log" 2>/dev/null
[ -f "$work/result.txt" ] && cat "$work/result.txt"
# The other checks by the completion record; the attacks by their count in it, by the lines, and by the
# floor: the attacks this suite makes (165: 163 on 2026-12-02, then the console flood and the forged
# reason). A run that lost some (a probe that died half way, an attack that could not start) falls below
# it. Raise it with the attacks you add.
min_attacks=165
fails=0
nested_judge "$work" "$run_rc" || fails=1
attacks=$(grep -c -e '^blocked: ' -e '^ESCAPED: ' "$work/result.txt" 2>/dev/null)
escapes=$(grep -c '^ESCAPED: ' "$work/result.txt" 2>/dev/null)
recorded=$(tail -n 1 "$work/result.txt" 2>/dev/null | sed -n 's/^DONE .*attacks=\([0-9][0-9]*\).*/\1/p')
echo "escape suite (vm): ${attacks:-0} attacks, ${escapes:-0} succeeded"
if [ "${recorded:-x}" != "${attacks:-0}" ]; then
	echo "FAIL: the completion record counts ${recorded:-no} attacks, the result has ${attacks:-0}"
	fails=1
fi
if [ "${attacks:-0}" -lt "$min_attacks" ]; then
	echo "FAIL: ${attacks:-0} attacks ran, fewer than the suite's $min_attacks"
	fails=1
fi
[ "${escapes:-0}" = 0 ] || fails=1
[ "$fails" = 0 ] || { tail -n 30 "$work/nested.log"; nested_recap "$work"; }
exit "$fails"
