#!/bin/bash
# The warm pool, jail mode, through the CLI: set-pool + fill keeps paused sandboxes ready; a default create
# takes one (its hostname is its own id) and a fill tops the pool up again; pooled sandboxes are not in
# `space ls`; a create with options does not take one; template rm drains the pool; nothing leaks.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
export SPACE_QUIET_JAIL=1

make_state 2G
S=(--state "$STATE")
expect_rc 0 "$SPACE" init --isolation jail "${S[@]}"
WORK=$(mktemp -d /tmp/space-work-XXXXXX)
on_exit "rm -rf '$WORK'"
make_busybox_tree "$WORK/tree"
expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" "${S[@]}"
subvols() { ls "$STATE/pool/sandboxes" | sort; }
# Pooled sandboxes are in no listing: remove whatever subvolume is left, before the pool is unmounted.
on_exit 'for x in $(ls "$STATE/pool/sandboxes" 2>/dev/null); do "$SPACE" rm "$x" --state "$STATE"; done' 
pooled() { "$SPACE" template ls --json "${S[@]}" | tr -d ' \t\n' | grep -o '"pooled":[0-9]*' | cut -d: -f2; }
ms() { date +%s%3N; }
all_ids=()

# Filling: two paused sandboxes, hidden from `space ls`.
expect_rc 2 "$SPACE" template set-pool tiny 65 "${S[@]}"
expect_rc 1 "$SPACE" template set-pool nosuch 1 "${S[@]}"
expect_rc 0 "$SPACE" template set-pool tiny 2 "${S[@]}"
expect_rc 0 "$SPACE" pool fill "${S[@]}"
[ "$out" = "2 sandboxes created and pooled" ] || fail "fill: $out"
[ "$(pooled)" = 2 ] || fail "pooled after fill: $(pooled)"
expect_rc 0 "$SPACE" template ls "${S[@]}"
echo "$out" | grep -Eq '^tiny .* 2/2 +0 ' || fail "template ls does not show the pool: $out"
expect_rc 0 "$SPACE" ls --json "${S[@]}"
[ "$out" = "[]" ] || fail "pooled sandboxes listed as user sandboxes: $out"
mapfile -t pool_ids < <(subvols)
[ "${#pool_ids[@]}" = 2 ] || fail "subvolumes after fill: ${pool_ids[*]}"
all_ids+=("${pool_ids[@]}")
for id in "${pool_ids[@]}"; do on_exit "'$SPACE' rm '$id' --state '$STATE'"; done
expect_rc 0 "$SPACE" pool fill tiny "${S[@]}"
[ "$out" = "0 sandboxes created and pooled" ] || fail "fill of a full pool: $out"

# A default create takes one: fast, running, its hostname its id, and it is a user sandbox now.
t0=$(ms)
expect_rc 0 "$SPACE" create --template tiny "${S[@]}"
t1=$(ms)
id=$out
on_exit "'$SPACE' rm '$id' --state '$STATE'"
printf '%s\n' "${pool_ids[@]}" | grep -qx "$id" || fail "create did not take a pooled sandbox: $id (pool ${pool_ids[*]})"
expect_rc 0 "$SPACE" exec "$id" "${S[@]}" -- hostname
[ "$out" = "$id" ] || fail "hostname of a handed-out sandbox: '$out', want $id"
expect_rc 0 "$SPACE" ls --json "${S[@]}"
echo "$out" | grep -q "\"$id\"" || fail "handed-out sandbox not listed: $out"
echo "$out" | grep -q '"running"' || fail "handed-out sandbox not running: $out"
[ "$(pooled)" = 1 ] || fail "pooled after a hand-out: $(pooled)"

# The pool refills to 2; a create with options (env) does not take from it.
expect_rc 0 "$SPACE" pool fill "${S[@]}"
[ "$out" = "1 sandbox created and pooled" ] || fail "refill: $out"
[ "$(pooled)" = 2 ] || fail "pooled after refill: $(pooled)"
mapfile -t now < <(subvols)
all_ids+=("${now[@]}")
for x in "${now[@]}"; do on_exit "'$SPACE' rm '$x' --state '$STATE'"; done
t2=$(ms)
expect_rc 0 "$SPACE" create --template tiny --env A=b "${S[@]}"
t3=$(ms)
id2=$out
all_ids+=("$id2")
on_exit "'$SPACE' rm '$id2' --state '$STATE'"
printf '%s\n' "${now[@]}" | grep -qx "$id2" && fail "a create with --env took a pooled sandbox"
[ "$(pooled)" = 2 ] || fail "pooled after a create with options: $(pooled)"
echo "create from the pool: $((t1 - t0)) ms, a cold create: $((t3 - t2)) ms (CLI wall time)"

