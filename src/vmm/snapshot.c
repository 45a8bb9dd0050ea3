/* SPDX-License-Identifier: Apache-2.0 */
/* VM snapshot save and restore over KVM (see snapshot.h; file format in snapshot_format.h). */
#include "vmm/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "util/cleanup.h"
#include "util/util.h"
#include "vmm/snapshot_format.h"
#include "vmm/vm_priv.h"
#ifdef SPACE_HAVE_VIRTIO_BLK
#include "devices/virtio_mmio.h"
#endif

#define MAX_MSRS 1024u

/* The three chips of KVM's in-kernel irqchip, in KVM_GET_IRQCHIP's numbering. */
static const uint32_t irqchips[] = { KVM_IRQCHIP_PIC_MASTER, KVM_IRQCHIP_PIC_SLAVE, KVM_IRQCHIP_IOAPIC };

/* ---- CPU identity ---- */

/* Vendor, signature and a CRC of the supported CPUID list (features, sizes, topology limits): a
 * snapshot runs only where they match. */
static void cpu_identity(const struct kvm_cpuid2 *c, struct snap_header *h)
{
	memset(h->cpu_vendor, 0, sizeof(h->cpu_vendor));
	h->cpu_signature = 0;
	for (unsigned i = 0; i < c->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &c->entries[i];
		if (e->function == 0) {
			memcpy(h->cpu_vendor, &e->ebx, 4);
			memcpy(h->cpu_vendor + 4, &e->edx, 4);
			memcpy(h->cpu_vendor + 8, &e->ecx, 4);
		} else if (e->function == 1) {
			h->cpu_signature = e->eax;
		}
	}
	/* KVM fills some fields from the host CPU the call ran on (APIC IDs): those do not count. */
	uint32_t crc = 0;
	for (unsigned i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 e = c->entries[i];
		if (e.function == 1)
			e.ebx &= 0x00ffffffu;
		else if (e.function == 0xb || e.function == 0x1f)
			e.edx = 0;
		else if (e.function == 0x8000001e)
			e.eax = e.ebx = e.ecx = 0;
		crc = snap_crc32c(crc, &e, sizeof(e));
	}
	h->cpuid_crc = crc;
}

/* ---- save ---- */

