#!/bin/bash
# Builds the Debian packages from this source tree (dpkg-buildpackage -us -uc -b, in a copy, so nothing is
# written beside the tree), checks them with lintian (no errors), makes a minimal Debian root with
# mmdebstrap, installs the .debs there with apt (which resolves and checks the dependencies they declare),
# then runs `space --version`, `space doctor` and `python3 -c 'import libspace'` (and pkg-config) in it
# through chroot. Everything it made is removed at the end (the root's mounts live in a mount namespace of
# their own). Skips (77) without root, on a host that is not Debian, or when Debian's archive cannot be
# reached; a missing build tool is a failure (scripts/deps.sh installs them).
# Environment: SPACE_MIRROR (default http://deb.debian.org/debian), SPACE_SECURITY_MIRROR.
. "$(dirname "$0")/../lib.sh"
src=${SPACE_SOURCE_DIR:?}
need_root
[ -r /etc/os-release ] || skip "no /etc/os-release"
# shellcheck disable=SC1091
suite=$(. /etc/os-release && [ "${ID:-}" = debian ] && echo "${VERSION_CODENAME:-}")
[ -n "$suite" ] || skip "not a Debian host: the packages are built for, and installed into, the host's Debian release"
for t in dpkg-buildpackage dpkg-checkbuilddeps dh lintian mmdebstrap; do
	command -v "$t" >/dev/null || fail "$t missing (scripts/deps.sh installs dpkg-dev, debhelper, dh-python, lintian, mmdebstrap)"
done
(cd "$src" && dpkg-checkbuilddeps) || fail "the build dependencies of debian/control are not installed (scripts/deps.sh)"
mirror=${SPACE_MIRROR:-http://deb.debian.org/debian}
security=${SPACE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
why=$(python3 - "$mirror/dists/$suite/InRelease" 2>&1 <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="HEAD"), timeout=20)
except Exception as e:
    sys.exit(str(e))
PY
) || skip "Debian's archive is not reachable ($mirror: $why)"

WORK=$(mktemp -d /tmp/space-debs-XXXXXX)
# Never follow a mount out of the work directory (the root's are in their own namespace; this is a belt).
on_exit "grep -q ' $WORK/' /proc/mounts && umount -R --lazy \$(grep -o ' $WORK/[^ ]*' /proc/mounts | sort -r); rm -rf --one-file-system '$WORK'"
t0=$SECONDS

# 1. The packages, from a copy of the tree (tracked files and new ones, not what git ignores).
mkdir "$WORK/src"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard) | (cd "$src" && tar --null -T - -cf -) |
		tar -xf - -C "$WORK/src" || fail "copy of the source tree"
else
	tar -C "$src" --exclude='./build*' --exclude='./obj-*' --exclude='./debian/tmp' -cf - . | tar -xf - -C "$WORK/src" ||
		fail "copy of the source tree"
fi
(cd "$WORK/src" && nice dpkg-buildpackage -us -uc -b) >"$WORK/build.log" 2>&1 ||
	{ tail -n 40 "$WORK/build.log"; fail "dpkg-buildpackage failed"; }
version=$(cd "$WORK/src" && dpkg-parsechangelog -S Version)
debs=()
for p in "libspace1_${version}_amd64" "libspace-dev_${version}_amd64" "space_${version}_amd64" "python3-libspace_${version}_all"; do
	[ -f "$WORK/$p.deb" ] || fail "no $p.deb built: $(ls "$WORK"/*.deb)"
	debs+=("$p.deb")
done
dpkg-deb -c "$WORK/libspace1_${version}_amd64.deb" | grep -q '/libspace\.so\.1 ' || fail "libspace1 does not hold libspace.so.1"
# The manual pages: space(1) made from the CLI's command table, libspace(3) with the header.
dpkg-deb -c "$WORK/space_${version}_amd64.deb" | grep -q '/usr/share/man/man1/space\.1\.gz$' || fail "space does not hold space(1)"
dpkg-deb -c "$WORK/libspace-dev_${version}_amd64.deb" | grep -q '/usr/share/man/man3/libspace\.3\.gz$' ||
	fail "libspace-dev does not hold libspace(3)"
echo "built ${debs[*]} ($((SECONDS - t0)) s)"

# 2. lintian: no errors.
lintian --fail-on error "$WORK"/libspace_"${version}"_amd64.changes \
	>"$WORK/lintian.log" 2>&1
lrc=$?
cat "$WORK/lintian.log"
grep -q '^E: ' "$WORK/lintian.log" && fail "lintian reports errors"
grep -q 'no-manual-page' "$WORK/lintian.log" && fail "lintian misses a manual page"
[ "$lrc" = 0 ] || fail "lintian exited $lrc"
systemd-analyze verify "$WORK/src/debian/space.space-serve.service" 2>&1 | grep -v 'space-serve.service:.*/usr/bin/space' |
	grep -i 'space-serve' && fail "systemd-analyze verify complains about the unit"

