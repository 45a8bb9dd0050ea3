/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PVH entry for running a test guest under other VMMs (QEMU -M microvm): the Xen PHYS32_ENTRY ELF
 * note points at a 32-bit entry (flat protected mode, paging off), which builds identity page tables
 * for the first GiB, enters long mode and calls guest_main(NULL) (there is no Linux zero page).
 */
#include "longmode.inc"

	.section .note.Xen, "a", @note
	.align 4
	.long 4
	.long 4
	.long 18            /* XEN_ELFNOTE_PHYS32_ENTRY */
	.asciz "Xen"
	.align 4
	.long pvh_start32

	.section .text, "ax"
	.code32
pvh_start32:
	cli
	lgdt pvh_gdtr
	ENTER_LONG_MODE $pvh_pml4
	ljmp $0x08, $pvh_start64
	.code64
pvh_start64:
	mov $0x10, %ax
	mov %ax, %ds
	mov %ax, %es
	mov %ax, %ss
	mov $guest_stack_top, %rsp
	xor %edi, %edi
	call guest_main
1:	hlt
	jmp 1b

	.section .data
	.align 8
pvh_gdt:
	.quad 0
	.quad 0x00af9a000000ffff
	.quad 0x00cf92000000ffff
pvh_gdtr:
	.word 23
	.long pvh_gdt
	.align 4096
pvh_pml4:
	.quad pvh_pdpt + 3
	.fill 511, 8, 0
pvh_pdpt:
	.quad pvh_pd + 3
	.fill 511, 8, 0
pvh_pd:
	.set i, 0
	.rept 512
	.quad (i << 21) | 0x83
	.set i, i + 1
	.endr

	.section .note.GNU-stack, "", @progbits
