#!/bin/bash
# The escape suite in jail mode: scripted attacks from inside sandboxes, each of which must fail, and a
# host that must be unchanged afterwards (mounts, processes, a canary file tree, network namespaces,
# kernel modules, hostname). Ends with "escape suite: N attacks, 0 succeeded".
#
# The in-sandbox attacker is the tiny busybox template plus escape-probe (escape_probe.c, static), which
# makes the system calls busybox cannot. Every line the probe prints is one attack.
. "$(dirname "$0")/../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
need_built "${ESCAPE_PROBE:-}" escape-probe ESCAPE_PROBE
# The sandboxes' network goes through it (attacks on the gateway); without it they silently get none.
need_built "${SPACE_GATEWAY_PATH:-${SPACE_BUILD_DIR:-}/src/net/space-gateway}" space-gateway SPACE_GATEWAY_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
command -v python3 >/dev/null || skip "python3 missing (host-side listeners)"
export SPACE_QUIET_JAIL=1
# Sandboxes get their egress gateway from the libexec dir: use the built one when none is installed.
if [ -z "${SPACE_LIBEXEC_DIR:-}" ] && [ -x "${SPACE_BUILD_DIR:-}/src/net/space-gateway" ]; then
	export SPACE_LIBEXEC_DIR=$SPACE_BUILD_DIR/src/net
fi

attacks=0
escaped=0
# One attack's verdict: blocked NAME | escaped NAME DETAIL
blocked() { attacks=$((attacks + 1)); echo "blocked: $1"; }
escaped() { attacks=$((attacks + 1)); escaped=$((escaped + 1)); echo "ESCAPED: $1${2:+: $2}"; }
# Counts the probe's BLOCKED/ESCAPED lines in $1 (its output); a probe that printed nothing is a failure.
count_probe() {
	local line n=0
	while IFS= read -r line; do
		case $line in
		"BLOCKED "*) blocked "${line#BLOCKED }"; n=$((n + 1)) ;;
		"ESCAPED "*) escaped "${line#ESCAPED }"; n=$((n + 1)) ;;
		esac
	done <<<"$1"
	[ $n -gt 0 ] || fail "the probe reported nothing: $1"
}

make_state 4G
WORK=$(mktemp -d /tmp/space-escape-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
cp "$ESCAPE_PROBE" "$WORK/tree/bin/escape-probe"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
S=(--state "$STATE")
R=(run --template tiny --isolation jail --state "$STATE")
ids=()
new_sandbox() {
	expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}" "$@"
	ids+=("$out")
	on_exit "'$SPACE' rm '$out' --state '$STATE'"
	sb=$out
}
sb_pid() { "$SPACE" ls --json "${S[@]}" | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['id']=='$1'][0])"; }

# ---- the host as it is before the attacks ----
CANARY=$(mktemp -d /tmp/space-escape-canary-XXXXXX)
on_exit "rm -rf '$CANARY'"
token=canary-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
mkdir -p "$CANARY/dir"
echo "$token" >"$CANARY/secret"
echo "$token" >"$CANARY/dir/file"
ln -s secret "$CANARY/link"
# Host processes the sandboxes will try to kill and trace.
sleep 100000 &
victim=$!
on_exit "kill_ours $victim"
# Mounts other than other tests' scratch mounts in /tmp (the machine is shared), netns, modules.
snapshot() {
	awk -v c="$CANARY" -v s="$STATE" '$2 !~ "^/tmp/" || index($2, c) == 1 || index($2, s) == 1 { print $1, $2, $3, $4 }' \
		/proc/self/mounts | grep -v -e '^nsfs ' -e ' /run/netns/' -e ' /sys/fs/cgroup' | sort
	echo "--- netns"; ip netns list 2>/dev/null | awk '{print $1}' | grep -v -e '^sb-' | sort
	echo "--- modules"; awk '{print $1}' /proc/modules 2>/dev/null | sort
	echo "--- hostname"; hostname
	echo "--- canary"; (cd "$CANARY" && find . -printf '%p %y %s %m %U %l\n' | sort && cat secret dir/file)
}
snapshot >"$WORK/host.before"

