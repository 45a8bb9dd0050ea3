#!/bin/bash
# Importing a container image: a three-layer OCI image of about SIZE MiB (default 200: a base, a layer of
# many small files, one of large ones; gzip, gzip and zstd), made by tests/integration/image/mkimage.py.
# Measured: `space template import --image` (confined: verify + apply with libext2fs, mkfs, e2fsck), the
# same image again under another name (no layer read), and beside it the unconfined way the old importer
# took for a tarball: every layer extracted with GNU tar as root into a directory, then `mkfs.ext4 -d`
# (which applies no whiteouts and checks no digest). Median of RUNS runs each, alternating.
#   image_import.sh [--size-mb N] [--runs N]
set -u
SIZE=200 RUNS=3
while [ $# -gt 0 ]; do
	case $1 in
	--size-mb) SIZE=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	*) echo "usage: image_import.sh [--size-mb N] [--runs N]" >&2; exit 2 ;;
	esac
done
. "${SPACE_SOURCE_DIR:?}/tests/lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_UNPACK_PATH:-}" space-unpack SPACE_UNPACK_PATH
command -v zstd >/dev/null || skip "zstd missing"
make_state $((SIZE * 12 / 1024 + 3))G
WORK=$(mktemp -d /tmp/space-bench-XXXXXX)
on_exit "rm -rf '$WORK'"
S=(--state "$STATE")
python3 "$SPACE_SOURCE_DIR/tests/integration/image/mkimage.py" big "$WORK/img" --size-mb "$SIZE" >/dev/null ||
	fail "mkimage"
layers=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]+"/index.json"))["manifests"][0]["digest"][7:]
print(" ".join(l["digest"][7:] for l in json.load(open(sys.argv[1]+"/blobs/sha256/"+m))["layers"]))' "$WORK/img")
compressed=$(du -sb "$WORK/img/blobs" | cut -f1)
now() { date +%s%N; }
ms() { echo $((($2 - $1) / 1000000)); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >"$WORK/space" ; : >"$WORK/again"; : >"$WORK/tar"
for i in $(seq 1 "$RUNS"); do
	t0=$(now)
	"$SPACE" template import "b$i" --image "$WORK/img" "${S[@]}" >/dev/null 2>"$WORK/err" || fail "import: $(cat "$WORK/err")"
	t1=$(now)
	"$SPACE" template import "c$i" --image "$WORK/img" "${S[@]}" >/dev/null 2>&1 || fail "re-import"
	t2=$(now)
	ms "$t0" "$t1" >>"$WORK/space"
	ms "$t1" "$t2" >>"$WORK/again"
	"$SPACE" template rm "c$i" "${S[@]}" >/dev/null && "$SPACE" template rm "b$i" "${S[@]}" >/dev/null
	t0=$(now)
	mkdir "$WORK/tree"
	for l in $layers; do tar -x -C "$WORK/tree" --numeric-owner -f "$WORK/img/blobs/sha256/$l" || fail "tar"; done
	bytes=$(du -sb "$WORK/tree" | cut -f1)
	mkfs.ext4 -q -F -L rootfs -i 8192 -E lazy_itable_init=0,lazy_journal_init=0 -d "$WORK/tree" \
		"$STATE/pool/tar.ext4" "$(((bytes * 4 / 3 + (128 << 20)) >> 10))k" >/dev/null || fail "mkfs"
	t1=$(now)
	ms "$t0" "$t1" >>"$WORK/tar"
	rm -rf "$WORK/tree" "$STATE/pool/tar.ext4"
done
# A Dockerfile FROM that image: three RUN steps and a COPY; rebuilt unchanged, then with its last line
# changed (only that line runs again: the target is a second at most plus that line's own work).
"$SPACE" template import big --image "$WORK/img" "${S[@]}" >/dev/null 2>&1 || fail "import big"
mkdir -p "$WORK/ctx" && head -c $((8 << 20)) /dev/urandom >"$WORK/ctx/blob"
printf '%s\n' 'FROM big' 'RUN mkdir -p /srv && for i in $(seq 1 200); do echo $i > /srv/f$i; done' \
	'COPY blob /srv/blob' 'RUN sha256sum /srv/blob > /srv/blob.sum' 'ENV STAGE=final' \
	'RUN echo first > /srv/last' >"$WORK/ctx/Dockerfile"
b0=$(now)
"$SPACE" template build app "$WORK/ctx" --isolation jail "${S[@]}" >/dev/null 2>"$WORK/err" || fail "build: $(cat "$WORK/err")"
b1=$(now)
"$SPACE" template build app "$WORK/ctx" --isolation jail "${S[@]}" >/dev/null 2>&1 || fail "rebuild"
b2=$(now)
: >"$WORK/last"
for i in $(seq 1 "$RUNS"); do
	sed -i "s|^RUN echo .* > /srv/last|RUN echo change$i > /srv/last|" "$WORK/ctx/Dockerfile"
	b3=$(now)
	"$SPACE" template build app "$WORK/ctx" --isolation jail "${S[@]}" >/dev/null 2>&1 || fail "rebuild $i"
	ms "$b3" "$(now)" >>"$WORK/last"
done
b3=$(now)
"$SPACE" run --isolation jail --template app "${S[@]}" -- true >/dev/null 2>&1 || fail "run"
one_run=$(ms "$b3" "$(now)")

printf 'image: 3 layers, %d MiB compressed, %d MiB of files; %d runs each, median\n' \
	$((compressed >> 20)) $((bytes >> 20)) "$RUNS"
printf '  %-58s %6d ms\n' "space template import --image (confined, verified)" "$(median <"$WORK/space")"
printf '  %-58s %6d ms\n' "the same image again (by config digest: no layer read)" "$(median <"$WORK/again")"
printf '  %-58s %6d ms\n' "tar -x of the layers as root + mkfs.ext4 -d (unchecked)" "$(median <"$WORK/tar")"
printf 'Dockerfile FROM it: 3 RUN, a COPY of 8 MiB, an ENV\n'
printf '  %-58s %6d ms\n' "first build" "$(ms "$b0" "$b1")"
printf '  %-58s %6d ms\n' "the same again (every step cached)" "$(ms "$b1" "$b2")"
printf '  %-58s %6d ms\n' "the last line changed (only it runs again)" "$(median <"$WORK/last")"
printf '  %-58s %6d ms\n' "that line's own work, about: one space run of the template" "$one_run"
