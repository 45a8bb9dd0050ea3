/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Entry of the test guests, reached like Linux's 64-bit entry: long mode, identity-mapped paging,
 * RSI = boot_params. Also the AP trampoline the smp guest copies to low memory for INIT/SIPI.
 */
#include "longmode.inc"

	.section .text.start, "ax"
	.code64
	.globl _start
_start:
	cli
	mov $guest_stack_top, %rsp
	mov %rsi, %rdi
	call guest_main
1:	hlt
	jmp 1b

/*
 * AP trampoline: position-dependent code assembled for GUEST_AP_TRAMPOLINE (0x8000), copied there by
 * guest_ap_prepare(). Real mode -> long mode in one step (PAE, EFER.LME, CR0.PG|PE, far jump to a
 * 64-bit code segment), then jumps to the C entry with the stack the BSP prepared.
 */
#define TR(x) ((x) - guest_ap_tramp_start + 0x8000)
	.section .data.tramp, "aw"
	.globl guest_ap_tramp_start, guest_ap_tramp_end, guest_ap_cr3, guest_ap_stack, guest_ap_entry
	.code16
guest_ap_tramp_start:
	cli
	xor %ax, %ax
	mov %ax, %ds
	lgdtl TR(ap_gdtr)
	ENTER_LONG_MODE TR(guest_ap_cr3)
	ljmpl $0x08, $TR(ap_long)
	.code64
ap_long:
	mov $0x10, %ax
	mov %ax, %ds
	mov %ax, %es
	mov %ax, %ss
	mov TR(guest_ap_stack), %rsp
	jmp *TR(guest_ap_entry)
	.align 8
ap_gdt:
	.quad 0
	.quad 0x00af9a000000ffff
	.quad 0x00cf92000000ffff
ap_gdtr:
	.word 23
	.long TR(ap_gdt)
	.align 8
guest_ap_cr3:	.quad 0
guest_ap_stack:	.quad 0
guest_ap_entry:	.quad 0
guest_ap_tramp_end:

	.section .bss
	.align 16
	.space 16384
	.globl guest_stack_top
guest_stack_top:

	.section .note.GNU-stack, "", @progbits
