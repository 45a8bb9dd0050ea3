#!/bin/sh
# bench/vm_boot inside ../shared/tools/nested-kvm, for hosts without a usable /dev/kvm of their own.
# The figures then come from QEMU's software emulator: functional comparison, not performance.
# usage: vm_boot_nested.sh VM_BOOT [vm_boot args...]
set -u
tool=${NESTED_KVM:-${SPACE_SOURCE_DIR:?}/../shared/tools/nested-kvm}
[ -x "$tool" ] || { echo "SKIP: nested-kvm not found at $tool"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: nested-kvm needs root"; exit 77; }
echo "vm_boot under nested-kvm (TCG-emulated SVM): not performance figures"
exec "$tool" --timeout 900 -- "$@"
