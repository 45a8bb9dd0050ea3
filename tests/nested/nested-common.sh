# Shared by the nested suite's scripts (sourced). Finds nested-kvm beside the source tree
# ($SPACE_SOURCE_DIR/../shared/tools/nested-kvm, or $NESTED_KVM) and skips (77) when it cannot run; then
# nested-judge.sh: nested_run (the run, retried only for the emulator's failures) and nested_judge /
# nested_report (a run passes only by its completion record, "DONE checks=N").
nested_tool=${NESTED_KVM:-${SPACE_SOURCE_DIR:?}/../shared/tools/nested-kvm}
if [ ! -x "$nested_tool" ]; then
	echo "SKIP: nested-kvm not found at $nested_tool"
	exit 77
fi
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: nested-kvm needs root"
	exit 77
fi
nested_cache=${NESTED_KVM_CACHE:-/var/cache/nested-kvm}
. "${SPACE_SOURCE_DIR:?}/tests/nested/nested-judge.sh"

# nested_need_built PATH WHAT: a program of ours the test needs. Missing, the build is broken: a failure,
# never a skip.
nested_need_built() {
	[ -x "$1" ] && return 0
	echo "FAIL: $2 not built (${1:-no path given}): a missing build product fails the test"
	exit 1
}

# nested_helper_env: export lines for an inside script (expanded into its here-document), naming the
# helper programs of this build that the meson test environment gave: inside nested-kvm nothing is installed,
# so a helper the library starts (space-unpack for an import, space-logcap, ...) must be found by its path.
nested_helper_env() {
	for _nh_var in SPACE_AGENT_PATH SPACE_VMM_PATH SPACE_GATEWAY_PATH SPACE_SNAPD_PATH SPACE_LOGCAP_PATH \
		SPACE_UNPACK_PATH; do
		eval "_nh_val=\${$_nh_var:-}"
		[ -n "$_nh_val" ] && printf "export %s='%s'\n" "$_nh_var" "$_nh_val"
	done
	return 0
}

# nested_kernel: sets kver, bz (the Debian bzImage nested-kvm boots) and mods (its modules directory),
# fetching them on first use; skips (77) when nested-kvm has none.
# nested_base_tree: the Debian tree of the base template as scripts/make-templates.sh caches it
# ($SPACE_CACHE/base-2-SUITE; an older cache's base-SUITE.tar directory also does). Prints its path; status
# 1 when there is none (python-base, which runs before the nested suite, builds it).
nested_base_tree() {
	for d in "${SPACE_CACHE:-/var/cache/space}"/base-2-* "${SPACE_CACHE:-/var/cache/space}"/base-*.tar; do
		case $d in *.partial) continue ;; esac
		[ -d "$d" ] && { echo "$d"; return 0; }
	done
	return 1
}

nested_kernel() {
	if [ ! -f "$nested_cache/ready" ]; then
		# First use: let nested-kvm fetch and unpack the kernel package.
		"$nested_tool" -- true >/dev/null 2>&1 || true
	fi
	kver=$(cat "$nested_cache/ready" 2>/dev/null) || { echo "SKIP: nested-kvm has no kernel cached"; exit 77; }
	bz=$nested_cache/root/boot/vmlinuz-$kver
	mods=$nested_cache/root/lib/modules/$kver
	[ -f "$bz" ] || { echo "SKIP: $bz missing"; exit 77; }
}
