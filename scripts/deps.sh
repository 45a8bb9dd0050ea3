#!/bin/bash
# Installs what libspace needs to build, run and test, from Debian/Ubuntu packages.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: run as root (it uses apt-get)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
pkgs=(
	# build
	meson ninja-build pkg-config gcc g++ clang libclang-rt-14-dev
	libbtrfsutil-dev libseccomp-dev libnl-3-dev libnl-route-3-dev libcjson-dev libsqlite3-dev
	libmicrohttpd-dev libssl-dev
	# space serve --cluster: its control plane's client library
	libpq-dev
	# space-unpack: image layers and rootfs tarballs into ext4 (libext2fs), their compressions
	libext2fs-dev comerr-dev zlib1g-dev libzstd-dev liblzma-dev libbz2-dev
	# run: pools, templates, sandboxes
	btrfs-progs e2fsprogs tar gzip xz-utils zstd busybox-static mmdebstrap iproute2 kmod cpio
	debian-archive-keyring
	# tests and benchmarks
	acpica-tools qemu-system-x86 bubblewrap file procps psmisc util-linux python3 openssl ca-certificates strace
	python3-pytest
	# the cluster test's PostgreSQL (a throwaway server in a temporary directory)
	postgresql
	# Debian packages (debian/, tests/packaging)
	dpkg-dev debhelper dh-python lintian
)
# Package names that do not exist on this release (e.g. libclang-rt-14-dev on newer Ubuntu) are skipped.
avail=()
apt-get update -qq
for p in "${pkgs[@]}"; do
	if apt-cache show "$p" >/dev/null 2>&1; then avail+=("$p"); else echo "deps.sh: skipping unavailable package $p" >&2; fi
done
apt-get install -y -qq --no-install-recommends "${avail[@]}" >/dev/null
echo "deps.sh: installed ${#avail[@]} packages"
