#!/bin/bash
# --json everywhere (docs/cli-json.md): a failing command prints one JSON document on stdout,
# {"error": {"code", "message"}}, with the exit status it has without --json (1 failure, 2 usage); usage
# errors of every command the help lists, argument errors, library errors; a partial `space rm`. And the
# documented top-level keys of commands that need no sandbox.
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
checks=0

# json_error WANT_RC WANT_CODE CMD...: stdout is one JSON document whose error has the code (a regex) and a
# message; stderr still has the message for people.
json_error() {
	local want=$1 code=$2; shift 2
	expect_rc "$want" "$@"
	checks=$((checks + 1))
	CODE=$code python3 -c '
import json, os, re, sys
d = json.loads(sys.stdin.read())
e = d["error"]
assert re.fullmatch(os.environ["CODE"], e["code"]), e
assert isinstance(e["message"], str) and e["message"], e
' <<<"$out" || fail "'$*': not a JSON error with code $code: stdout: $out; stderr: $err"
	[ -n "$err" ] || fail "'$*': nothing on stderr"
}
ERRNO='E[A-Z0-9]+'

NOSTATE=$(mktemp -d /tmp/space-test-XXXXXX)
on_exit "rm -rf '$NOSTATE'"
N=(--state "$NOSTATE/none")

# Usage errors before any command, and an unknown option of every listed command.
json_error 2 usage "$SPACE" --json
json_error 2 usage "$SPACE" --json no-such-command
json_error 2 usage "$SPACE" ls --json --state
cmds=$("$SPACE" --help | sed -n '/^commands:/,/^$/p' | awk 'NF > 1 { print $1 }')
[ "$(wc -w <<<"$cmds")" -ge 20 ] || fail "space --help lists too few commands: $cmds"
for c in $cmds; do
	json_error 2 usage "$SPACE" --json "${N[@]}" "$c" --no-such-option
	grep -q "\"usage\":.*space $c" <<<"$out" || fail "$c: the usage error does not carry its usage: $out"
done
# Bad values and missing arguments (the parsers' own checks).
json_error 2 usage "$SPACE" --json "${N[@]}" run --memory lots -- true
json_error 2 usage "$SPACE" --json "${N[@]}" create --timeout forever
json_error 2 usage "$SPACE" --json "${N[@]}" timeout sb-x soon
json_error 2 usage "$SPACE" --json "${N[@]}" fork cp-x --count 0
json_error 2 usage "$SPACE" --json "${N[@]}" rm
json_error 2 usage "$SPACE" --json "${N[@]}" exec sb-x
json_error 2 usage "$SPACE" --json "${N[@]}" template import
json_error 2 usage "$SPACE" --json "${N[@]}" cp a b
json_error 2 usage "$SPACE" --json "${N[@]}" serve --listen nowhere
json_error 2 usage "$SPACE" --json "${N[@]}" run --allow
# Library errors on a state directory that is not there.
json_error 1 ENOMEDIUM "$SPACE" --json "${N[@]}" ls
json_error 1 "$ERRNO" "$SPACE" --json "${N[@]}" template ls

# An initialized state directory: what is not there is ENOENT, and the rest fails as the library says.
make_state 1G
S=(--state "$STATE")
json_error 1 ENOENT "$SPACE" --json "${S[@]}" rm sb-nosuchsandbox0
json_error 1 ENOENT "$SPACE" --json "${S[@]}" events sb-nosuchsandbox0
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" pause sb-nosuchsandbox0
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" stats sb-nosuchsandbox0
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" exec sb-nosuchsandbox0 -- true
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" timeout sb-nosuchsandbox0 10m
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" logs sb-nosuchsandbox0
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" cp sb-nosuchsandbox0:/etc/hostname "$NOSTATE/x"
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" rollback sb-nosuchsandbox0 cp-x
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" fork cp-nosuchcheckpoint
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" checkpoint rm cp-nosuchcheckpoint
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" template rm nosuchtemplate
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" template export nosuchtemplate -o "$NOSTATE/t.tar"
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" create --template nosuchtemplate --isolation jail
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" secret rm nosuchsecret
json_error 1 ENOENT env -u NOSUCHVAR "$SPACE" --json "${S[@]}" secret set s1 --from-env NOSUCHVAR
json_error 1 "$ERRNO" "$SPACE" --json "${S[@]}" template import t1 --rootfs "$NOSTATE/none"
if "$SPACE" apikey ls "${S[@]}" >/dev/null 2>&1; then # a build with the server
	json_error 1 ENOENT "$SPACE" --json "${S[@]}" apikey rm nosuchkey