/* KVM_GET_MSR_INDEX_LIST into a malloc'd list. */
static int msr_index_list(int kvm_fd, struct kvm_msr_list **ret)
{
	struct kvm_msr_list probe = { .nmsrs = 0 };
	if (ioctl(kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return -errno;
	if (probe.nmsrs == 0 || probe.nmsrs > MAX_MSRS)
		return -E2BIG;
	struct kvm_msr_list *l = calloc(1, sizeof(*l) + probe.nmsrs * sizeof(l->indices[0]));
	if (!l)
		return -ENOMEM;
	l->nmsrs = probe.nmsrs;
	if (ioctl(kvm_fd, KVM_GET_MSR_INDEX_LIST, l) < 0) {
		int r = -errno;
		free(l);
		return r;
	}
	*ret = l;
	return 0;
}

/*
 * KVM_GET_MSRS or KVM_SET_MSRS over m->entries[0..n): both stop at the first MSR they refuse and
 * return how many they did. That MSR is dropped (it is not part of this VM's state) and the rest
 * retried. Compacts m to the MSRs that worked; returns their count or -errno.
 */
static int msrs_xfer(int fd, unsigned long req, struct kvm_msrs *m, unsigned n)
{
	_Alignas(struct kvm_msrs) uint8_t one[sizeof(struct kvm_msrs) + 64 * sizeof(struct kvm_msr_entry)];
	struct kvm_msrs *w = (struct kvm_msrs *)one;
	unsigned done = 0, at = 0;
	while (at < n) {
		unsigned chunk = n - at < 64 ? n - at : 64;
		memset(one, 0, sizeof(one));
		w->nmsrs = chunk;
		memcpy(w->entries, m->entries + at, chunk * sizeof(w->entries[0]));
		int r = ioctl(fd, req, w);
		if (r < 0)
			return -errno;
		memmove(m->entries + done, w->entries, (size_t)r * sizeof(w->entries[0]));
		done += (unsigned)r;
		at += (unsigned)r;
		if ((unsigned)r < chunk)
			at++; /* skip the one KVM refused */
	}
	m->nmsrs = done;
	return (int)done;
}

/* A vCPU stopped right after a PIO/MMIO exit finishes that instruction on its next KVM_RUN: do that
 * now (immediate_exit makes KVM_RUN complete it and return EINTR), so the saved registers are past it. */
static int vcpu_complete_io(struct vcpu *v)
{
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	int r = ioctl(v->fd, KVM_RUN, 0);
	int e = errno;
	__atomic_store_n(&v->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
	if (r < 0 && e != EINTR && e != EAGAIN)
		return -e;
	return 0;
}

struct getter {
	uint32_t type;
	unsigned long req;
	size_t size;
	long cap; /* 0: always there */
};

static const struct getter vcpu_getters[] = {
	{ SNAP_VCPU_REGS, KVM_GET_REGS, sizeof(struct kvm_regs), 0 },
	{ SNAP_VCPU_SREGS, KVM_GET_SREGS, sizeof(struct kvm_sregs), 0 },
	{ SNAP_VCPU_XSAVE, KVM_GET_XSAVE, sizeof(struct kvm_xsave), KVM_CAP_XSAVE },
	{ SNAP_VCPU_XCRS, KVM_GET_XCRS, sizeof(struct kvm_xcrs), KVM_CAP_XCRS },
	{ SNAP_VCPU_LAPIC, KVM_GET_LAPIC, sizeof(struct kvm_lapic_state), 0 },
	{ SNAP_VCPU_EVENTS, KVM_GET_VCPU_EVENTS, sizeof(struct kvm_vcpu_events), KVM_CAP_VCPU_EVENTS },
	{ SNAP_VCPU_MP_STATE, KVM_GET_MP_STATE, sizeof(struct kvm_mp_state), KVM_CAP_MP_STATE },
	{ SNAP_VCPU_DEBUGREGS, KVM_GET_DEBUGREGS, sizeof(struct kvm_debugregs), KVM_CAP_DEBUGREGS },
};

static bool has_cap(struct vm *vm, long cap)
{
	return cap == 0 || ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, cap) > 0;
}

static int save_vcpu(struct vm *vm, struct vcpu *v, const struct kvm_msr_list *list, struct snap_buf *b)
{
	_Alignas(16) uint8_t buf[sizeof(struct kvm_xsave)];
	for (size_t i = 0; i < ARRAY_SIZE(vcpu_getters); i++) {
		const struct getter *g = &vcpu_getters[i];
		uint32_t type = g->type;
		unsigned long req = g->req;
		size_t size = g->size;
		if (!has_cap(vm, g->cap)) {
			if (type != SNAP_VCPU_XSAVE)
				continue;
			type = SNAP_VCPU_FPU; /* no XSAVE: the legacy FPU/SSE state */
			req = KVM_GET_FPU;
			size = sizeof(struct kvm_fpu);
		}
		memset(buf, 0, sizeof(buf));
		if (ioctl(v->fd, req, buf) < 0)
			return vm_fail(vm, -errno, "snapshot: vCPU %u state (section %u): %m", v->id, type);
		snap_buf_add(b, type, v->id, buf, size);
	}
	_cleanup_free_ struct kvm_msrs *m = calloc(1, sizeof(*m) + list->nmsrs * sizeof(m->entries[0]));
	if (!m)
		return vm_fail(vm, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < list->nmsrs; i++)
		m->entries[i].index = list->indices[i];
	int n = msrs_xfer(v->fd, KVM_GET_MSRS, m, list->nmsrs);
	if (n < 0)
		return vm_fail(vm, n, "snapshot: KVM_GET_MSRS on vCPU %u: %s", v->id, strerror(-n));
	uint32_t head[2] = { (uint32_t)n, 0 };
	snap_buf_add2(b, SNAP_VCPU_MSRS, v->id, head, sizeof(head), m->entries, (size_t)n * sizeof(m->entries[0]));
	return b->err;
}

static int save_machine(struct vm *vm, struct snap_buf *b)
{
	for (size_t i = 0; i < ARRAY_SIZE(irqchips); i++) {
		struct kvm_irqchip c = { .chip_id = irqchips[i] };
		if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &c) < 0)
			return vm_fail(vm, -errno, "snapshot: KVM_GET_IRQCHIP %u: %m", irqchips[i]);
		snap_buf_add(b, SNAP_VM_IRQCHIP, irqchips[i], &c, sizeof(c));
	}
	struct kvm_pit_state2 pit;
	memset(&pit, 0, sizeof(pit));
	if (ioctl(vm->vm_fd, KVM_GET_PIT2, &pit) < 0)
		return vm_fail(vm, -errno, "snapshot: KVM_GET_PIT2: %m");
	snap_buf_add(b, SNAP_VM_PIT2, 0, &pit, sizeof(pit));
	struct kvm_clock_data clock;
	memset(&clock, 0, sizeof(clock));
	if (ioctl(vm->vm_fd, KVM_GET_CLOCK, &clock) < 0)
		return vm_fail(vm, -errno, "snapshot: KVM_GET_CLOCK: %m");
	snap_buf_add(b, SNAP_VM_CLOCK, 0, &clock, sizeof(clock));

	struct serial_state ss;
	serial_save(vm->serial, &ss);
	snap_buf_add(b, SNAP_DEV_SERIAL, 0, &ss, sizeof(ss));
	struct i8042_state ks;
	i8042_save(vm->i8042, &ks);
	snap_buf_add(b, SNAP_DEV_I8042, 0, &ks, sizeof(ks));
	for (unsigned i = 0; i < vm->nmmio; i++) {
#ifdef SPACE_HAVE_VIRTIO_BLK
		struct virtio_mmio *t = vm->mmio[i].dev.virtio;
		if (!t)
			return vm_fail(vm, -EOPNOTSUPP, "snapshot: device %u cannot be saved", i);
		struct virtio_mmio_state st;
		uint8_t dev[VIRTIO_MMIO_DEV_STATE_MAX];
		int r = virtio_mmio_save(t, &st, dev, sizeof(dev));
		if (r < 0)
			return vm_fail(vm, r, "snapshot: device %u: %s", i, strerror(-r));
		snap_buf_add2(b, SNAP_DEV_VIRTIO, i, &st, sizeof(st), dev, st.dev_len);
#else
		return vm_fail(vm, -EOPNOTSUPP, "snapshot: device %u cannot be saved", i);
#endif
	}
	return b->err;
}

