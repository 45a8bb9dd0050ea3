#!/bin/bash
# `space cp` out of a jail sandbox is bounded (issue 14, item 3): a 1 TiB sparse file is refused at once
# with the cap error, nothing is left in the target directory and the host's disk does not fill; a sparse
# file under the cap stays sparse and identical; SIGINT or SIGTERM during a copy leaves no partial file;
# an existing destination survives every failed copy; --max-size and --json work.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
[ -n "${SPACE_AGENT_PATH:-}" ] || skip "configured without the agent"
[ -x "$SPACE_AGENT_PATH" ] || fail "space-agent not built ($SPACE_AGENT_PATH)"
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
export SPACE_QUIET_JAIL=1

make_state 4G
WORK=$(mktemp -d /tmp/space-cp-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --size 1G --state "$STATE"
S=(--state "$STATE")
expect_rc 0 "$SPACE" create --template tiny --isolation jail "${S[@]}"
id=$out
on_exit "'$SPACE' rm '$id' --state '$STATE'"
OUT=$WORK/out
mkdir "$OUT"
checks=0
check() { checks=$((checks + 1)); }
# The target directory holds exactly the names given (nothing partial, no temporary names).
only_in_out() {
	local got want
	got=$(ls -A "$OUT" | sort | tr '\n' ' ')
	want=$(printf '%s\n' "$@" | sed '/^$/d' | sort | tr '\n' ' ')
	[ "$got" = "$want" ] || fail "$1: target directory holds '$got', wanted '$want'"
	check
}
echo keep-me >"$OUT/existing"

# 1. A 1 TiB sparse file: refused before a byte is written, with the cap in the message; the host's disk
#    usage does not grow and an existing destination is untouched.
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- truncate -s 1099511627776 /root/huge
used_before=$(df --output=used -B1M "$OUT" | tail -1)
t0=$(date +%s%N)
expect_rc 1 "$SPACE" cp "$id:/root/huge" "$OUT/huge" "${S[@]}"
ms=$((($(date +%s%N) - t0) / 1000000))
echo "$err" | grep -q "larger than the copy limit of 1.0 GiB" || fail "no cap error: $err"
echo "$err" | grep -q -- "--max-size" || fail "the error does not name --max-size: $err"
check
[ "$ms" -lt 10000 ] || fail "refusing a 1 TiB file took $ms ms"
check
only_in_out existing
expect_rc 1 "$SPACE" cp "$id:/root/huge" "$OUT/existing" "${S[@]}"
[ "$(cat "$OUT/existing")" = keep-me ] || fail "a failed copy changed the existing destination"
check
only_in_out existing
expect_rc 1 "$SPACE" cp --max-size 2G "$id:/root/huge" "$OUT/huge" "${S[@]}"
echo "$err" | grep -q "copy limit of 2.0 GiB" || fail "--max-size not applied: $err"
check
used_after=$(df --output=used -B1M "$OUT" | tail -1)
# Other tests may share this filesystem: a generous margin, far below what an unbounded copy writes.
[ $((used_after - used_before)) -lt 512 ] || fail "host disk usage grew by $((used_after - used_before)) MiB"
check
echo "refused 1 TiB in $ms ms; disk use $used_before -> $used_after MiB"

# 2. A 50 MiB sparse file with a little data: the copy stays sparse and is byte-identical.
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'truncate -s 52428800 /root/sp &&
	printf head | dd of=/root/sp conv=notrunc 2>/dev/null &&
	printf middle | dd of=/root/sp bs=1 seek=20000000 conv=notrunc 2>/dev/null &&
	printf tail | dd of=/root/sp bs=1 seek=52428796 conv=notrunc 2>/dev/null'
truncate -s 50M "$WORK/sp.ref"
printf head | dd of="$WORK/sp.ref" conv=notrunc 2>/dev/null
printf middle | dd of="$WORK/sp.ref" bs=1 seek=20000000 conv=notrunc 2>/dev/null
printf tail | dd of="$WORK/sp.ref" bs=1 seek=52428796 conv=notrunc 2>/dev/null
expect_rc 0 "$SPACE" cp --json "$id:/root/sp" "$OUT/sp" "${S[@]}"
echo "$out" | grep -q '"bytes":[[:space:]]*52428800' || fail "--json output: $out"
check
cmp "$WORK/sp.ref" "$OUT/sp" || fail "the sparse copy differs"
check
kib=$(du -k "$OUT/sp" | cut -f1)
[ "$kib" -lt 1024 ] || fail "a 50 MiB file with 14 bytes of data takes $kib KiB on the host"
check
echo "50 MiB sparse file copied: $kib KiB on the host"
# Into a directory: under its own name.
expect_rc 0 "$SPACE" cp "$id:/root/sp" "$WORK/" "${S[@]}"
cmp "$WORK/sp.ref" "$WORK/sp" || fail "copy into a directory"
check
# Under the cap of --max-size: refused up front with the sandbox's size in the message.
expect_rc 1 "$SPACE" cp --max-size 10M "$id:/root/sp" "$OUT/sp" "${S[@]}"
echo "$err" | grep -q "copy limit of 10.0 MiB (its size is 50.0 MiB)" || fail "--max-size 10M: $err"
check
cmp "$WORK/sp.ref" "$OUT/sp" || fail "a refused copy changed the existing destination"
check
expect_rc 2 "$SPACE" cp --max-size 0 "$id:/root/sp" "$OUT/x" "${S[@]}"
expect_rc 2 "$SPACE" cp --max-size lots "$id:/root/sp" "$OUT/x" "${S[@]}"
check
only_in_out existing sp

# 3. SIGINT and SIGTERM during a copy: no partial file, the existing destination kept. The copy streams
#    1000 MiB (a sparse file with data at the start) and is stopped (SIGSTOP) as soon as its file holds
#    bytes, so it is reliably mid-way when the signal comes.
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'truncate -s 1048576000 /root/slow &&
	printf head | dd of=/root/slow conv=notrunc 2>/dev/null'
# The file a copy writes into has some bytes: the unnamed one (O_TMPFILE, "DIR/#INODE (deleted)"), or
# the fallback's named one (DIR/.NAME.space-cp-XXXXXX).
tmpfile_has_data() {
	local fd
	for fd in /proc/"$1"/fd/*; do
		case "$(readlink "$fd")" in
		"$OUT"/*deleted*) TMPKIND=unnamed ;;
		"$OUT"/.*.space-cp-*) TMPKIND=named ;;
		*) continue ;;
		esac
		[ "$(stat -L -c %s "$fd" 2>/dev/null || echo 0)" -gt 0 ] && return 0
	done
	return 1
}
running() { [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
# interrupt SIG KIND [ENV...]: a copy over "existing" into a KIND temporary file, stopped mid-way, then
# sent SIG.
interrupt() {
	local sig=$1 kind=$2 cp_pid rc
	shift 2
	# A script's background jobs start with SIGINT ignored: give the copy the default a terminal's has.
	env --default-signal=INT "$@" "$SPACE" cp "$id:/root/slow" "$OUT/existing" "${S[@]}" 2>"$WORK/cp.err" &
	cp_pid=$!
	on_exit "kill_ours -9 $cp_pid"
	for _ in $(seq 1000); do tmpfile_has_data "$cp_pid" && break; running "$cp_pid" || break; sleep 0.005; done
	kill -STOP "$cp_pid"
	running "$cp_pid" || fail "the copy ended before SIG$sig could reach it ($(cat "$WORK/cp.err"))"
	tmpfile_has_data "$cp_pid" || fail "the copy wrote nothing before the signal"
	[ "$TMPKIND" = "$kind" ] || fail "the copy wrote into a $TMPKIND temporary file, not a $kind one"
	kill -"$sig" "$cp_pid"
	kill -CONT "$cp_pid"
	for _ in $(seq 100); do running "$cp_pid" || break; sleep 0.1; done
	running "$cp_pid" && fail "SIG$sig did not end the copy"
	wait "$cp_pid"; rc=$?
	[ "$rc" -ne 0 ] || fail "SIG$sig: the copy exited 0"
	check
	[ "$(cat "$OUT/existing")" = keep-me ] || fail "SIG$sig: the existing destination changed"
	check
	only_in_out existing sp
	echo "SIG$sig during a copy (temporary file: $kind): exit $rc, nothing left"
}
interrupt INT unnamed
interrupt TERM unnamed

# 4. Where the filesystem has no O_TMPFILE (simulated: an LD_PRELOAD shim fails it with EOPNOTSUPP) the
#    named temporary file of the fallback is removed on failure and on signals, and a copy still works.
[ -f "${1:-}" ] || fail "the O_TMPFILE shim was not given (meson passes it)"
SHIM=$(realpath "$1")
NT=(LD_PRELOAD="$SHIM" ASAN_OPTIONS=verify_asan_link_order=0)
expect_rc 0 env "${NT[@]}" "$SPACE" cp "$id:/root/sp" "$OUT/sp" "${S[@]}"
cmp "$WORK/sp.ref" "$OUT/sp" || fail "fallback: the copy differs"
check
expect_rc 1 env "${NT[@]}" "$SPACE" cp "$id:/root/huge" "$OUT/existing" "${S[@]}"
echo "$err" | grep -q "copy limit" || fail "fallback: no cap error: $err"
[ "$(cat "$OUT/existing")" = keep-me ] || fail "fallback: a failed copy changed the existing destination"
check
only_in_out existing sp
interrupt INT named "${NT[@]}"
interrupt TERM named "${NT[@]}"

expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- sh -c 'yes 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef | head -c 419430400 >/root/big'
# The same file within --max-size, whole.
expect_rc 0 "$SPACE" cp "$id:/root/big" "$OUT/big" "${S[@]}"
[ "$(stat -c %s "$OUT/big")" = $((400 << 20)) ] || fail "400 MiB copy has the wrong size"
check
expect_rc 1 "$SPACE" cp --max-size 100M "$id:/root/big" "$OUT/big" "${S[@]}"
[ "$(stat -c %s "$OUT/big")" = $((400 << 20)) ] || fail "a refused copy changed the existing destination"
check
only_in_out existing sp big

echo "cp-bounds: $checks checks passed"
[ "$checks" = 33 ] || fail "ran $checks checks, expected 33"
echo PASS
