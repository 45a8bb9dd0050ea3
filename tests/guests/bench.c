/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench: the minimal guest of bench/vm_boot: prints one line and ends the VM. Linked with rt/pvh.S as
 * well, so the same image boots under QEMU (-M microvm, PVH entry; bp is NULL there) and space-vmm.
 */
#include "guest.h"

void guest_main(const uint8_t *bp)
{
	(void)bp;
	guest_ok("bench");
}
