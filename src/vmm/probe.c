/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space-vmm probe`: how fast does this host's KVM run guest kernel code?
 *
 * A throwaway VM with one page of RAM runs a real-mode `dec ecx / jnz` loop (real mode is ring 0) until
 * it halts. With hardware virtualization that loop runs at native speed (well under 5 ns an instruction);
 * under an emulated ring 0 (nested PVM, where stock Linux guests do not boot) it takes about 1 us an
 * instruction (and a host whose KVM is PVM's, kvm_pvm loaded, is taken as emulated whatever it measures).
 * The loop is lengthened until one run takes at least PROBE_MIN_NS, so the fixed cost of
 * entering the guest does not count.
 *
 * Output (one JSON object on stdout): {"kvm":true,"api":12,"ns_per_insn":0.41,"iterations":N,
 * "seconds":S,"verdict":"native"|"slow"|"emulated"} or {"kvm":false,"error":"..."}; exit 0 when measured,
 * 1 when KVM is unusable.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "vmm/probe.h"

#define PROBE_CODE_GPA  0x1000u
#define PROBE_MIN_NS    20000000ull   /* a measured run lasts at least 20 ms */
#define PROBE_MAX_NS    3000000000ull /* and the probe gives up lengthening past 3 s */
#define PROBE_MAX_ITERS 2000000000u
#define PROBE_REPEATS   4             /* more runs of the chosen length; the fastest counts */
#define PROBE_REPEAT_MAX_NS 200000000ull

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int probe_fail(struct vmm_probe_result *res, int r, const char *what)
{
	snprintf(res->error, sizeof(res->error), "%s: %s", what, strerror(-r));
	return r;
}

/* One run of the loop with `iters` iterations on vCPU `vcpu`; *ns is the time KVM_RUN took until the hlt. */
static int probe_run_once(int vcpu, struct kvm_run *run, uint8_t *mem, uint32_t iters, uint64_t *ns,
			  struct vmm_probe_result *res)
{
	/* mov ecx, iters ; l: dec ecx ; jnz l ; hlt   (16-bit code, operand-size prefixes for ecx) */
	uint8_t code[] = { 0x66, 0xb9, 0, 0, 0, 0, 0x66, 0x49, 0x75, 0xfc, 0xf4 };
	memcpy(code + 2, &iters, sizeof(iters));
	memcpy(mem + PROBE_CODE_GPA, code, sizeof(code));

	struct kvm_sregs sregs;
	if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0)
		return probe_fail(res, -errno, "KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0)
		return probe_fail(res, -errno, "KVM_SET_SREGS");
	struct kvm_regs regs = { .rip = PROBE_CODE_GPA, .rflags = 0x2 };
	if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0)
		return probe_fail(res, -errno, "KVM_SET_REGS");
	uint64_t t0 = mono_ns();
	for (;;) {
		if (ioctl(vcpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return probe_fail(res, -errno, "KVM_RUN");
		}
		if (run->exit_reason == KVM_EXIT_HLT)
			break;
		snprintf(res->error, sizeof(res->error), "the probe guest stopped with KVM exit reason %u",
			 run->exit_reason);
		return -EIO;
	}
	*ns = mono_ns() - t0;
	return 0;
}

int vmm_probe(struct vmm_probe_result *res)
{
	memset(res, 0, sizeof(*res));
	_cleanup_close_ int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return probe_fail(res, -errno, "open /dev/kvm");
	res->api_version = ioctl(kvm, KVM_GET_API_VERSION, 0);
	if (res->api_version != KVM_API_VERSION) {
		snprintf(res->error, sizeof(res->error), "KVM API version %d (need %d)", res->api_version,
			 KVM_API_VERSION);
		return -ENOTSUP;
	}
	int run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size <= 0)
		return probe_fail(res, -errno, "KVM_GET_VCPU_MMAP_SIZE");
	_cleanup_close_ int vmfd = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vmfd < 0)
		return probe_fail(res, -errno, "KVM_CREATE_VM");

	size_t mem_len = 0x10000;
	uint8_t *mem = mmap(NULL, mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return probe_fail(res, -errno, "mmap guest memory");
	struct kvm_userspace_memory_region region = {
		.slot = 0, .guest_phys_addr = 0, .memory_size = mem_len, .userspace_addr = (uintptr_t)mem,
	};
	int r;
	struct kvm_run *run = MAP_FAILED;
	_cleanup_close_ int vcpu = -1;
	if (ioctl(vmfd, KVM_SET_USER_MEMORY_REGION, &region) < 0) {
		r = probe_fail(res, -errno, "KVM_SET_USER_MEMORY_REGION");
		goto out;
	}
	vcpu = ioctl(vmfd, KVM_CREATE_VCPU, 0);
	if (vcpu < 0) {
		r = probe_fail(res, -errno, "KVM_CREATE_VCPU");
		goto out;
	}
	run = mmap(NULL, (size_t)run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED) {
		r = probe_fail(res, -errno, "mmap kvm_run");
		goto out;
	}
	/* Start short (an emulated ring 0 takes ~2 ms for 1000 iterations) and lengthen tenfold until a run
	 * is long enough to time. */
	uint32_t iters = 1000;
	uint64_t ns = 0;
	for (;;) {
		r = probe_run_once(vcpu, run, mem, iters, &ns, res);
		if (r < 0)
			goto out;
		if (ns >= PROBE_MIN_NS || iters >= PROBE_MAX_ITERS / 10 || ns * 10 > PROBE_MAX_NS)
			break;
		iters *= 10;
	}
	/* A loaded host can deschedule the vCPU in the middle of a run and make it look slow: the fastest
	 * of a few runs is the machine's speed (an emulated ring 0 is never fast, so this cannot flatter
	 * it). Only runs short enough to repeat cheaply are repeated. */
	for (int k = 0; k < PROBE_REPEATS && ns < PROBE_REPEAT_MAX_NS; k++) {
		uint64_t again;
		r = probe_run_once(vcpu, run, mem, iters, &again, res);
		if (r < 0)
			goto out;
		if (again < ns)
			ns = again;
	}
	res->iterations = iters;
	res->seconds = (double)ns / 1e9;
	res->ns_per_insn = (double)ns / (2.0 * iters); /* dec + jnz per iteration */
	/* Speed alone does not tell an emulated ring 0 from a slow nested hypervisor (probe.h: their figures
	 * overlap). A PVM host, whose ring-0 emulator refuses instructions stock kernels use, is named by its
	 * module: there anything short of native is "emulated", however fast it measures. */
	bool pvm = access("/sys/module/kvm_pvm", F_OK) == 0;
	res->verdict = res->ns_per_insn < VMM_PROBE_NATIVE_NS                  ? VMM_PROBE_NATIVE
		       : (pvm || res->ns_per_insn >= VMM_PROBE_USABLE_NS) ? VMM_PROBE_EMULATED
									   : VMM_PROBE_SLOW;
	r = 0;
out:
	if (run != MAP_FAILED)
		munmap(run, (size_t)run_size);
	munmap(mem, mem_len);
	return r;
}

const char *vmm_probe_verdict_name(enum vmm_probe_verdict v)
{
	switch (v) {
	case VMM_PROBE_NATIVE: return "native";
	case VMM_PROBE_SLOW: return "slow";
	case VMM_PROBE_EMULATED: return "emulated";
	}
	return "unknown";
}

int vmm_probe_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	struct vmm_probe_result res;
	int r = vmm_probe(&res);
	if (r < 0) {
		char esc[sizeof(res.error) * 2];
		size_t j = 0;
		for (size_t i = 0; res.error[i] && j + 2 < sizeof(esc); i++) {
			if (res.error[i] == '"' || res.error[i] == '\\')
				esc[j++] = '\\';
			esc[j++] = (char)((unsigned char)res.error[i] < 0x20 ? ' ' : res.error[i]);
		}
		esc[j] = 0;
		printf("{\"kvm\":false,\"error\":\"%s\"}\n", esc);
		return 1;
	}
	printf("{\"kvm\":true,\"api\":%d,\"ns_per_insn\":%.3f,\"iterations\":%u,\"seconds\":%.4f,"
	       "\"verdict\":\"%s\"}\n",
	       res.api_version, res.ns_per_insn, res.iterations, res.seconds, vmm_probe_verdict_name(res.verdict));
	return 0;
}
