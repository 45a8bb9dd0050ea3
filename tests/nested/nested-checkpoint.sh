#!/bin/sh
# nested suite: checkpoints, rollback and fork of vm sandboxes (memory + disk), inside ONE nested-kvm VM.
# A vm sandbox runs a background counter (a shell loop: its count lives in the process's memory);
#   space checkpoint     pauses it, saves memory + vCPU + device state into the checkpoint, resumes
#   space fork --count 2 two new VMs restored from it: the counter process is there in both (same pid),
#                        continues from the checkpoint's count, independently; their writes never meet;
#                        each has its own hostname, random state and the host's time
#   space rollback       the file written after the checkpoint is gone and the counter is back near the
#                        checkpoint's value (the same process, restored, not restarted)
#   exec and cp work after every restore; a corrupted snapshot is refused with a clear error and leaves
#   nothing running; space-vmm killed (kill -9) during a create and during a checkpoint: the operation
#   fails with a reason, the sandbox is failed, no half checkpoint is kept; rm leaves nothing behind.
set -u
. "$(dirname "$0")/nested-common.sh"
src=${SPACE_SOURCE_DIR:?}
work=${SPACE_BUILD_DIR:?}/nested-checkpoint
space=${SPACE_CLI:?}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/result.txt "$work"/exec.err

nested_kernel
[ -d "$mods" ] || { echo "SKIP: $mods missing"; exit 77; }
nested_need_built "$space" "the space CLI"
tree=$work/tree
rm -rf "$tree"
bash "$src/scripts/busybox-tree.sh" "$tree" >/dev/null || { echo "FAIL: busybox tree"; exit 1; }

