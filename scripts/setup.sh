#!/bin/bash
# One command from a fresh Debian/Ubuntu machine to a working libspace: installs the dependencies,
# builds and installs libspace, prepares the state directory and the templates, then runs a command in
# a sandbox. Run it as root from the source tree:  sudo ./scripts/setup.sh
# Environment: SPACE_STATE_DIR (default /var/lib/space), SPACE_POOL_SIZE (loop pool size, default 16G),
# SPACE_POOL (an existing btrfs directory to use instead of a loop pool), PREFIX (default /usr/local).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root (sudo ./scripts/setup.sh)" >&2; exit 1; }
PREFIX=${PREFIX:-/usr/local}
STATE=${SPACE_STATE_DIR:-/var/lib/space}
step() { printf '\n==> %s\n' "$*" >&2; }

step "installing dependencies (apt-get)"
./scripts/deps.sh

step "building libspace"
if [ -d build/meson-private ]; then
	meson configure build --prefix "$PREFIX" >/dev/null
else
	meson setup build --prefix "$PREFIX" --buildtype=release -Dtests=false >/dev/null
fi
meson compile -C build
step "installing into $PREFIX"
meson install -C build --quiet
ldconfig
export PATH="$PREFIX/bin:$PATH"
export SPACE_STATE_DIR="$STATE"

# Hardware virtualization decides the default isolation: `space doctor` checks /dev/kvm and times guest
# kernel code in a throwaway VM. Where VMs are not usable (no /dev/kvm, or an emulated ring 0) the jail
# mode (namespaces + seccomp + cgroups around the shared host kernel, a weaker boundary) is used, and said so.
if { space doctor --json 2>/dev/null || true; } | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["vm"]["usable"] else 1)'; then
	ISOLATION=vm
	NOTE="KVM microVMs"
else
	ISOLATION=jail
	NOTE="jail — a weaker boundary than a VM: it shares the host kernel; \`space doctor\` says why VMs are not usable here"
fi
# A host whose controllers are cgroup v1 moves each sandbox's first process into its cgroups, and the first
# move after a quiet spell waits for a kernel RCU grace period (5-20 ms of a start). The kernel's favordynmods
# option stops that wait, for slightly slower forks and exits, until the next boot; `space doctor` asks for
# it. Set here, said so; SPACE_NO_FAVORDYNMODS=1 leaves the host as it is.
UNIFIED=/sys/fs/cgroup/unified
if [ -z "${SPACE_NO_FAVORDYNMODS:-}" ] && [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ] &&
	[ "$(stat -fc %T "$UNIFIED" 2>/dev/null)" = cgroup2fs ] &&
	! grep -q " $UNIFIED cgroup2 [^ ]*favordynmods" /proc/mounts; then
	step "cgroup v1 host: mount -o remount,favordynmods $UNIFIED (sandbox starts stop waiting for RCU; until reboot)"
	mount -o remount,favordynmods "$UNIFIED" || echo "setup.sh: could not set favordynmods; \`space doctor\` says what it costs" >&2
fi

step "initializing $STATE (default isolation: $NOTE)"
if [ -n "${SPACE_POOL:-}" ]; then
	space init --pool "$SPACE_POOL" --isolation "$ISOLATION"
else
	space init --loop-pool "${SPACE_POOL_SIZE:-16G}" --isolation "$ISOLATION"
fi

step "building templates (tiny, base)"
SPACE=space ./scripts/make-templates.sh tiny base
if [ "$ISOLATION" = vm ]; then
	step "preparing the guest kernel and its initramfs (the host's own kernel, or Debian's cloud kernel)"
	space kernel prepare --template base
fi

step "running: space run -- python3 -c 'print(6*7)'"
space run -- python3 -c 'print(6*7)'
