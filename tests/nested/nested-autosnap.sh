#!/bin/sh
# nested suite: periodic file snapshots of a vm sandbox, inside ONE nested-kvm VM.
#   space create --isolation vm --snapshot-every 2 --snapshot-keep 3
#                        space-snapd takes disk-only checkpoints (auto-<time>, kind disk: the guest's
#                        filesystems synced through its agent, the subvolume snapshotted) and keeps 3;
#                        none while the VM is paused
#   space rollback       to one taken between two writes: the VM reboots on that disk and the file holds
#                        the first value; snapshots go on with a new helper
#   space rm             ends the helper and removes the automatic checkpoints
set -u
. "$(dirname "$0")/nested-common.sh"
src=${SPACE_SOURCE_DIR:?}
work=${SPACE_BUILD_DIR:?}/nested-autosnap
space=${SPACE_CLI:?}
snapd=${SPACE_SNAPD_PATH:-$SPACE_BUILD_DIR/src/snapd/space-snapd}
mkdir -p "$work"
rm -f "$work"/*.log "$work"/result.txt

nested_kernel
[ -d "$mods" ] || { echo "SKIP: $mods missing"; exit 77; }
nested_need_built "$space" "the space CLI"
nested_need_built "$snapd" space-snapd
tree=$work/tree
rm -rf "$tree"
bash "$src/scripts/busybox-tree.sh" "$tree" >/dev/null || { echo "FAIL: busybox tree"; exit 1; }

cat > "$work/inside.sh" <<INSIDE
#!/bin/bash
[ -n "\${BASH_VERSION:-}" ] || exec bash "\$0" "\$@" # nested_run starts it with sh
set -u
$(nested_helper_env)
export SPACE_AGENT_PATH='${SPACE_AGENT_PATH:-}' SPACE_VMM_PATH='${SPACE_VMM_PATH:-}' SPACE_SNAPD_PATH='$snapd'
export SPACE_VM_BOOT_TIMEOUT=300
res=$work/result.txt
checks=0 # every check counts itself; the last line says how many ran (nested-judge.sh)
pass() { checks=\$((checks + 1)); echo "PASS: \$*" >> \$res; }
fail() { checks=\$((checks + 1)); echo "FAIL: \$*" >> \$res; }
S=\$(mktemp -d /tmp/space-nested-as.XXXXXX)
SP() { '$space' --state "\$S" "\$@"; }
id=
cleanup() {
	kill "\$copier" 2>/dev/null
	[ -n "\$id" ] && SP rm "\$id" >/dev/null 2>&1
	SP checkpoint rm \$(SP checkpoints --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(c["id"] for c in json.load(sys.stdin)))' 2>/dev/null) >/dev/null 2>&1
	SP pool unmount >/dev/null 2>&1
	umount "\$S/pool" 2>/dev/null
	rm -rf "\$S"
}
trap cleanup EXIT
( while sleep 5; do for d in "\$S"/run/sb-*; do [ -d "\$d" ] && for f in "\$d"/*.log; do cp "\$f" "$work/\$(basename "\$d")-\$(basename "\$f")"; done; done; done ) 2>/dev/null &
copier=\$!
modprobe kvm_amd 2>/dev/null
[ -c /dev/kvm ] || { fail "no /dev/kvm inside nested-kvm"; exit 1; }
SP init --loop-pool 3G > $work/init.log 2>&1 || { fail "space init: \$(tail -n 3 $work/init.log)"; exit 1; }
SP template import tiny --rootfs '$tree' --kernel '$bz' --modules '$mods' > $work/import.log 2>&1 ||
	{ fail "template import: \$(tail -n 3 $work/import.log)"; exit 1; }
now_ms() { date +%s%3N; }
# "id created_ms" of the automatic checkpoints, oldest first; kinds in \$work/kinds
autos() { SP checkpoints "\$id" --json | python3 -c 'import json,sys; [print(c["id"], int(c["created_ms"]), c["kind"]) for c in json.load(sys.stdin) if c["automatic"]]'; }
helper() { SP ls --json | python3 -c "import json,sys; s=[s for s in json.load(sys.stdin) if s['id']=='\$id'][0]['snapshots']; print(s['every'], s['keep'], s['pid'])"; }

id=\$(SP create --isolation vm --template tiny --memory 256 --snapshot-every 2 --snapshot-keep 3 2> $work/create.err)
[ -n "\$id" ] || { fail "create: \$(tail -n 5 $work/create.err)"; exit 1; }
read -r every keep hpid <<<"\$(helper)"
[ "\$every \$keep" = "2 3" ] && grep -q space-snapd /proc/\$hpid/cmdline 2>/dev/null &&
	pass "vm sandbox with a policy: every \$every s, keep \$keep, space-snapd pid \$hpid" || fail "policy: \$every \$keep \$hpid"
SP exec "\$id" -- sh -c 'echo one > /root/v; sync' || fail "exec one"
t_one=\$(now_ms)
# Long enough for at least 4 snapshots (every 2 s) before the pause, so keep=3 must have pruned one.
sleep 9
t_two=\$(now_ms)
SP exec "\$id" -- sh -c 'echo two > /root/v; sync' || fail "exec two"
SP pause "\$id" || fail "pause"
sleep 3
list=\$(autos)
sleep 3
[ "\$(autos)" = "\$list" ] && pass "no snapshot while paused" || fail "snapshots while paused: \$list -> \$(autos)"
n=\$(grep -c . <<<"\$list")
[ "\$n" = 3 ] && pass "3 automatic checkpoints kept: \$(echo \$list)" || fail "automatic checkpoints: \$list"
grep -qv ' disk\$' <<<"\$list" && fail "an automatic checkpoint is not of kind disk: \$list"
sorted=\$(sort -k2,2n <<<"\$list")
[ "\$sorted" = "\$list" ] || fail "times not increasing: \$list"
ev=\$(SP events "\$id" --json 2>&1)
grep -q checkpoint-removed <<<"\$ev" && pass "older ones were pruned" || fail "nothing pruned: \$(tail -c 800 <<<"\$ev")"
cp=\$(awk -v a=\$t_one -v b=\$t_two '\$2 > a && \$2 < b { c = \$1 } END { print c }' <<<"\$list")
if [ -z "\$cp" ]; then
	fail "no automatic checkpoint between the two writes (\$t_one..\$t_two): \$list"
else
	SP resume "\$id" || fail "resume"
	t0=\$(now_ms)
	if out=\$(SP rollback "\$id" "\$cp" 2>&1); then
		v=\$(SP exec "\$id" -- cat /root/v)
		[ "\$v" = one ] && pass "rollback to \$cp (the VM rebooted on that disk in \$(( \$(now_ms) - t0 )) ms): /root/v = one" ||
			fail "after rollback /root/v = '\$v'"
		read -r every keep hpid2 <<<"\$(helper)"
		[ "\$hpid2" != "\$hpid" ] && grep -q space-snapd /proc/\$hpid2/cmdline 2>/dev/null &&
			pass "a new helper after rollback (\$hpid2)" || fail "helper after rollback: \$hpid -> \$hpid2"
		sleep 6
		newer=\$(autos | awk -v t=\$t0 '\$2 > t' | grep -c .)
		[ "\$newer" -ge 1 ] && pass "snapshots go on after the rollback (\$newer new)" || fail "no snapshot after rollback: \$(autos)"
	else
		fail "rollback to a disk-only checkpoint: \$out"
	fi
fi
SP rm "\$id" || fail "space rm"
sleep 1
read -r every keep hp <<<"\$(helper 2>/dev/null)"
for p in \$hpid \${hpid2:-}; do grep -q space-snapd /proc/\$p/cmdline 2>/dev/null && fail "helper \$p still runs after rm"; done
[ -z "\$(ls -A "\$S/pool/checkpoints" 2>/dev/null)" ] && [ -z "\$(ls -A "\$S/pool/sandboxes")" ] &&
	pass "rm ended the helper and left no subvolume" || fail "left: \$(ls "\$S/pool/checkpoints" "\$S/pool/sandboxes")"
id=
echo "DONE checks=\$checks" >> \$res
INSIDE

# Its usual run is a few minutes: beyond this it is a failure (an emulator hang is nested-kvm's 75).
export NESTED_RUN_TIMEOUT=${NESTED_RUN_TIMEOUT:-600}
nested_run "$work" "$work/inside.sh" --mem 4096 > "$work/nested.log" 2>&1
run_rc=$?
rm -rf "$tree"
nested_report "$work" "$run_rc"
