#!/bin/bash
# The sandbox lifecycle through the CLI, in jail mode, with real programs: exit codes and streams,
# isolation a user can see, files in and out, recovery after crashes, lifetimes, and no leaks.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
export SPACE_QUIET_JAIL=1

make_state 4G
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
echo original >"$WORK/tree/etc/marker"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
S=(--state "$STATE")
R=(run --template tiny --isolation jail --state "$STATE")

# Exit codes and streams.
expect_rc 3 "$SPACE" "${R[@]}" -- sh -c 'exit 3'
expect_rc 0 "$SPACE" "${R[@]}" -- sh -c 'echo to-out; echo to-err >&2'
[ "$out" = to-out ] || fail "stdout: '$out'"
echo "$err" | grep -q '^to-err$' || fail "stderr lost: '$err'"
echo "$out" | grep -q to-err && fail "stderr leaked into stdout"
# A signal ends the command: 128 + signal number, like a shell.
expect_rc 143 "$SPACE" "${R[@]}" -- sh -c 'kill -TERM $$; sleep 5'

# What a user sees inside.
host_marker=$(mktemp /tmp/space-host-marker-XXXXXX)
on_exit "rm -f '$host_marker'"
expect_rc 0 "$SPACE" "${R[@]}" -- sh -c "tr '\0' ' ' </proc/1/cmdline; echo; test -e $host_marker && echo HOST-VISIBLE; ls /; ip -o link; hostname"
echo "$out" | head -1 | grep -q '^space-agent' || fail "PID 1 is not the agent: $out"
echo "$out" | grep -q HOST-VISIBLE && fail "host file visible inside"
echo "$out" | grep -qx work && fail "host directories visible inside: $out"
# Without a policy nothing leaves: only loopback, and no gateway runs.
links=$(echo "$out" | grep -c ': <' || true)
[ "$links" = 1 ] && echo "$out" | grep -q '1: lo' || fail "interfaces other than lo inside without a policy: $out"
# An empty policy: the same nothing allowed, but a gateway behind eth0 records the attempts.
echo '{}' >"$host_marker.policy"
on_exit "rm -f '$host_marker.policy'"
expect_rc 0 "$SPACE" "${R[@]}" --policy "$host_marker.policy" -- ip -o link
links=$(echo "$out" | grep -c ': <' || true)
[ "$links" = 2 ] && echo "$out" | grep -q '1: lo' && echo "$out" | grep -q ': eth0@' ||
	fail "an empty policy: interfaces other than lo and the gateway's eth0 inside: $out"
expect_rc 0 "$SPACE" "${R[@]}" --hostname box1 -- hostname
[ "$out" = box1 ] || fail "hostname: $out"

# Writes stay in the sandbox: the template is unchanged.
expect_rc 0 "$SPACE" "${R[@]}" -- sh -c 'echo changed >/etc/marker; rm /bin/ls; sync'
debugfs -R 'cat /etc/marker' "$STATE/pool/templates/tiny/rootfs.ext4" 2>/dev/null | grep -qx original ||
	fail "template changed by a sandbox"
expect_rc 0 "$SPACE" "${R[@]}" -- cat /etc/marker
[ "$out" = original ] || fail "a new sandbox saw another's writes: $out"

# Environment and working directory.
expect_rc 0 "$SPACE" "${R[@]}" --env FOO=bar --cwd /tmp -- sh -c 'echo $FOO $(pwd)'
[ "$out" = "bar /tmp" ] || fail "env/cwd: $out"

# A missing command: clear error, exit 127 like a shell.
expect_rc 127 "$SPACE" "${R[@]}" -- no-such-command
echo "$err" | grep -q "no-such-command" || fail "missing command error: $err"

# create / exec / cp / rm, with stdin and a 50 MiB file both ways.
expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
id=$out
on_exit "'$SPACE' rm '$id' --state '$STATE'"
echo "$id" | grep -Eq '^sb-[a-z2-7]{16}$' || fail "bad id: $id"
expect_rc 0 "$SPACE" ls --json "${S[@]}"
echo "$out" | grep -q "\"$id\"" || fail "ls --json lacks $id"
echo "$out" | grep -q '"running"' || fail "not running: $out"
out=$(echo piped-input | "$SPACE" exec -i "$id" "${S[@]}" -- cat) || fail "exec -i failed"
[ "$out" = piped-input ] || fail "stdin: $out"
head -c 50M /dev/urandom >"$WORK/big"
expect_rc 0 "$SPACE" cp "$WORK/big" "$id:/root/dir/big" "${S[@]}"
expect_rc 0 "$SPACE" cp "$id:/root/dir/big" "$WORK/big.back" "${S[@]}"
[ "$(sha256sum <"$WORK/big")" = "$(sha256sum <"$WORK/big.back")" ] || fail "cp round trip changed the file"
expect_rc 1 "$SPACE" cp "$id:/nonexistent" "$WORK/x" "${S[@]}"
[ ! -e "$WORK/x" ] || fail "failed cp left a file"
expect_rc 2 "$SPACE" cp "$WORK/big" "$WORK/big2" "${S[@]}"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'sleep 60 >/dev/null 2>&1 &'
expect_rc 0 "$SPACE" rm "$id" "${S[@]}"
expect_rc 1 "$SPACE" exec "$id" "${S[@]}" -- true
expect_rc 1 "$SPACE" rm "$id" "${S[@]}"