fi
# Without --json the same failure is text only: nothing on stdout.
expect_rc 1 "$SPACE" "${S[@]}" rm sb-nosuchsandbox0
[ -z "$out" ] || fail "rm without --json printed on stdout: $out"
checks=$((checks + 1))

# Success documents: the documented top-level keys (docs/cli-json.md).
keys() {
	local what=$1 kind=$2 want=$3; shift 3
	expect_rc "${RC:-0}" "$@"
	checks=$((checks + 1))
	KIND=$kind WANT=$want python3 -c '
import json, os, sys
d = json.loads(sys.stdin.read())
want = set(os.environ["WANT"].split())
if os.environ["KIND"] == "list":
    assert isinstance(d, list), d
    items = d
else:
    assert isinstance(d, dict), d
    items = [d]
for i in items:
    missing = want - set(i)
    assert not missing, "missing %s in %r" % (missing, i)
' <<<"$out" || fail "$what: not the documented shape: $out"
}
keys version object "version" "$SPACE" --json version
keys "pool info" object "state_dir pool loop_image isolation total_bytes free_bytes identity_map_allowed" \
	"$SPACE" --json "${S[@]}" pool info
keys "ls (empty)" list "" "$SPACE" --json "${S[@]}" ls
keys "secret ls" list "" "$SPACE" --json "${S[@]}" secret ls
keys "checkpoints" list "" "$SPACE" --json "${S[@]}" checkpoints
# doctor exits 1 when nothing is usable; its document is the same.
expect_rc 0 true
"$SPACE" --json "${S[@]}" doctor >"$NOSTATE/doctor.json" 2>/dev/null
RC=$? keys doctor object "checks vm jail" cat "$NOSTATE/doctor.json"

# A template and a sandbox (jail), for template ls, ls and a partial rm.
if [ -x "${SPACE_AGENT_PATH:-}" ] && unshare --user --pid --mount --net --fork true 2>/dev/null &&
	command -v busybox >/dev/null; then
	export SPACE_QUIET_JAIL=1
	make_busybox_tree "$NOSTATE/tree"
	expect_rc 0 "$SPACE" template import tiny --rootfs "$NOSTATE/tree" "${S[@]}"
	keys "template ls" list "name path rootfs rootfs_bytes kernel initrd created_ms sandboxes checkpoints image snapshots snapshot pool_size pooled" \
		"$SPACE" --json "${S[@]}" template ls
	keys create object "id template isolation status cpus memory_mib created_ms path" \
		"$SPACE" --json "${S[@]}" create --template tiny --isolation jail
	id=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])' <<<"$out")
	keys stats object "id time_ms cpus cpu_pct cpu_ns memory_bytes memory_cache_bytes memory_limit_bytes disk_used_bytes disk_total_bytes" \
		"$SPACE" --json "${S[@]}" stats "$id"
	keys ls list "id template isolation status cpus memory_mib created_ms updated_ms path" \
		"$SPACE" --json "${S[@]}" ls
	# One removed, one not there: one document with both, exit 1.
	expect_rc 1 "$SPACE" --json "${S[@]}" rm "$id" sb-nosuchsandbox0
	checks=$((checks + 1))
	ID=$id python3 -c '
import json, os, sys
d = json.loads(sys.stdin.read())
assert d["removed"] == [os.environ["ID"]], d
assert d["error"]["code"] == "ENOENT" and "sb-nosuchsandbox0" in d["error"]["message"], d
' <<<"$out" || fail "partial rm: $out"
else
	echo "note: no agent, namespaces or busybox here: template ls, create and ls shapes not checked"
fi
echo "json-errors: $checks checks, 0 failed"
