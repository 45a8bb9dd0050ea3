# Shared by the nested suite's scripts (sourced). Finds nested-kvm beside the source tree
# ($SPACE_SOURCE_DIR/../shared/tools/nested-kvm, or $NESTED_KVM) and skips (77) when it cannot run.
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

# kill_tree PID: SIGKILL to PID and every process below it (processes this test started).
kill_tree() {
	for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
	kill -KILL "$1" 2>/dev/null || true
}

# nested_run WORKDIR SCRIPT [nested-kvm options...]: runs `sh SCRIPT` inside nested-kvm with WORKDIR written
# through. Under heavy host load the emulated VM's own kernel occasionally hangs while booting (a soft
# lockup before COMMAND starts); a VM that has not started SCRIPT within $NESTED_BOOT_TIMEOUT seconds
# (default 300) is killed and booted once more; so is one still running after $NESTED_RUN_TIMEOUT seconds
# (when set: for scripts whose normal run is short, so a VM stuck in the emulator does not hold the suite).
nested_run() {
	_dir=$1 _script=$2
	shift 2
	_attempt=1
	rm -f "$_dir/result.first.txt"
	while :; do
		rm -f "$_dir/.nested-started"
		_stuck=0
		printf 'touch "%s/.nested-started"\nexec sh "%s"\n' "$_dir" "$_script" > "$_dir/.nested-wrapper.sh"
		"$nested_tool" --timeout 1500 "$@" --rw "$_dir" -- sh "$_dir/.nested-wrapper.sh" &
		_pid=$!
		_waited=0
		while kill -0 "$_pid" 2>/dev/null; do
			if [ ! -e "$_dir/.nested-started" ] && [ "$_waited" -ge "${NESTED_BOOT_TIMEOUT:-300}" ]; then
				echo "nested-kvm: the VM did not start the test within ${_waited} s (attempt $_attempt); killing it" >&2
				kill_tree "$_pid"
				break
			fi
			if [ -n "${NESTED_RUN_TIMEOUT:-}" ] && [ "$_waited" -ge "$NESTED_RUN_TIMEOUT" ]; then
				echo "nested-kvm: the VM still runs after ${_waited} s (attempt $_attempt); killing it" >&2
				kill_tree "$_pid"
				_stuck=1
				break
			fi
			sleep 2
			_waited=$((_waited + 2))
		done
		wait "$_pid"
		_rc=$?
		rm -f "$_dir/.nested-wrapper.sh"
		if { [ -e "$_dir/.nested-started" ] && [ "$_stuck" = 0 ]; } || [ "$_attempt" -ge 2 ]; then
			rm -f "$_dir/.nested-started"
			# The emulator is not always faithful (a guest triple fault, a lost interrupt): a run whose
			# checks failed is run once more. nested_report prints what failed the first time.
			if [ "$_attempt" = 1 ] && [ -f "$_dir/result.txt" ] && grep -q '^FAIL' "$_dir/result.txt"; then
				mv "$_dir/result.txt" "$_dir/result.first.txt"
				echo "nested-kvm: a check failed (see result.first.txt); running once more" >&2
				_attempt=2
				continue
			fi
			return "$_rc"
		fi
		_attempt=$((_attempt + 1))
	done
}

# nested_kernel: sets kver, bz (the Debian bzImage nested-kvm boots) and mods (its modules directory),
# fetching them on first use; skips (77) when nested-kvm has none.
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

# nested_report WORKDIR: prints WORKDIR/result.txt (the PASS/FAIL lines a script wrote inside nested-kvm)
# and exits 0, or 1 when a line failed or there is no result (then with the end of WORKDIR/nested.log).
nested_report() {
	if [ -s "$1/result.first.txt" ]; then
		echo "first run (failed; run once more):"
		grep '^FAIL' "$1/result.first.txt" | sed 's/^/  /'
	fi
	if [ ! -s "$1/result.txt" ]; then
		echo "FAIL: no result from inside nested-kvm"
		tail -n 40 "$1/nested.log"
		exit 1
	fi
	cat "$1/result.txt"
	if grep -q '^FAIL' "$1/result.txt"; then
		tail -n 30 "$1/nested.log"
		exit 1
	fi
	exit 0
}