static bool page_is_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	uint64_t acc = 0;
	for (size_t i = 0; i < SNAP_PAGE / 8; i++)
		acc |= w[i];
	return acc == 0;
}

/* Writes the non-zero pages of RAM [from, to) at base + offset; zero pages stay holes. */
static int write_pages(struct vm *vm, int fd, uint64_t base, uint64_t from, uint64_t to, uint64_t *written)
{
	uint64_t run = UINT64_MAX; /* start of the current run of non-zero pages */
	for (uint64_t at = from; at <= to; at += SNAP_PAGE) {
		bool data = at < to && !page_is_zero(vm->ram + at);
		if (data && run == UINT64_MAX)
			run = at;
		if (!data && run != UINT64_MAX) {
			int r = util_pwrite_all(fd, vm->ram + run, at - run, base + run);
			if (r < 0)
				return r;
			*written += at - run;
			run = UINT64_MAX;
		}
	}
	return 0;
}

/* Guest RAM at offset base, sparse. A memfd tells where its data is (SEEK_DATA): only that is read,
 * so untouched RAM is neither scanned nor faulted in. */
static int write_ram(struct vm *vm, int fd, uint64_t base, uint64_t *written)
{
	uint64_t size = vm->ram_size;
	*written = 0;
	if (vm->ram_private)
		return write_pages(vm, fd, base, 0, size, written);
	uint64_t pos = 0;
	while (pos < size) {
		off_t d = lseek(vm->mem_fd, (off_t)pos, SEEK_DATA);
		if (d < 0 && errno == ENXIO)
			break;
		if (d < 0)
			return write_pages(vm, fd, base, pos, size, written); /* no SEEK_DATA: scan it all */
		off_t h = lseek(vm->mem_fd, d, SEEK_HOLE);
		uint64_t end = h < 0 || (uint64_t)h > size ? size : (uint64_t)h;
		uint64_t start = (uint64_t)d / SNAP_PAGE * SNAP_PAGE;
		end = (end + SNAP_PAGE - 1) / SNAP_PAGE * SNAP_PAGE;
		if (end > size)
			end = size;
		int r = write_pages(vm, fd, base, start, end, written);
		if (r < 0)
			return r;
		pos = end > pos ? end : pos + SNAP_PAGE;
	}
	return 0;
}