# 3. A minimal Debian root; apt installs the packages there from files, their dependencies from the archive.
mkdir "$WORK/debs"
for d in "${debs[@]}"; do cp "$WORK/$d" "$WORK/debs/"; done
sources=("deb $mirror $suite main")
case $suite in sid | unstable) ;; *) sources+=("deb $mirror $suite-updates main" "deb $security $suite-security main") ;; esac
ROOT=$WORK/root
mmdebstrap --variant=minbase --quiet \
	--customize-hook="copy-in '$WORK/debs' /tmp" \
	--customize-hook='chroot "$1" sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends -q /tmp/debs/*.deb pkgconf"' \
	--customize-hook='rm -rf "$1/tmp/debs"' \
	"$suite" "$ROOT" "${sources[@]}" >"$WORK/mmdebstrap.log" 2>&1 ||
	{ tail -n 40 "$WORK/mmdebstrap.log"; fail "mmdebstrap with the packages failed"; }
echo "installed into a minimal $suite root ($((SECONDS - t0)) s)"

# 4. The installed programs, through chroot, with nothing of this build's environment (SPACE_BUILD_DIR,
# the helper paths): /proc, /dev and /sys are mounted in a mount namespace that ends with the command.
inroot() {
	unshare --mount --propagation private --fork -- sh -c '
		r=$1; shift
		mount -t proc proc "$r/proc" && mount --rbind /dev "$r/dev" && mount --rbind /sys "$r/sys" &&
		exec chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"' sh "$ROOT" "$@"
}
for p in libspace1 libspace-dev space python3-libspace; do
	st=$(chroot "$ROOT" dpkg-query -W -f='${Status} ${Version}' "$p" 2>&1)
	[ "$st" = "install ok installed $version" ] || fail "$p: $st"
done
expect_rc 0 inroot space --version
[ "$out" = "space $version" ] || fail "space --version: $out"
# Its verdicts are the chroot's (no state directory; user namespaces are refused to a chrooted process):
# what counts is that it runs and finds the installed helpers.
inroot space doctor >"$WORK/doctor.txt" 2>&1
rc=$?
cat "$WORK/doctor.txt"
[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "space doctor exited $rc"
grep -q 'space-agent' "$WORK/doctor.txt" || fail "space doctor printed no report"
inroot space doctor --json --verbose >"$WORK/doctor.json" 2>"$WORK/doctor.err"
python3 - "$WORK/doctor.json" <<'PY' || fail "space doctor --json --verbose in the root: $(cat "$WORK/doctor.err")"
import json, sys
d = json.load(open(sys.argv[1]))
checks = {c["name"]: c for c in d["checks"]}
bad = []
for name, path in (("space-vmm", "/usr/libexec/libspace/space-vmm"), ("space-agent", "/usr/libexec/libspace/space-agent")):
    c = checks.get(name, {})
    if c.get("status") != "ok" or path not in c.get("detail", ""):
        bad.append(f"{name}: {c}")
for name in ("helper-vmm", "helper-gateway", "helper-snapd", "helper-logcap"):
    if checks.get(name, {}).get("status") != "ok":
        bad.append(f"{name}: {checks.get(name)}")
if "test-build" in checks:
    bad.append("the packaged library is a test build")
if not {"vm", "jail"} <= set(d):
    bad.append("no vm/jail summary")
if bad:
    sys.exit("\n".join(bad))
PY
expect_rc 0 inroot python3 -c 'import libspace, libspace.aio; print(libspace.version(), libspace.__file__)'
[ "$out" = "$version /usr/lib/python3/dist-packages/libspace/__init__.py" ] || fail "import libspace: $out"
expect_rc 0 inroot pkg-config --cflags --libs libspace
# (the -dev package's dependencies give the Requires.private packages' cflags)
echo " $out " | grep -q -- ' -lspace ' || fail "pkg-config --cflags --libs libspace: '$out'"
expect_rc 0 inroot pkg-config --static --libs libspace
echo "$out" | grep -q -- '-lseccomp' || fail "pkg-config --static --libs libspace: '$out'"
[ -f "$ROOT/lib/systemd/system/space-serve.service" ] || [ -f "$ROOT/usr/lib/systemd/system/space-serve.service" ] ||
	fail "no space-serve.service installed"
chroot "$ROOT" dpkg-query -W -f='${Conffiles}' space | grep -q '/etc/default/space-serve' ||
	fail "/etc/default/space-serve is not a conffile of space"
grep -q " $WORK/" /proc/mounts && fail "mounts left under $WORK: $(grep " $WORK/" /proc/mounts)"
echo "debian packages: ok (${debs[*]}; $((SECONDS - t0)) s)"