cat > "$work/inside.sh" <<INSIDE
#!/bin/bash
[ -n "\${BASH_VERSION:-}" ] || exec bash "\$0" "\$@" # nested_run starts it with sh
set -u
$(nested_helper_env)
export SPACE_AGENT_PATH='${SPACE_AGENT_PATH:-}' SPACE_VMM_PATH='${SPACE_VMM_PATH:-}'
export SPACE_VM_BOOT_TIMEOUT=300
res=$work/result.txt
checks=0 # every check counts itself; the last line says how many ran (nested-judge.sh)
pass() { checks=\$((checks + 1)); echo "PASS: \$*" >> \$res; }
fail() { checks=\$((checks + 1)); echo "FAIL: \$*" >> \$res; }
S=\$(mktemp -d /tmp/space-nested-cp.XXXXXX)
SP() { '$space' --state "\$S" "\$@"; }
ids=()
cleanup() {
	kill "\$copier" 2>/dev/null
	for i in "\${ids[@]}"; do SP rm "\$i" >/dev/null 2>&1; done
	SP checkpoint rm \$(SP checkpoints --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(c["id"] for c in json.load(sys.stdin)))' 2>/dev/null) >/dev/null 2>&1
	SP pool unmount >/dev/null 2>&1
	umount "\$S/pool" 2>/dev/null
	rm -rf "\$S"
}
trap cleanup EXIT
( while sleep 2; do for f in "\$S"/run/*/sandbox.log; do [ -f "\$f" ] && cp "\$f" "$work/\$(basename "\$(dirname "\$f")").log"; done; done ) &
copier=\$!
modprobe kvm_amd 2>/dev/null
[ -c /dev/kvm ] || { fail "no /dev/kvm inside nested-kvm"; exit 1; }
SP init --loop-pool 3G > $work/init.log 2>&1 || { fail "space init: \$(tail -n 3 $work/init.log)"; exit 1; }
SP template import tiny --rootfs '$tree' --kernel '$bz' --modules '$mods' > $work/import.log 2>&1 ||
	{ fail "template import: \$(tail -n 3 $work/import.log)"; exit 1; }

count() { SP exec "\$1" -- cat /run/count 2>>$work/exec.err; }
# why ID: what a failed check of sandbox ID shows of it: its state, the last exec's error, its log's end.
why() {
	printf ' [%s: %s; exec: %s; log: %s]' "\$1" \
		"\$(SP ls --json 2>&1 | python3 -c "import json,sys; s=[s for s in json.load(sys.stdin) if s['id']=='\$1']; print(s[0]['status'] + ' ' + (s[0].get('reason') or '') if s else 'no such sandbox')" 2>&1 | cut -c1-160)" \
		"\$(tail -n 2 $work/exec.err 2>/dev/null | tr '\\n' ' ' | cut -c1-240)" \
		"\$(tail -n 3 "\$S/run/\$1/sandbox.log" 2>/dev/null | tr '\\n' ' ' | cut -c1-300)"
}
# The counter: its state is the shell variable; /run/count (tmpfs) only shows it.
id=\$(SP create --isolation vm --template tiny --memory 256 2> $work/create.err)
[ -n "\$id" ] || { fail "create: \$(tail -n 5 $work/create.err)"; exit 1; }
ids+=("\$id")
cpid=\$(SP exec "\$id" -- sh -c 'mkdir -p /run; mount -t tmpfs tmpfs /run 2>/dev/null; i=0; while :; do i=\$((i+1)); echo \$i > /run/count.new; mv /run/count.new /run/count; sleep 0.2; done >/dev/null 2>&1 </dev/null & echo \$!')
sleep 3
SP exec "\$id" -- sh -c 'echo before > /root/before; sync'
t0=\$(date +%s%N)
cp=\$(SP checkpoint "\$id" --name warm 2> $work/checkpoint.err)
t1=\$(date +%s%N)
c_cp=\$(count "\$id")
if [ -n "\$cp" ]; then
	pass "space checkpoint of a running vm sandbox: \$cp in \$(( (t1 - t0) / 1000000 )) ms (count \$c_cp after it)"
else
	fail "checkpoint: \$(tail -n 5 $work/checkpoint.err)"; exit 1
fi
kind=\$(SP checkpoints "\$id" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["kind"])')
[ "\$kind" = full ] && pass "the checkpoint is of kind full (disk + memory)" || fail "checkpoint kind '\$kind'"
SP exec "\$id" -- sh -c 'echo after > /root/after; sync'
sleep 3
c_pre=\$(count "\$id")
[ -n "\$c_pre" ] && [ "\$c_pre" -gt "\$c_cp" ] && pass "the counter ran on after the checkpoint: \$c_cp -> \$c_pre" ||
	fail "counter after checkpoint: '\$c_cp' -> '\$c_pre'"

# Fork twice.
t0=\$(date +%s%N)
forks=\$(SP fork "\$cp" --count 2 2> $work/fork.err)
t1=\$(date +%s%N)
set -- \$forks
f1=\${1:-}; f2=\${2:-}
[ -n "\$f1" ] && ids+=("\$f1"); [ -n "\$f2" ] && ids+=("\$f2")
if [ -n "\$f1" ] && [ -n "\$f2" ]; then
	pass "space fork --count 2: \$f1 \$f2 in \$(( (t1 - t0) / 1000000 )) ms"
else
	fail "fork: \$(tail -n 5 $work/fork.err)"; exit 1
fi
# Both forks' counts are read at once: a fork has counted from the checkpoint's count since its restore,
# and the later checks of the first one must not give the second time to count past the original's c_pre.
a1=\$(count "\$f1"); a2=\$(count "\$f2")
for f in "\$f1" "\$f2"; do
	SP exec "\$f" -- kill -0 "\$cpid" 2>/dev/null && pass "\$f: the counter process \$cpid is there" ||
		fail "\$f: no counter process \$cpid"
	if [ "\$f" = "\$f1" ]; then a=\$a1; else a=\$a2; fi
	sleep 1; b=\$(count "\$f")
	if [ -n "\$a" ] && [ -n "\$b" ] && [ "\$b" -gt "\$a" ] && [ "\$a" -ge "\$c_cp" ] && [ "\$a" -lt "\$c_pre" ]; then
		pass "\$f: the counter continues from the checkpoint (\$a -> \$b; the original was at \$c_pre)"
	else
		fail "\$f: counter '\$a' -> '\$b' (checkpoint \$c_cp, original \$c_pre)\$(why "\$f")"
	fi
	out=\$(SP exec "\$f" -- sh -c 'cat /root/before; test -e /root/after && echo AFTER; hostname')
	[ "\$out" = "before
\$f" ] && pass "\$f: the disk is the checkpoint's, hostname \$f" || fail "\$f: disk/hostname: \$out\$(why "\$f")"
done
# Independent: each writes the same path and reads its own; stopping one counter leaves the other.
SP exec "\$f1" -- sh -c 'echo one > /root/mine' 2>>$work/exec.err && SP exec "\$f2" -- sh -c 'echo two > /root/mine' 2>>$work/exec.err
o1=\$(SP exec "\$f1" -- cat /root/mine 2>>$work/exec.err); o2=\$(SP exec "\$f2" -- cat /root/mine 2>>$work/exec.err)
[ "\$o1" = one ] && [ "\$o2" = two ] && pass "forks' writes never meet (one/two)" || fail "forks' writes: '\$o1'/'\$o2'\$(why "\$f1")\$(why "\$f2")"
SP exec "\$f1" -- kill "\$cpid" 2>>$work/exec.err
a=\$(count "\$f1"); b2=\$(count "\$f2"); sleep 1; a2=\$(count "\$f1"); b3=\$(count "\$f2")
[ -n "\$a" ] && [ "\$a" = "\$a2" ] && [ -n "\$b2" ] && [ -n "\$b3" ] && [ "\$b3" -gt "\$b2" ] &&
	pass "stopping the counter of one fork leaves the other counting (\$b2 -> \$b3)" ||
	fail "independent counters: f1 '\$a' -> '\$a2', f2 '\$b2' -> '\$b3'\$(why "\$f1")\$(why "\$f2")"
r1=\$(SP exec "\$f1" -- sh -c 'head -c 16 /dev/urandom | od -An -tx1' 2>>$work/exec.err)
r2=\$(SP exec "\$f2" -- sh -c 'head -c 16 /dev/urandom | od -An -tx1' 2>>$work/exec.err)
[ -n "\$r1" ] && [ -n "\$r2" ] && [ "\$r1" != "\$r2" ] && pass "the forks' random streams differ (reseeded)" ||
	fail "random: '\$r1' vs '\$r2'\$(why "\$f1")\$(why "\$f2")"
gt=\$(SP exec "\$f2" -- date +%s); ht=\$(date +%s)
d=\$((gt - ht)); [ \$d -lt 0 ] && d=\$((-d))
[ \$d -le 5 ] && pass "a fork's clock is the host's (off by \$d s)" || fail "fork clock off by \$d s"
echo hello-fork > /tmp/cp-in
SP cp /tmp/cp-in "\$f2:/root/cp-in" && SP cp "\$f2:/root/cp-in" /tmp/cp-out && cmp -s /tmp/cp-in /tmp/cp-out &&
	pass "cp in and out of a fork" || fail "cp with a fork"

# Rollback: the file written after the checkpoint is gone, the counter is back.
t0=\$(date +%s%N)
SP rollback "\$id" "\$cp" 2> $work/rollback.err || fail "rollback: \$(tail -n 5 $work/rollback.err)"
t1=\$(date +%s%N)
c_rb=\$(count "\$id")
out=\$(SP exec "\$id" -- sh -c 'cat /root/before; test -e /root/after && echo AFTER; kill -0 '\$cpid' && echo COUNTER')
[ "\$out" = "before
COUNTER" ] && pass "rollback in \$(( (t1 - t0) / 1000000 )) ms: /root/after is gone, the counter process is there" ||
	fail "after rollback: \$out"
if [ -n "\$c_rb" ] && [ "\$c_rb" -lt "\$c_pre" ]; then
	pass "after rollback the counter is back to \$c_rb (checkpoint \$c_cp, before rollback \$c_pre)"
else
	fail "counter after rollback: '\$c_rb' (checkpoint \$c_cp, before \$c_pre)"
fi
sleep 1
c_rb2=\$(count "\$id")
[ -n "\$c_rb2" ] && [ "\$c_rb2" -gt "\$c_rb" ] && pass "the restored counter runs on (\$c_rb -> \$c_rb2)" || fail "counter after rollback: \$c_rb -> \$c_rb2"

# A checkpoint of a paused sandbox keeps it paused.
SP pause "\$id"
cp2=\$(SP checkpoint "\$id" 2>&1) && SP ls | grep "\$id" | grep -q paused && pass "checkpoint of a paused vm sandbox leaves it paused" ||
	fail "paused checkpoint: \$cp2"
SP resume "\$id"
SP exec "\$id" -- true && pass "exec after resume" || fail "exec after resume"

# A corrupted snapshot: refused, nothing left running.
path=\$(SP checkpoints --json | python3 -c "import json,sys; print([c['path'] for c in json.load(sys.stdin) if c['id']=='\$cp'][0])")
btrfs property set -ts "\$path" ro false
printf 'XXXXXXXX' | dd of="\$path/vmstate.snap" bs=1 seek=200 conv=notrunc 2>/dev/null
btrfs property set -ts "\$path" ro true
before=\$(pgrep -c -x space-vmm)
if out=\$(SP fork "\$cp" 2>&1); then
	ids+=("\$out"); fail "a corrupted snapshot was restored: \$out"
else
	after=\$(pgrep -c -x space-vmm)
	case "\$out" in
	*checksum*|*snapshot*) [ "\$before" = "\$after" ] && pass "corrupted snapshot refused: \$out" || fail "processes left: \$before -> \$after" ;;
	*) fail "corrupted snapshot error unclear: \$out" ;;
	esac
fi

# space-vmm killed (kill -9) in the middle of an operation: the operation fails with a reason, the
# sandbox is failed (never running without a VMM), and rm leaves nothing (checked below, with the rest).
vmm_pids() { pgrep -x space-vmm | sort; }
# ...during a checkpoint (while guest memory is written out). First: a VM boots after it; after a VM
# killed, the emulated host's own KVM has failed the next boot (a triple fault) once.
vmm_pids > $work/vmm-before.txt
kv=\$(SP create --isolation vm --template tiny --memory 256 2> $work/kv.err)
kvpids=\$(vmm_pids | grep -vxF -f $work/vmm-before.txt)
[ -n "\$kv" ] && ids+=("\$kv")
kpid=\$(SP ls --json | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['id']=='\$kv'][0])" 2>/dev/null)
SP checkpoint "\$kv" --name killed > $work/kcp.out 2> $work/kcp.err &
cpr=\$!
# Killed once the checkpoint is writing the VM's state: its file exists (made just before space-vmm is
# asked for it; 256 MiB take it a second or more here).
statef=\$S/pool/sandboxes/\$kv/disk/vmstate.snap
for i in \$(seq 600); do [ -e "\$statef" ] && break; kill -0 \$cpr 2>/dev/null || break; sleep 0.02; done
mid=no
[ -e "\$statef" ] && mid=yes
[ -n "\$kpid" ] && { kill -STOP \$kvpids; sleep 0.3; kill -KILL \$kvpids; }
wait \$cpr
rc=\$?
st=\$(SP ls --json | python3 -c "import json,sys; s=[s for s in json.load(sys.stdin) if s['id']=='\$kv'][0]; print(s['status'] + '|' + (s.get('reason') or ''))" 2>&1)
cps=\$(SP checkpoints --json | python3 -c "import json,sys; print(' '.join(c['id'] for c in json.load(sys.stdin) if c.get('name') == 'killed'))")
if [ -z "\$kpid" ]; then
	fail "no sandbox to kill during a checkpoint: \$(tail -n 3 $work/kv.err)"
elif [ \$rc != 0 ] && [ -z "\$cps" ]; then
	case "\$st" in
	failed\|*) if [ \$mid = no ]; then fail "the checkpoint failed before its state file appeared: not killed in the middle (\$(tail -n 1 $work/kcp.err | cut -c1-160))"; else
		pass "space-vmm killed during a checkpoint, while it wrote the VM state: it fails (\$(tail -n 1 $work/kcp.err | cut -c1-120)), no checkpoint is kept, the sandbox is \$st"; fi ;;
	*) fail "space-vmm killed during a checkpoint: the sandbox is '\$st'" ;;
	esac
elif [ \$rc = 0 ] && [ -n "\$cps" ]; then
	# It finished first: a whole checkpoint, which a fork restores.
	out=\$(SP fork "\$cps" 2>&1) && ids+=("\$out") && SP exec "\$out" -- true &&
		pass "space-vmm killed right after a checkpoint: the checkpoint is whole (a fork of it runs)" ||
		fail "space-vmm killed after a checkpoint: its fork: \$out"
else
	fail "space-vmm killed during a checkpoint: rc \$rc, checkpoints '\$cps', sandbox '\$st': \$(tail -n 2 $work/kcp.err)"
fi
SP checkpoint rm \$cps > /dev/null 2>&1
# ...during a create (while the guest boots). Last: no VM boots after it.
# (the nested VM has no /dev/fd: no process substitution; the pids before go to a file)
vmm_pids > $work/vmm-before.txt
old_ids="\${ids[*]}"
SP create --isolation vm --template tiny --memory 256 > $work/kcreate.out 2> $work/kcreate.err &
cr=\$!
victim=
for i in \$(seq 300); do
	victim=\$(vmm_pids | grep -vxF -f $work/vmm-before.txt | head -n 1)
	[ -n "\$victim" ] && break
	sleep 0.1
done
sleep 1
# Every process of it (its supervisor, the namespace's waiter and the VM itself), at once. Stopped first,
# so that no vCPU is inside the guest when SIGKILL tears it down: the emulated host's own KVM has crashed
# (a kernel stack overflow) after a vCPU was killed in guest mode. To space-vmm and the library it is the
# same sudden death.
victims=\$(vmm_pids | grep -vxF -f $work/vmm-before.txt)
if [ -n "\$victim" ]; then
	kill -STOP \$victims; sleep 0.3; kill -KILL \$victims
fi
wait \$cr
rc=\$?
for i in \$(SP ls --json | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))'); do
	case " \${ids[*]} " in *" \$i "*) ;; *) ids+=("\$i") ;; esac
done
live=\$(SP ls --json | python3 -c "import json,sys; print(' '.join(s['id'] for s in json.load(sys.stdin) if s['status'] in ('running', 'creating') and s['id'] not in sys.argv[1].split()))" "\$old_ids")
if [ -z "\$victim" ]; then
	fail "no space-vmm appeared for the create to kill (rc \$rc: \$(tail -n 2 $work/kcreate.err))"
elif [ \$rc != 0 ] && grep -Eq "space-vmm.* (ended without giving a reason|killed by signal)" $work/kcreate.err && [ -z "\$live" ]; then
	pass "space-vmm killed during a create: the create fails (\$(tail -n 1 $work/kcreate.err | cut -c1-160)), nothing runs"
elif [ \$rc = 0 ]; then
	# The boot finished before the kill: then the sandbox must be failed now, with the reason.
	kid=\$(cat $work/kcreate.out)
	st=\$(SP ls --json | python3 -c "import json,sys; s=[s for s in json.load(sys.stdin) if s['id']=='\$kid'][0]; print(s['status'] + '|' + (s.get('reason') or ''))")
	case "\$st" in failed\|*) pass "space-vmm killed just after a create: the sandbox is failed: \$st" ;;
	*) fail "space-vmm killed after a create: \$st" ;; esac
else
	fail "space-vmm killed during a create: rc \$rc, live '\$live', \$(tail -n 3 $work/kcreate.err)"
fi

# rm leaves nothing.
SP rm "\${ids[@]}" || fail "space rm"
left=\$(for i in "\${ids[@]}"; do grep -F "\$i" /proc/mounts; losetup -a | grep -F "\$i"; find /sys/fs/cgroup -maxdepth 4 -name "*\$i*" 2>/dev/null; ls -d "\$S/run/\$i" 2>/dev/null; done; pgrep -x space-vmm)
[ -z "\$left" ] && pass "space rm leaves no process, mount, loop device, cgroup or runtime dir" || fail "left after rm: \$left"
ids=()
echo "DONE checks=\$checks" >> \$res
INSIDE

# Its usual run is a few minutes: beyond this it is a failure (an emulator hang is nested-kvm's 75).
export NESTED_RUN_TIMEOUT=${NESTED_RUN_TIMEOUT:-600}
nested_run "$work" "$work/inside.sh" --mem 4096 > "$work/nested.log" 2>&1
run_rc=$?
rm -rf "$tree"
nested_report "$work" "$run_rc"