# Ctrl-C reaches the command.
"$SPACE" "${R[@]}" -- sh -c 'trap "echo got-int; exit 7" INT; echo ready; while :; do sleep 0.1; done' >"$WORK/int.out" 2>&1 &
cli=$!
for _ in $(seq 100); do grep -q ready "$WORK/int.out" && break; sleep 0.1; done
kill -INT "$cli"
wait "$cli"; rc=$?
[ "$rc" = 7 ] && grep -q got-int "$WORK/int.out" || fail "SIGINT not forwarded (rc $rc): $(cat "$WORK/int.out")"

# The host process killed mid-run: its sandbox is tethered to it and ends too (issue 20; orphans.sh has
# the details); the next listing shows nothing left.
"$SPACE" "${R[@]}" -- sleep 300 >/dev/null 2>&1 &
cli=$!
for _ in $(seq 100); do "$SPACE" ls --json "${S[@]}" | grep -q '"running"' && break; sleep 0.1; done
id=$("$SPACE" ls --json "${S[@]}" | sed -n 's/.*"id":[[:space:]]*"\(sb-[a-z2-7]*\)".*/\1/p' | head -1)
[ -n "$id" ] || fail "sandbox of the run is not listed"
kill -9 "$cli"; wait "$cli" 2>/dev/null
expect_rc 0 "$SPACE" ls "${S[@]}"
echo "$out" | grep -q "$id" && fail "the sandbox of a killed run is still listed: $out"
expect_rc 0 "$SPACE" rm -f "$id" "${S[@]}"
# And the sandbox's own PID 1 killed: marked failed, then removable.
expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
id=$out
pid=$("$SPACE" ls --json "${S[@]}" | grep -A12 "\"$id\"" | sed -n 's/.*"pid":[[:space:]]*\([0-9]*\).*/\1/p' | head -1)
[ -n "$pid" ] && [ "$pid" -gt 1 ] || fail "no pid for $id"
kill -9 "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
expect_rc 0 "$SPACE" ls "${S[@]}"
echo "$out" | grep "$id" | grep -q failed || fail "dead sandbox not marked failed: $out"
expect_rc 0 "$SPACE" rm "$id" "${S[@]}"

# Lifetimes: an expired sandbox stops by itself (no host process needed) and is reclaimed.
expect_rc 0 "$SPACE" create --template tiny --isolation jail --timeout 2 --json "${S[@]}"
id=$(echo "$out" | sed -n 's/.*"id":[[:space:]]*"\(sb-[a-z2-7]*\)".*/\1/p')
pid=$(echo "$out" | sed -n 's/.*"pid":[[:space:]]*\([0-9]*\).*/\1/p')
kill -0 "$pid" || fail "sandbox with a lifetime is not running"
for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "sandbox still running after its lifetime"
expect_rc 0 "$SPACE" ls "${S[@]}"
echo "$out" | grep -q "$id" && fail "expired sandbox still listed: $out"
[ ! -e "$STATE/pool/sandboxes/$id" ] || fail "expired sandbox's disk not reclaimed"

# vm isolation on a host without usable KVM fails fast and says why.
if [ ! -e /dev/kvm ]; then
	t0=$(date +%s%N)
	expect_rc 1 "$SPACE" run --template tiny --isolation vm "${S[@]}" -- true
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000)) -lt 2000 ] || fail "vm refusal took $(((t1 - t0) / 1000000)) ms"
	echo "$err" | grep -q "/dev/kvm" || fail "vm refusal does not name the cause: $err"
	echo "$err" | grep -q "jail" || fail "vm refusal does not say what to do: $err"
fi

# 20 sandboxes created and destroyed leave nothing behind.
ids=() pids=()
for i in $(seq 20); do
	expect_rc 0 "$SPACE" create --template tiny --isolation jail --json "${S[@]}"
	id=$(echo "$out" | sed -n 's/.*"id":[[:space:]]*"\(sb-[a-z2-7]*\)".*/\1/p')
	pid=$(echo "$out" | sed -n 's/.*"pid":[[:space:]]*\([0-9]*\).*/\1/p')
	[ -n "$id" ] && [ -n "$pid" ] || fail "create --json: $out"
	ids+=("$id") pids+=("$pid")
	expect_rc 0 "$SPACE" rm "$id" "${S[@]}"
done
left=$(leaks_of "${ids[@]}")
[ -z "$left" ] || fail "sandboxes left things behind: $left"
for pid in "${pids[@]}"; do
	[ -e "/proc/$pid" ] && grep -q space-agent "/proc/$pid/cmdline" 2>/dev/null && fail "sandbox process $pid still running"
done
[ -z "$(ls -A "$STATE/pool/sandboxes")" ] || fail "sandbox subvolumes left: $(ls "$STATE/pool/sandboxes")"
[ -z "$(ls -A "$STATE/run" 2>/dev/null)" ] || fail "runtime dirs left: $(ls "$STATE/run")"
echo "sandbox lifecycle: ok"
