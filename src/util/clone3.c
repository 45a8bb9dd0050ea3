/* SPDX-License-Identifier: Apache-2.0 */
#include "util/clone3.h"

#include <sys/syscall.h>

/* The call is made from assembly: the child's first instruction runs on a stack with no frame of ours, so it
 * must not return through C code; it calls fn and exits with its value. */
pid_t util_clone3(struct clone_args *args, int (*fn)(void *), void *arg)
{
	register void *r12 __asm__("r12") = (void *)fn;
	register void *r13 __asm__("r13") = arg;
	long ret;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 /* the child: a frame-less start; its return value is its exit status */
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "mov %%eax, %%edi\n\t"
			 "mov %[sys_exit], %%eax\n\t"
			 "syscall\n\t"
			 "hlt\n\t"
			 "1:"
			 : "=a"(ret)
			 : "0"((long)SYS_clone3), "D"(args), "S"(sizeof(*args)), "r"(r12), "r"(r13),
			   [sys_exit] "i"(SYS_exit)
			 : "rcx", "r11", "memory");
	return (pid_t)ret; /* a pid, or -errno */
}
