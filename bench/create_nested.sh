#!/bin/sh
# bench/create inside ../shared/tools/nested-kvm, for hosts without a usable /dev/kvm of their own, with
# Debian's kernel and modules from nested-kvm's cache as the template's kernel. The figures then come from
# QEMU's software emulator: functional figures, not performance.
# usage: create_nested.sh CREATE [create args...]
set -u
. "${SPACE_SOURCE_DIR:?}/tests/nested/nested-common.sh"
bench=${1:?usage: create_nested.sh CREATE [args...]}
shift
nested_kernel
[ -d "$mods" ] || { echo "SKIP: $mods missing"; exit 77; }
work=${SPACE_BUILD_DIR:?}/bench-create-nested
mkdir -p "$work"
rm -f "$work/out.txt"
cat > "$work/inside.sh" <<INSIDE
export SPACE_AGENT_PATH='${SPACE_AGENT_PATH:-}' SPACE_VMM_PATH='${SPACE_VMM_PATH:-}' SPACE_GATEWAY_PATH='${SPACE_GATEWAY_PATH:-}'
export SPACE_SOURCE_DIR='$SPACE_SOURCE_DIR' SPACE_VM_BOOT_TIMEOUT=300 SPACE_QUIET_JAIL=1
modprobe kvm_amd 2>/dev/null; modprobe vhost_vsock 2>/dev/null
'$bench' --kernel '$bz' --modules '$mods' $* > '$work/out.txt' 2>&1
echo "exit \$?" >> '$work/out.txt'
INSIDE
echo "create under nested-kvm (TCG-emulated SVM): functional figures, not performance"
# 50 clones of 256 MiB plus the pool in the VM's tmpfs.
nested_run "$work" "$work/inside.sh" --mem 6144 > "$work/nested.log" 2>&1
[ -s "$work/out.txt" ] || { echo "FAIL: no output from inside nested-kvm"; tail -n 30 "$work/nested.log"; exit 1; }
cat "$work/out.txt"
rc=$(sed -n 's/^exit //p' "$work/out.txt" | tail -n 1)
exit "${rc:-1}"