/* Whether the VM may be saved now: paused with every started vCPU parked, or loaded and not run. */
static bool vm_quiet(struct vm *vm)
{
	if (!vm->ran)
		return vm->loaded;
	pthread_mutex_lock(&vm->pause_lock);
	unsigned started = 0;
	for (unsigned i = 0; i < vm->nvcpus; i++)
		started += vm->vcpus[i].thread_started;
	bool quiet = atomic_load(&vm->pause_req) && !atomic_load(&vm->stopping) && vm->parked == started;
	pthread_mutex_unlock(&vm->pause_lock);
	return quiet;
}

static int build_meta(struct vm *vm, struct snap_buf *b)
{
	_cleanup_free_ struct kvm_msr_list *list = NULL;
	int r = msr_index_list(vm->kvm_fd, &list);
	if (r < 0)
		return vm_fail(vm, r, "snapshot: KVM_GET_MSR_INDEX_LIST: %s", strerror(-r));
	for (unsigned i = 0; i < vm->nvcpus; i++) {
		if (vm->ran && (r = vcpu_complete_io(&vm->vcpus[i])) < 0)
			return vm_fail(vm, r, "snapshot: cannot complete vCPU %u's last exit: %s", i, strerror(-r));
		if ((r = save_vcpu(vm, &vm->vcpus[i], list, b)) < 0)
			return r;
	}
	if ((r = save_machine(vm, b)) < 0)
		return r;
	struct snap_header h = { .nvcpus = vm->nvcpus, .mem_bytes = vm->ram_size };
	snprintf(h.libspace_version, sizeof(h.libspace_version), "%s", SPACE_VERSION_STRING);
	cpu_identity(vm->cpuid, &h);
	r = snap_buf_finish(b, &h);
	if (r < 0)
		return vm_fail(vm, r, "snapshot: %s", strerror(-r));
	return 0;
}

/* Header, sections and sparse RAM into fd from offset 0, then its size and an fsync. */
static int save_to_fd(struct vm *vm, int fd)
{
	if (!vm_quiet(vm))
		return vm_fail(vm, -EBUSY, "snapshot: the VM must be paused first");
	struct snap_buf b;
	if (snap_buf_init(&b) < 0)
		return vm_fail(vm, -ENOMEM, "out of memory");
	int r = build_meta(vm, &b);
	if (r < 0) {
		snap_buf_free(&b);
		return r;
	}
	uint64_t mem_off = snap_mem_offset(b.len), written = 0;
	if ((r = util_pwrite_all(fd, b.p, b.len, 0)) < 0 || (r = write_ram(vm, fd, mem_off, &written)) < 0 ||
	    (ftruncate(fd, (off_t)(mem_off + vm->ram_size)) < 0 && (r = -errno)) || (fsync(fd) < 0 && (r = -errno))) {
		snap_buf_free(&b);
		return vm_fail(vm, r, "snapshot: cannot write: %s", strerror(-r));
	}
	snap_buf_free(&b);
	return 0;
}

int vm_snapshot_save_fd(struct vm *vm, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return vm_fail(vm, -EBADF, "snapshot: the file given is not a regular file");
	if (ftruncate(fd, 0) < 0)
		return vm_fail(vm, -errno, "snapshot: cannot truncate the file given: %m");
	return save_to_fd(vm, fd);
}