# ---- listeners on the host: loopback, the host's other addresses, an abstract unix socket ----
port=$((20000 + RANDOM % 20000))
host_addrs=$(ip -o addr show | awk '$4 ~ /^[0-9.]+\// && $2 != "lo" { split($4, a, "/"); print a[1] }')
python3 - "$port" "$WORK/accepted" "escape-$token" $host_addrs >"$WORK/listener.log" 2>&1 <<'EOF' &
import selectors, socket, sys
port, log, abstract, addrs = int(sys.argv[1]), sys.argv[2], sys.argv[3], ["127.0.0.1"] + sys.argv[4:]
sel = selectors.DefaultSelector()
for a in addrs:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((a, port)); s.listen(64); sel.register(s, selectors.EVENT_READ, a)
u = socket.socket(socket.AF_UNIX); u.bind("\0" + abstract); u.listen(64); sel.register(u, selectors.EVENT_READ, "@" + abstract)
open(log + ".ready", "w").close()
while True:
    for k, _ in sel.select():
        c, peer = k.fileobj.accept()
        with open(log, "a") as f: f.write("%s from %s\n" % (k.data, peer))
        c.close()
EOF
listener=$!
on_exit "kill_ours $listener"
for _ in $(seq 50); do [ -e "$WORK/accepted.ready" ] && break; sleep 0.1; done
[ -e "$WORK/accepted.ready" ] || fail "host listener did not start: $(cat "$WORK/listener.log")"

# ---- 1. kernel interfaces: modules, time, keyrings, userfaultfd, perf, bpf, devices, mount, knobs, the
# kernel's networking (nf_tables, xfrm, packet and raw sockets, rtnetlink changes), new namespaces, and
# PID 1's host-opened descriptors and memory (pidfd_getfd, /proc/1/mem, /proc/1/fd, /proc/1/environ) ----
for a in modules time kernel-objects devices mount knobs vsock netfam namespaces agent-fds agent-proc; do
	"$SPACE" "${R[@]}" -- escape-probe "$a" >"$WORK/probe.out" 2>&1
	count_probe "$(cat "$WORK/probe.out")"
done

# ---- 2. host paths: ../, /proc/1/root, /proc/self/root, every /proc/PID/{root,cwd}, symlinks ----
"$SPACE" "${R[@]}" -- sh -c '
	c=$1; t=$2
	try() { if cat "$1" 2>/dev/null | grep -q "$t"; then echo "ESCAPED read $1"; else echo "BLOCKED read $1"; fi; }
	try "$c/secret"
	try "../../../../../../..$c/secret"
	try "/proc/1/root$c/secret"
	try "/proc/self/root/../../..$c/secret"
	try "/proc/1/cwd/../../..$c/dir/file"
	for p in /proc/[0-9]*; do try "$p/root$c/secret"; done
	ln -s "$c" /tmp/out-link && try /tmp/out-link/secret
	ln -s "/proc/1/root/../../..$c" /tmp/out-link2 && try /tmp/out-link2/dir/file
	cd / && for i in 1 2 3 4 5 6 7 8; do cd ..; done && try ".$c/secret"
	# Writes land in the sandbox own tree, never in the host canary (checked again from the host).
	mkdir -p "$c" && echo pwned >"$c/secret" && echo pwned >"$c/planted" && echo "BLOCKED write $c (the sandbox own copy)"
' sh "$CANARY" "$token" >"$WORK/paths.out" 2>&1
count_probe "$(cat "$WORK/paths.out")"

