#!/bin/bash
# Builds the stock templates into an initialized state directory:
#   tiny  busybox only (seconds, no network): for tests and quick checks
#   base  minimal Debian with python3, built with mmdebstrap from Debian's archive (a few minutes)
# usage: make-templates.sh [tiny] [base]     (default: both; existing templates are kept)
# Environment: SPACE (the space binary, default: space in PATH), SPACE_STATE_DIR, SPACE_SUITE (default:
# the host's Debian release, else bookworm), SPACE_MIRROR, SPACE_CACHE (default /var/cache/space).
set -euo pipefail
SPACE=${SPACE:-space}
CACHE=${SPACE_CACHE:-/var/cache/space}
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(tiny base)

have_template() { "$SPACE" template ls --json | grep -q "\"name\":[[:space:]]*\"$1\""; }
say() { echo "make-templates: $*" >&2; }

build_tiny() {
	local work
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
	"$(dirname "$0")/busybox-tree.sh" "$work"
	"$SPACE" template import tiny --rootfs "$work"
}

build_base() {
	command -v mmdebstrap >/dev/null || { say "mmdebstrap missing: apt-get install mmdebstrap"; return 1; }
	local suite mirror tar
	suite=${SPACE_SUITE:-}
	if [ -z "$suite" ] && [ -r /etc/os-release ] && grep -q '^ID=debian' /etc/os-release; then
		suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	fi
	suite=${suite:-bookworm}
	mirror=${SPACE_MIRROR:-http://deb.debian.org/debian}
	mkdir -p "$CACHE"
	tar="$CACHE/base-$suite.tar"
	if [ ! -s "$tar" ]; then
		say "building base ($suite, minbase + python3) with mmdebstrap; this takes a few minutes"
		mmdebstrap --variant=minbase --include=python3,ca-certificates,iproute2,procps \
			--customize-hook='echo space-sandbox > "$1/etc/hostname"' \
			"$suite" "$tar.partial" "$mirror"
		mv "$tar.partial" "$tar"
	else
		say "using cached $tar"
	fi
	"$SPACE" template import base --rootfs "$tar" --size 2G
}

for t in "${want[@]}"; do
	if have_template "$t"; then
		say "template $t exists; keeping it"
		continue
	fi
	case "$t" in
	tiny) build_tiny ;;
	base) build_base ;;
	*) say "unknown template $t (known: tiny, base)"; exit 2 ;;
	esac
done
