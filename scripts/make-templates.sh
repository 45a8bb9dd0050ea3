#!/bin/bash
# Builds the stock templates into an initialized state directory:
#   tiny  busybox only (seconds, no network): for tests and quick checks
#   base  minimal Debian with python3, built with mmdebstrap from Debian's archive (a few minutes)
#   code-interpreter-v1  Debian with python3, numpy, pandas and matplotlib (Debian's packages) and our
#         code-interpreter kernel as its start command on port 49999: the default template of
#         @e2b/code-interpreter's Sandbox.create() (docs/e2b.md; several minutes, about 200 MB to fetch)
# Base and code-interpreter-v1 have a non-root account `user` (uid 1000, home /home/user) beside root.
# usage: make-templates.sh [tiny] [base] [code-interpreter-v1]     (default: all; existing templates are kept)
# Environment: SPACE (the space binary, default: space in PATH), SPACE_STATE_DIR, SPACE_SUITE (default:
# the host's Debian release, else bookworm), SPACE_MIRROR, SPACE_CACHE (default /var/cache/space).
set -euo pipefail
SPACE=${SPACE:-space}
CACHE=${SPACE_CACHE:-/var/cache/space}
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(tiny base code-interpreter-v1)

have_template() { "$SPACE" template ls --json | grep -q "\"name\":[[:space:]]*\"$1\""; }
say() { echo "make-templates: $*" >&2; }

build_tiny() {
	local work
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
	"$(dirname "$0")/busybox-tree.sh" "$work"
	"$SPACE" template import tiny --rootfs "$work"
}

# The Debian release to build from: $SPACE_SUITE, else the host's if it is Debian, else bookworm.
debian_suite() {
	local suite=${SPACE_SUITE:-}
	if [ -z "$suite" ] && [ -r /etc/os-release ] && grep -q '^ID=debian' /etc/os-release; then
		suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	fi
	echo "${suite:-bookworm}"
}

# debian_tree NAME PACKAGES [HOOK...]: a minbase tree of the release with PACKAGES (comma-separated) and
# the account `user`, built once into the directory $CACHE/NAME-SUITE; prints its path. Each HOOK is an
# extra mmdebstrap --customize-hook.
debian_tree() {
	command -v mmdebstrap >/dev/null || { say "mmdebstrap missing: apt-get install mmdebstrap"; return 1; }
	local name=$1 packages=$2 suite mirror tree
	shift 2
	suite=$(debian_suite)
	mirror=${SPACE_MIRROR:-http://deb.debian.org/debian}
	mkdir -p "$CACHE"
	tree="$CACHE/$name-$suite"
	if [ ! -d "$tree" ]; then
		say "building $name ($suite, minbase + $packages) with mmdebstrap; this takes a few minutes"
		local hooks=(--customize-hook='echo space-sandbox > "$1/etc/hostname"'
			--customize-hook='chroot "$1" useradd --create-home --uid 1000 --user-group --shell /bin/bash user')
		for h in "$@"; do hooks+=(--customize-hook="$h"); done
		rm -rf "$tree.partial"
		mmdebstrap --variant=minbase --format=directory --include="$packages" "${hooks[@]}" "$suite" \
			"$tree.partial" "$mirror" >&2
		mv "$tree.partial" "$tree"
	else
		say "using cached $tree"
	fi
	echo "$tree"
}

build_base() {
	local tree
	tree=$(debian_tree base-2 python3,ca-certificates,iproute2,procps) || return 1
	"$SPACE" template import base --rootfs "$tree" --size 2G
}

# Our code-interpreter kernel: beside this script in the source tree, else where `meson install` put it.
kernel_source() {
	local f
	for f in "${SPACE_KERNEL_PY:-}" "$(dirname "$0")/../share/code-interpreter/space_kernel.py" \
		/usr/local/share/space/code-interpreter/space_kernel.py /usr/share/space/code-interpreter/space_kernel.py; do
		[ -n "$f" ] && [ -f "$f" ] && { echo "$f"; return 0; }
	done
	say "space_kernel.py not found (set SPACE_KERNEL_PY)"
	return 1
}

build_code_interpreter() {
	local name=$1 kernel tree
	kernel=$(kernel_source) || return 1
	# The kernel goes in when the template is imported, not into the cached tree: a new kernel needs no new
	# download. Matplotlib's font cache is built once here instead of in every sandbox's first plot.
	# python3-munkres answers fonttools' "scipy or munkres": scipy would bring gcc and pythran (400 MB).
	tree=$(debian_tree code-interpreter-1 \
		python3,python3-numpy,python3-pandas,python3-matplotlib,python3-munkres,ca-certificates,iproute2,procps \
		'chroot "$1" env MPLBACKEND=Agg python3 -c "import matplotlib.pyplot"') || return 1
	local work
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
	cp -a --reflink=auto "$tree" "$work/tree"
	install -D -m 0644 "$kernel" "$work/tree/usr/local/lib/space/space_kernel.py"
	"$SPACE" template import "$name" --rootfs "$work/tree" --size 3G
	"$SPACE" template set-start "$name" --wait-port 49999 -- python3 /usr/local/lib/space/space_kernel.py
}

for t in "${want[@]}"; do
	if have_template "$t"; then
		say "template $t exists; keeping it"
		continue
	fi
	case "$t" in
	tiny) build_tiny ;;
	base) build_base ;;
	code-interpreter-v1) build_code_interpreter "$t" ;;
	*) say "unknown template $t (known: tiny, base, code-interpreter-v1)"; exit 2 ;;
	esac
done