# A pooled sandbox that died is replaced by the next fill.
victim=$(printf '%s\n' "${now[@]}" | grep -vx "$id" | grep -vx "$id2" | head -1)
vpid=$(pgrep -f -- "--hostname $victim( |\$)" | head -1)
[ -n "$vpid" ] || fail "no process of pooled sandbox $victim"
kill -9 "$vpid"
# Frozen processes die only once thawed (cgroup v1 freezer, v2 cgroup.freeze).
for f in $(find /sys/fs/cgroup -path "*$victim*" -name freezer.state 2>/dev/null); do echo THAWED >"$f"; done
for f in $(find /sys/fs/cgroup -path "*$victim*" -name cgroup.freeze 2>/dev/null); do echo 0 >"$f"; done
for _ in $(seq 50); do kill -0 "$vpid" 2>/dev/null || break; sleep 0.1; done
expect_rc 0 "$SPACE" pool fill "${S[@]}"
[ "$out" = "1 sandbox created and pooled" ] || fail "fill after a pooled sandbox died: $out"
mapfile -t now < <(subvols)
all_ids+=("${now[@]}")
for x in "${now[@]}"; do on_exit "'$SPACE' rm '$x' --state '$STATE'"; done
printf '%s\n' "${now[@]}" | grep -qx "$victim" && fail "dead pooled sandbox $victim was kept"

# `space serve` refills in the background after a hand-out.
"$SPACE" serve --listen 127.0.0.1:0 "${S[@]}" 2>"$WORK/serve.log" &
spid=$!
on_exit "kill_ours $spid; wait $spid"
expect_rc 0 "$SPACE" create --template tiny "${S[@]}"
id3=$out
on_exit "'$SPACE' rm '$id3' --state '$STATE'"
for _ in $(seq 100); do [ "$(pooled)" = 2 ] && break; sleep 0.1; done
[ "$(pooled)" = 2 ] || fail "space serve did not refill the pool: $(pooled); $(cat "$WORK/serve.log")"
kill "$spid"
wait "$spid"
mapfile -t now < <(subvols)
all_ids+=("${now[@]}")
expect_rc 0 "$SPACE" rm "$id3" "${S[@]}"

# template rm refuses while user sandboxes use it, and drains the pool when they are gone.
expect_rc 1 "$SPACE" template rm tiny "${S[@]}"
echo "$err" | grep -q "used by 2 sandbox" || fail "template rm refusal: $err"
expect_rc 0 "$SPACE" rm "$id" "$id2" "${S[@]}"
expect_rc 0 "$SPACE" template rm tiny "${S[@]}"
[ -z "$(subvols)" ] || fail "sandbox subvolumes left after template rm: $(subvols)"

# set-pool 0 drains too (on a second template).
expect_rc 0 "$SPACE" template import tiny2 --rootfs "$WORK/tree" "${S[@]}"
expect_rc 0 "$SPACE" template set-pool tiny2 1 "${S[@]}"
expect_rc 0 "$SPACE" pool fill tiny2 "${S[@]}"
mapfile -t now < <(subvols)
all_ids+=("${now[@]}")
for x in "${now[@]}"; do on_exit "'$SPACE' rm '$x' --state '$STATE'"; done
expect_rc 0 "$SPACE" template set-pool tiny2 0 "${S[@]}"
[ -z "$(subvols)" ] || fail "set-pool 0 left: $(subvols)"
expect_rc 0 "$SPACE" pool fill "${S[@]}"
[ "$out" = "0 sandboxes created and pooled" ] || fail "fill after set-pool 0: $out"

left=$(leaks_of "${all_ids[@]}")
[ -z "$left" ] || fail "pooled sandboxes left things behind: $left"
echo "pool: ok"