int vm_snapshot_save(struct vm *vm, const char *path)
{
	if (!vm_quiet(vm))
		return vm_fail(vm, -EBUSY, "snapshot: the VM must be paused first");
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return vm_fail(vm, -ENOMEM, "out of memory");
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return vm_fail(vm, -errno, "snapshot: cannot create %s: %m", tmp);
	int r = save_to_fd(vm, fd);
	if (r == 0 && rename(tmp, path) < 0)
		r = vm_fail(vm, -errno, "snapshot: cannot write %s: %m", path);
	if (r < 0)
		(void)unlink(tmp);
	return r;
}

/* ---- restore ---- */

/* Reads and checks the header and sections of the open snapshot fd (meta is malloc'd). */
static int read_meta(int fd, const char *path, struct snap_header *h, uint8_t **ret, char *err, size_t errlen)
{
	uint8_t hb[sizeof(struct snap_header)];
	ssize_t n = pread(fd, hb, sizeof(hb), 0);
	if (n < 0)
		return util_errf(err, errlen, -errno, "cannot read snapshot %s: %m", path);
	char why[160];
	int r = snap_parse_header(hb, (size_t)n, h, why, sizeof(why));
	if (r < 0)
		return util_errf(err, errlen, r, "%s: %s", path, why);
	if (strcmp(h->libspace_version, SPACE_VERSION_STRING) != 0)
		return util_errf(err, errlen, -EPROTONOSUPPORT, "%s: snapshot from libspace %s, this is %s", path,
			     h->libspace_version, SPACE_VERSION_STRING);
	size_t len = sizeof(*h) + (size_t)h->sections_len; /* bounded by snap_parse_header */
	_cleanup_free_ uint8_t *meta = malloc(len);
	if (!meta)
		return util_errf(err, errlen, -ENOMEM, "out of memory");
	n = pread(fd, meta, len, 0);
	if (n < 0)
		return util_errf(err, errlen, -errno, "cannot read snapshot %s: %m", path);
	if ((r = snap_parse(meta, (size_t)n, h, why, sizeof(why))) < 0)
		return util_errf(err, errlen, r, "%s: %s", path, why);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return util_errf(err, errlen, -errno, "cannot stat snapshot %s: %m", path);
	if ((uint64_t)st.st_size < h->mem_offset + h->mem_bytes)
		return util_errf(err, errlen, -EINVAL, "%s: snapshot truncated: %llu bytes, guest memory ends at %llu",
			     path, (unsigned long long)st.st_size,
			     (unsigned long long)(h->mem_offset + h->mem_bytes));
	*ret = TAKE_PTR(meta);
	return 0;
}

static const struct getter vcpu_setters[] = {
	/* sregs first (APIC base, EFER, CR4.OSXSAVE decide what the rest may hold), then registers,
	 * extended state, the LAPIC before the MSRs (TSC_DEADLINE is ignored unless the LAPIC timer is
	 * in deadline mode), pending events, MP state and debug registers last. */
	{ SNAP_VCPU_SREGS, KVM_SET_SREGS, 0, 0 },
	{ SNAP_VCPU_REGS, KVM_SET_REGS, 0, 0 },
	{ SNAP_VCPU_XSAVE, KVM_SET_XSAVE, 0, KVM_CAP_XSAVE },
	{ SNAP_VCPU_FPU, KVM_SET_FPU, 0, 0 },
	{ SNAP_VCPU_XCRS, KVM_SET_XCRS, 0, KVM_CAP_XCRS },
	{ SNAP_VCPU_LAPIC, KVM_SET_LAPIC, 0, 0 },
	{ SNAP_VCPU_MSRS, KVM_SET_MSRS, 0, 0 },
	{ SNAP_VCPU_EVENTS, KVM_SET_VCPU_EVENTS, 0, KVM_CAP_VCPU_EVENTS },
	{ SNAP_VCPU_MP_STATE, KVM_SET_MP_STATE, 0, KVM_CAP_MP_STATE },
	{ SNAP_VCPU_DEBUGREGS, KVM_SET_DEBUGREGS, 0, KVM_CAP_DEBUGREGS },
};