# ---- 3. the file API raced against symlinks: space cp into a path the guest keeps swapping ----
new_sandbox
racer=$sb
mkdir -p "$WORK/payload"
echo "planted-by-cp-$token" >"$WORK/payload/f"
expect_rc 0 "$SPACE" exec "$racer" "${S[@]}" -- sh -c "
	mkdir -p '$CANARY'
	(cd /tmp; while :; do rm -rf d; mkdir d; rm -rf d; ln -s '$CANARY' d; rm -f d; ln -s /proc/1/root/../../..'$CANARY' d; done) >/dev/null 2>&1 &"
ok=0
for i in $(seq 60); do
	"$SPACE" cp "$WORK/payload/f" "$racer:/tmp/d/f$i" "${S[@]}" >/dev/null 2>&1 && ok=$((ok + 1))
	"$SPACE" cp "$racer:/tmp/d/f$i" "$WORK/payload/back$i" "${S[@]}" >/dev/null 2>&1
done
if ls "$CANARY" | grep -q '^f[0-9]'; then escaped "space cp through a swapped symlink" "$(ls "$CANARY")"
else blocked "space cp into a path swapped to a symlink out ($ok of 60 copies landed inside)"; fi
# Copy-out of things that are not files: devices and FIFOs would stream forever onto the host's disk.
expect_rc 0 "$SPACE" exec "$racer" "${S[@]}" -- sh -c 'mkfifo /tmp/fifo; (yes >/tmp/fifo &) ; ln -sf /dev/zero /tmp/zero'
for src in /dev/zero /dev/urandom /tmp/fifo /tmp/zero /proc/self/mem /proc/kcore; do
	timeout 30 "$SPACE" cp "$racer:$src" "$WORK/copied" "${S[@]}" >/dev/null 2>&1
	size=$(stat -c %s "$WORK/copied" 2>/dev/null || echo 0)
	rm -f "$WORK/copied"
	if [ "$size" -gt $((64 << 20)) ]; then escaped "space cp of $src" "$size bytes written on the host"
	else blocked "space cp of $src ($size bytes)"; fi
done

# ---- 4. the network: host loopback, the host's addresses, the gateway, abstract sockets ----
# An empty policy: nothing allowed, but a gateway to attack (without a policy none runs).
echo '{}' >"$WORK/empty-policy.json"
RN=("${R[@]}" --policy "$WORK/empty-policy.json")
gw=$("$SPACE" "${RN[@]}" -- sh -c "ip route | awk '/^default/ {print \$3}'")
[ -n "$gw" ] || fail "a sandbox with an empty policy has no route to its gateway"
out=$("$SPACE" "${RN[@]}" -- sh -c '
	port=$1; gw=$2; shift 2
	for a in 127.0.0.1 ::1 "$@" $gw; do escape-probe connect "$a" "$port"; done
	if [ -n "$gw" ]; then
		for h in "127.0.0.1:$port" "localhost:$port" "[::1]:$port" "$@"; do
			case $h in *:*) ;; *) h="$h:$port" ;; esac
			r=$(printf "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" "$h" | nc -w 3 "$gw" 80 2>&1 | head -c 200 | tr -d "\r" | head -1)
			echo "BLOCKED http via the gateway to $h: ${r:-no answer}"
		done
	fi
' sh "$port" "$gw" $host_addrs 2>&1)
count_probe "$out"
out=$("$SPACE" "${R[@]}" -- escape-probe abstract "escape-$token" 2>&1)
count_probe "$out"
# Whatever the guest believed, the listeners decide: not one connection may have arrived.
if [ -s "$WORK/accepted" ]; then escaped "host listeners reached" "$(cat "$WORK/accepted")"
else blocked "host listeners on 127.0.0.1, ${host_addrs:-no other address} and @escape-... saw no connection"; fi