static int restore_msrs(struct vm *vm, struct vcpu *v, const struct snap_section *s)
{
	uint32_t count;
	memcpy(&count, s->data, sizeof(count)); /* matches the section size: snap_parse checked */
	_cleanup_free_ struct kvm_msrs *m = calloc(1, sizeof(*m) + (size_t)count * sizeof(m->entries[0]));
	if (!m)
		return vm_fail(vm, -ENOMEM, "out of memory");
	memcpy(m->entries, s->data + 8, (size_t)count * sizeof(m->entries[0]));
	int n = msrs_xfer(v->fd, KVM_SET_MSRS, m, count);
	if (n < 0)
		return vm_fail(vm, n, "restore: KVM_SET_MSRS on vCPU %u: %s", v->id, strerror(-n));
	return 0;
}

static int restore_vcpu(struct vm *vm, struct vcpu *v, const uint8_t *meta, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(vcpu_setters); i++) {
		const struct getter *g = &vcpu_setters[i];
		struct snap_section s;
		if (!snap_find(meta, len, g->type, v->id, &s)) {
			if (g->type == SNAP_VCPU_REGS || g->type == SNAP_VCPU_SREGS)
				return vm_fail(vm, -EINVAL, "restore: vCPU %u has no registers in the snapshot", v->id);
			continue;
		}
		if (!has_cap(vm, g->cap))
			return vm_fail(vm, -ENOEXEC, "restore: this KVM cannot take section %u", g->type);
		int r;
		if (g->type == SNAP_VCPU_MSRS) {
			if ((r = restore_msrs(vm, v, &s)) < 0)
				return r;
			continue;
		}
		/* A copy, aligned for KVM and of the struct's exact size (snap_parse checked it). */
		_Alignas(16) uint8_t buf[sizeof(struct kvm_xsave)];
		memcpy(buf, s.data, s.len);
		if (ioctl(v->fd, g->req, buf) < 0)
			return vm_fail(vm, -errno, "restore: vCPU %u state (section %u): %m", v->id, g->type);
	}
	return 0;
}

static int restore_machine(struct vm *vm, const uint8_t *meta, size_t len)
{
	struct snap_section s;
	for (size_t i = 0; i < ARRAY_SIZE(irqchips); i++) {
		if (!snap_find(meta, len, SNAP_VM_IRQCHIP, irqchips[i], &s))
			return vm_fail(vm, -EINVAL, "restore: irqchip %u missing from the snapshot", irqchips[i]);
		struct kvm_irqchip c;
		memcpy(&c, s.data, sizeof(c));
		c.chip_id = irqchips[i];
		if (ioctl(vm->vm_fd, KVM_SET_IRQCHIP, &c) < 0)
			return vm_fail(vm, -errno, "restore: KVM_SET_IRQCHIP %u: %m", irqchips[i]);
	}
	if (snap_find(meta, len, SNAP_VM_PIT2, 0, &s)) {
		struct kvm_pit_state2 pit;
		memcpy(&pit, s.data, sizeof(pit));
		if (ioctl(vm->vm_fd, KVM_SET_PIT2, &pit) < 0)
			return vm_fail(vm, -errno, "restore: KVM_SET_PIT2: %m");
	}
	return 0;
}

/* kvmclock continues from the saved value (flags 0: no realtime catch-up). After the vCPUs' TSCs. */
static int restore_clock(struct vm *vm, const uint8_t *meta, size_t len)
{
	struct snap_section s;
	if (!snap_find(meta, len, SNAP_VM_CLOCK, 0, &s))
		return 0;
	struct kvm_clock_data saved, c;
	memcpy(&saved, s.data, sizeof(saved));
	memset(&c, 0, sizeof(c));
	c.clock = saved.clock;
	if (ioctl(vm->vm_fd, KVM_SET_CLOCK, &c) < 0)
		return vm_fail(vm, -errno, "restore: KVM_SET_CLOCK: %m");
	return 0;
}

static int restore_devices(struct vm *vm, const uint8_t *meta, size_t len)
{
	struct snap_section s;
	if (snap_find(meta, len, SNAP_DEV_SERIAL, 0, &s)) {
		struct serial_state ss;
		memcpy(&ss, s.data, sizeof(ss));
		serial_restore(vm->serial, &ss);
	}
	if (snap_find(meta, len, SNAP_DEV_I8042, 0, &s)) {
		struct i8042_state ks;
		memcpy(&ks, s.data, sizeof(ks));
		i8042_restore(vm->i8042, &ks);
	}
	unsigned saved = 0;
	size_t pos = 0;
	while (snap_next(meta, len, &pos, &s) == 1)
		saved += s.type == SNAP_DEV_VIRTIO;
	if (saved != vm->nmmio)
		return vm_fail(vm, -EINVAL, "restore: the snapshot has %u devices, the VM was given %u", saved,
			       vm->nmmio);
	for (unsigned i = 0; i < vm->nmmio; i++) {
#ifdef SPACE_HAVE_VIRTIO_BLK
		struct virtio_mmio *t = vm->mmio[i].dev.virtio;
		struct virtio_mmio_state st;
		if (!t || !snap_find(meta, len, SNAP_DEV_VIRTIO, i, &s))
			return vm_fail(vm, -EINVAL, "restore: device %u does not match the snapshot", i);
		memcpy(&st, s.data, sizeof(st));
		int r = virtio_mmio_restore(t, &st, s.data + sizeof(st), (size_t)s.len - sizeof(st));
		if (r < 0)
			return vm_fail(vm, r, "restore: device %u (%s) does not match its saved state", i,
				       vm->mmio[i].dev.name ? vm->mmio[i].dev.name : "?");
#endif
	}
	return 0;
}

static int restore_all(struct vm *vm, const uint8_t *meta, size_t len)
{
	int r;
	if ((r = restore_machine(vm, meta, len)) < 0)
		return r;
	for (unsigned i = 0; i < vm->nvcpus; i++)
		if ((r = restore_vcpu(vm, &vm->vcpus[i], meta, len)) < 0)
			return r;
	if ((r = restore_clock(vm, meta, len)) < 0)
		return r;
	/* Devices last: a device may raise an interrupt right away (vsock RSTs), into a restored LAPIC. */
	return restore_devices(vm, meta, len);
}

int vm_create_from_snapshot(const char *path, const struct vm_restore_config *cfg, struct vm **ret,
			    char *err, size_t errlen)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return util_errf(err, errlen, -errno, "cannot open snapshot %s: %m", path);
	struct snap_header h;
	_cleanup_free_ uint8_t *meta = NULL;
	int r = read_meta(fd, path, &h, &meta, err, errlen);
	if (r < 0)
		return r;
	size_t len = sizeof(h) + (size_t)h.sections_len;

	struct vm_config vc = VM_CONFIG_INIT;
	vc.cpus = h.nvcpus;
	vc.mem_bytes = h.mem_bytes;
	vc.console_fd = cfg->console_fd;
	vc.console_log_fd = cfg->console_log_fd;
	vc.console_log_old_fd = cfg->console_log_old_fd;
	vc.console_log_max = cfg->console_log_max;
	vc.kvm_fd = cfg->kvm_fd;
	vc.ram_fd = fd;
	vc.ram_offset = h.mem_offset;
	struct vm *vm = NULL;
	if ((r = vm_create(&vc, &vm, err, errlen)) < 0)
		return r;
	struct snap_header here = h;
	cpu_identity(vm->cpuid, &here);
	if (here.cpuid_crc != h.cpuid_crc || here.cpu_signature != h.cpu_signature ||
	    memcmp(here.cpu_vendor, h.cpu_vendor, sizeof(h.cpu_vendor)) != 0) {
		r = util_errf(err, errlen, -ENOEXEC,
			  "%s: snapshot taken on another CPU feature set (%s signature 0x%x cpuid crc 0x%08x; "
			  "this host: %s 0x%x 0x%08x)", path, h.cpu_vendor, h.cpu_signature, h.cpuid_crc,
			  here.cpu_vendor, here.cpu_signature, here.cpuid_crc);
		vm_destroy(vm);
		return r;
	}
	if ((cfg->add_devices && (r = cfg->add_devices(vm, cfg->userdata)) < 0) ||
	    (r = restore_all(vm, meta, len)) < 0) {
		util_errf(err, errlen, r, "%s", vm_error(vm)[0] ? vm_error(vm) : strerror(-r));
		vm_destroy(vm);
		return r;
	}
	vm->loaded = true;
	*ret = vm;
	return 0;
}