# ---- 5. another sandbox: its network, its processes ----
new_sandbox
victim_sb=$sb
expect_rc 0 "$SPACE" exec "$victim_sb" "${S[@]}" -- sh -c '(nc -l -p 7777 >/tmp/got 2>&1 &) ; ip -4 -o addr show | awk "\$2 != \"lo\" {split(\$4, a, \"/\"); print a[1]}"'
victim_ip=$out
victim_pid=$(sb_pid "$victim_sb")
out=$("$SPACE" "${R[@]}" -- sh -c "
	for a in 127.0.0.1 $victim_ip; do escape-probe connect \$a 7777; done
	escape-probe kill $victim_pid; escape-probe ptrace $victim_pid" 2>&1)
count_probe "$out"
expect_rc 0 "$SPACE" exec "$victim_sb" "${S[@]}" -- sh -c 'cat /tmp/got 2>/dev/null; pidof nc >/dev/null && echo listening'
if [ "$out" = listening ]; then blocked "the other sandbox's listener got nothing and still runs"
else escaped "reached the other sandbox" "$out"; fi

# ---- 6. host processes: signals (kill -9 of host pid numbers), ptrace ----
out=$("$SPACE" "${R[@]}" -- sh -c "escape-probe kill $victim; escape-probe ptrace $victim; escape-probe kill $$; escape-probe kill 1
	kill -9 -1" 2>&1)
count_probe "$out"
if kill -0 "$victim" 2>/dev/null; then blocked "host process $victim survived the signals"
else escaped "host process $victim killed"; fi

# ---- 7. fork bomb: stops at the sandbox's pids limit, the host keeps forking ----
procs() { ls -d /proc/[0-9]* 2>/dev/null | wc -l; }
base=$(procs)
# The agent keeps answering while thousands of the sandbox's processes compete for its CPU and die into
# it as orphans: the exec timeout (12 s) ends the bomb well before its `sleep 20` would (exit 124).
# Memory enough that the pids limit binds first (4096 shells would pass the default 512 MiB, and the
# memory limit's OOM kill of the bomb's first shell would end it early, with 137).
t0=$(date +%s)
# The command's shell forks once, for the bomb's subshell, before any bomb runs, and then execs its sleep:
# a fork of its own that met the pids limit would end the run with 2 (a failed fork is fatal to sh).
"$SPACE" "${R[@]}" --memory 2048 --exec-timeout 12 -- sh -c '(b() { b | b & }; b) & exec sleep 20' >/dev/null 2>"$WORK/bomb.err" &
bomb=$!
peak=$base
while kill -0 "$bomb" 2>/dev/null; do n=$(procs); [ "$n" -gt "$peak" ] && peak=$n; sleep 0.3; done
wait "$bomb"
bomb_rc=$? bomb_s=$(($(date +%s) - t0))
[ "$bomb_rc" = 124 ] ||
	fail "the fork bomb's 12 s exec timeout: space run exited $bomb_rc after $bomb_s s (expected 124: killed before the bomb's sleep 20 ended): $(tail -c 300 "$WORK/bomb.err")"
true && /bin/true || fail "the host cannot fork after the fork bomb"
grown=$((peak - base))
if [ "$grown" -gt 20000 ]; then escaped "fork bomb" "the host gained $grown processes"
else blocked "fork bomb (host peak +$grown processes, bounded by the sandbox's pids limit)"; fi

# ---- 8. memory bomb: the sandbox's memory limit, not the host's ----
out=$("$SPACE" "${R[@]}" --memory 128 -- escape-probe membomb 2048 2>&1)
rc=$?
if echo "$out" | grep -q '^ESCAPED'; then escaped "memory bomb" "$(echo "$out" | tail -1)"
elif ! kill -0 "$victim" 2>/dev/null; then escaped "memory bomb" "a host process died"
else blocked "memory bomb: 2 GiB under --memory 128 ended with status $rc after $(echo "$out" | grep -c allocated) x 64 MiB"; fi

# ---- 9. disk fill: the sandbox's disk fills (its quota on a tree: EDQUOT; an image: ENOSPC), not the host's
# disk; tmpfs fills are memory ----
# What the host's disk gives this state dir: the pool's loop file (other tests share /tmp's free space).
pool_kib() { du -k "$STATE/pool.img" | cut -f1; }
pool_before=$(pool_kib)
new_sandbox --memory 128
filler=$sb
out=$("$SPACE" exec "$filler" "${S[@]}" -- sh -c 'dd if=/dev/zero of=/fill bs=1M 2>&1 | grep -i -m1 -E "no space|quota exceeded"; sync; dd if=/dev/zero of=/dev/shm/fill bs=1M count=1024 2>&1 | tail -1; dd if=/dev/zero of=/tmp/fill bs=1M count=1024 2>&1 | tail -1' 2>&1)
sync
used_mib=$((($(pool_kib) - pool_before) / 1024))
image_mib=$(($(stat -c %s "$STATE/pool/templates/tiny/rootfs.ext4") >> 20))
if [ "$used_mib" -gt $((image_mib + 64)) ] || ! echo "$out" | grep -q -E 'No space left|Disk quota exceeded'; then escaped "disk fill" "the host lost $used_mib MiB (image $image_mib MiB)"
else blocked "disk fill: $(echo "$out" | grep -o -m1 -E 'No space left on device|Disk quota exceeded') at the sandbox's $image_mib MiB disk; the pool file grew ${used_mib} MiB"; fi
if echo "$out" | grep -q '1024+0 records out'; then escaped "tmpfs fill" "1 GiB of tmpfs under a 128 MiB limit"
else blocked "tmpfs fill (/dev/shm, /tmp) bounded by the memory limit"; fi

# ---- 10. huge output streams: the host CLI stays bounded in memory, also with a stalled reader ----
# peak_rss PID [SECONDS]: the process's peak RSS in KiB, sampled until it exits (killed after SECONDS).
peak_rss() {
	local pid=$1 end=$((SECONDS + ${2:-600})) hwm=0 v
	while kill -0 "$pid" 2>/dev/null; do
		v=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null)
		[ -n "$v" ] && hwm=$v
		[ $SECONDS -ge $end ] && kill "$pid" 2>/dev/null
		sleep 0.2
	done
	wait "$pid" 2>/dev/null
	echo "$hwm"
}
"$SPACE" "${R[@]}" -- sh -c 'yes 0123456789abcdef | head -c 500000000' >/dev/null 2>&1 &
fast=$(peak_rss $!)
# A reader that stops reading: the CLI must stop reading the agent too, not buffer the stream.
mkfifo "$WORK/stall"
(exec 3<"$WORK/stall"; sleep 20) &
reader=$!
"$SPACE" "${R[@]}" -- yes 0123456789abcdef >"$WORK/stall" 2>/dev/null &
slow=$(peak_rss $! 12)
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
for m in "fast:$fast" "stalled:$slow"; do
	kib=${m#*:}
	if [ "${kib:-0}" -gt $((256 * 1024)) ]; then escaped "huge output (${m%%:*} reader)" "the CLI grew to $((kib / 1024)) MiB"
	else blocked "huge output, ${m%%:*} reader: the CLI peaked at $((kib / 1024)) MiB"; fi
done

# ---- 11. 10k connections to the agent socket: the agent survives and serves afterwards ----
new_sandbox
flooded=$sb
agent_pid=$(sb_pid "$flooded")
sock=$(find "$STATE" -path "*$flooded*" -name agent.sock | head -1)
[ -S "$sock" ] || fail "no agent socket for $flooded"
# Hold 10000 connections (each sending garbage) while a real request is made, then let them go.
flood=$(python3 - "$sock" "$SPACE" "$flooded" "$STATE" <<'EOF'
import resource, socket, subprocess, sys, time
sock, cli, sb, state = sys.argv[1:5]
resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
held, deadline = [], time.time() + 60
while len(held) < 10000 and time.time() < deadline:
    s = socket.socket(socket.AF_UNIX)
    s.setblocking(False)
    if s.connect_ex(sock) != 0:  # backlog full: give the agent time to accept
        s.close(); time.sleep(0.01); continue
    try: s.send(b"\xff" * 64)
    except OSError: pass
    held.append(s)
try:
    r = subprocess.run([cli, "exec", sb, "--state", state, "--", "echo", "alive"], capture_output=True, timeout=120)
    during = r.stdout.decode().strip() or ("status %d: %s" % (r.returncode, r.stderr.decode().strip()[:200]))
except subprocess.TimeoutExpired:
    during = "no answer in 120 s"
print("%d held; exec during the flood: %s" % (len(held), during))
EOF
)
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$agent_pid/status" 2>/dev/null || echo gone)
expect_rc 0 "$SPACE" exec "$flooded" "${S[@]}" -- echo alive
if [ "$out" = alive ] && [ "$(sb_pid "$flooded")" = "$agent_pid" ]; then
	blocked "10000 connections with garbage to the agent ($flood; agent RSS ${rss} KiB; serves afterwards)"
else escaped "agent flood" "the agent did not survive: $out"; fi

# ---- 12. the sandbox's log: whatever way to the agent's stdout remains, the host keeps at most its cap ----
# (space-logcap: 8 MiB in sandbox.log + sandbox.log.1). A lifetime makes the agent itself write a line at
# the end, after the jail's start lines: `space logs` must show both, in that order.
new_sandbox --timeout 8
logsb=$sb
expect_rc 0 "$SPACE" exec "$logsb" "${S[@]}" -- escape-probe logfill 64
echo "$out"
log_bytes() { local f t=0; for f in "$STATE/run/$logsb/sandbox.log" "$STATE/run/$logsb/sandbox.log.1"; do
	[ -f "$f" ] && t=$((t + $(stat -c %s "$f"))); done; echo $t; }
kept=$(log_bytes)
if [ "$kept" -gt $((8 << 20)) ]; then escaped "log fill through the agent's stdout" "the host keeps $kept bytes"
else blocked "log fill through the agent's stdout: the host keeps $kept bytes (cap 8 MiB)"; fi
logpid=$(sb_pid "$logsb")
for _ in $(seq 100); do kill -0 "$logpid" 2>/dev/null || break; sleep 0.2; done
kill -0 "$logpid" 2>/dev/null && fail "the sandbox outlived its 8 s lifetime"
expect_rc 0 "$SPACE" logs "$logsb" "${S[@]}"
start_line=$(echo "$out" | grep -n '^space-jail: ' | head -1 | cut -d: -f1)
agent_line=$(echo "$out" | grep -n "^space-agent: the sandbox's lifetime has ended" | head -1 | cut -d: -f1)
[ -n "$start_line" ] && [ -n "$agent_line" ] && [ "$start_line" -lt "$agent_line" ] ||
	fail "space logs lacks the jail's start lines or the agent's own line, in that order: $(echo "$out" | head -c 2000)"
[ "$(log_bytes)" -le $((8 << 20)) ] || fail "the log grew past its cap afterwards: $(log_bytes) bytes"

# ---- the host afterwards ----
for id in "${ids[@]}"; do "$SPACE" rm "$id" "${S[@]}" >/dev/null 2>&1; done
sleep 1
left=$(leaks_of "${ids[@]}")
[ -z "$left" ] || fail "sandboxes left things on the host: $left"
kill -0 "$victim" 2>/dev/null || fail "host process $victim is gone"
snapshot >"$WORK/host.after"
if ! diff -u "$WORK/host.before" "$WORK/host.after"; then
	fail "the host changed during the escape suite (diff above)"
fi
# The count is the suite's completion record: a run that lost attacks (a probe that died half way, a
# section that did not run) falls below the floor. 97 on 2026-12-03 on a host with one address besides
# loopback; each further address adds two (a connect and an HTTP request through the gateway), none
# takes two away. Raise it with the attacks you add.
escape_min_attacks=95
echo "escape suite: $attacks attacks, $escaped succeeded"
[ "$escaped" = 0 ] || exit 1
[ "$attacks" -ge "$escape_min_attacks" ] ||
	fail "$attacks attacks ran, fewer than the $escape_min_attacks this suite makes: some did not run"
