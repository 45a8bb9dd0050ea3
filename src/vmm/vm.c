/* SPDX-License-Identifier: Apache-2.0 */
/* The VM object: KVM setup, guest RAM, platform devices, kernel loading and the run/stop protocol. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"
#include "vmm/acpi.h"
#include "vmm/boot.h"
#include "vmm/sandbox.h"
#include "vmm/vm_priv.h"
#ifdef SPACE_HAVE_VIRTIO_BLK
#include "devices/virtio_blk.h"
#endif
#ifdef SPACE_HAVE_VIRTIO_RNG
#include "devices/virtio_rng.h"
#endif
#ifdef SPACE_HAVE_VIRTIO_VSOCK
#include "devices/virtio_vsock.h"
#endif
#ifdef SPACE_HAVE_VIRTIO_NET
#include "devices/virtio_net.h"
#endif

#define KERNEL_MAX_BYTES (512ull << 20)
#define INITRD_MAX_BYTES (1ull << 30)

int vm_fail(struct vm *vm, int r, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	errno = saved; /* for %m */
	vsnprintf(vm->err, sizeof(vm->err), fmt, ap);
	va_end(ap);
	return r;
}

void vm_stop(struct vm *vm, enum vm_exit_reason reason, unsigned code, const char *fmt, ...)
{
	pthread_mutex_lock(&vm->lock);
	if (vm->outcome.reason == VM_EXIT_NONE) {
		vm->outcome.reason = reason;
		vm->outcome.guest_code = code;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(vm->outcome.detail, sizeof(vm->outcome.detail), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&vm->lock);
	atomic_store(&vm->stopping, true);
	/* Parked vCPUs wake up and leave. */
	pthread_mutex_lock(&vm->pause_lock);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
	uint64_t one = 1;
	if (write(vm->stop_fd, &one, sizeof(one)) < 0) {
		/* The counter cannot overflow with one write per vCPU; nothing else can fail here. */
	}
}

const char *vm_error(const struct vm *vm)
{
	return vm->err;
}

const struct guest_mem *vm_guest_mem(const struct vm *vm)
{
	return &vm->mem;
}

static int setup_memory(struct vm *vm)
{
	uint64_t size = vm->cfg.mem_bytes;
	void *p;
	if (vm->cfg.ram_fd > 0) {
		/* A snapshot's RAM: private copy-on-write pages over the file (see vm_config.ram_fd). */
		vm->mem_fd = fcntl(vm->cfg.ram_fd, F_DUPFD_CLOEXEC, 3);
		if (vm->mem_fd < 0)
			return vm_fail(vm, -errno, "cannot duplicate the guest RAM file: %m");
		vm->ram_private = true;
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, vm->mem_fd,
			 (off_t)vm->cfg.ram_offset);
	} else {
		vm->mem_fd = memfd_create("space-guest-ram", MFD_CLOEXEC);
		if (vm->mem_fd < 0)
			return vm_fail(vm, -errno, "memfd_create: %m");
		if (ftruncate(vm->mem_fd, (off_t)size) < 0)
			return vm_fail(vm, -errno, "cannot size guest RAM to %llu bytes: %m",
				       (unsigned long long)size);
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, vm->mem_fd, 0);
	}
	if (p == MAP_FAILED)
		return vm_fail(vm, -errno, "mmap of guest RAM: %m");
	vm->ram = p;
	vm->ram_size = size;
	uint64_t low = size < VM_LOW_RAM_END ? size : VM_LOW_RAM_END;
	vm->mem.regions[0] = (struct guest_region){ 0, low, vm->ram };
	vm->mem.nregions = 1;
	if (size > low) {
		vm->mem.regions[1] = (struct guest_region){ VM_HIGH_RAM_START, size - low, vm->ram + low };
		vm->mem.nregions = 2;
	}
	for (unsigned i = 0; i < vm->mem.nregions; i++) {
		struct kvm_userspace_memory_region r = {
			.slot = i,
			.guest_phys_addr = vm->mem.regions[i].gpa,
			.memory_size = vm->mem.regions[i].size,
			.userspace_addr = (uintptr_t)vm->mem.regions[i].host,
		};
		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0)
			return vm_fail(vm, -errno, "KVM_SET_USER_MEMORY_REGION: %m");
	}
	return 0;
}

static void serial_irq(void *opaque)
{
	struct vm *vm = opaque;
	/* The ISA serial interrupt is edge-triggered: pulse the line. */
	struct kvm_irq_level l = { .irq = SERIAL_COM1_IRQ, .level = 1 };
	(void)ioctl(vm->vm_fd, KVM_IRQ_LINE, &l);
	l.level = 0;
	(void)ioctl(vm->vm_fd, KVM_IRQ_LINE, &l);
}

static int check_cap(struct vm *vm, long cap, const char *name)
{
	if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, cap) <= 0)
		return vm_fail(vm, -EOPNOTSUPP, "this KVM lacks %s", name);
	return 0;
}

int vm_create(const struct vm_config *cfg, struct vm **ret, char *err, size_t errlen)
{
	if (!cfg->cpus || cfg->cpus > VM_MAX_VCPUS || cfg->mem_bytes < (16ull << 20) ||
	    cfg->mem_bytes % 4096 || cfg->mem_bytes > (1ull << 40) || cfg->ram_offset % 4096) {
		if (err && errlen)
			snprintf(err, errlen, "bad VM configuration (1..%d vCPUs, >= 16 MiB of RAM)", VM_MAX_VCPUS);
		return -EINVAL;
	}
	struct vm *vm = calloc(1, sizeof(*vm));
	if (!vm) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	vm->cfg = *cfg;
	vm->kvm_fd = vm->vm_fd = vm->mem_fd = -1;
	for (unsigned i = 0; i < VM_MAX_VCPUS; i++)
		vm->vcpus[i].fd = -1;
	pthread_mutex_init(&vm->lock, NULL);
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&vm->pause_cond, &ca);
	pthread_condattr_destroy(&ca);
	int r;
	vm->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->stop_fd < 0) {
		r = vm_fail(vm, -errno, "eventfd: %m");
		goto fail;
	}
	vm->kvm_fd = cfg->kvm_fd > 0 ? fcntl(cfg->kvm_fd, F_DUPFD_CLOEXEC, 3) : open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->kvm_fd < 0) {
		r = vm_fail(vm, -errno, "cannot open /dev/kvm: %m");
		goto fail;
	}
	if (ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
		r = vm_fail(vm, -EOPNOTSUPP, "unsupported KVM API version");
		goto fail;
	}
	if ((r = check_cap(vm, KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP")) < 0 ||
	    (r = check_cap(vm, KVM_CAP_PIT2, "KVM_CAP_PIT2")) < 0 ||
	    (r = check_cap(vm, KVM_CAP_IRQFD, "KVM_CAP_IRQFD")) < 0 ||
	    (r = check_cap(vm, KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT")) < 0 ||
	    (r = check_cap(vm, KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY")) < 0)
		goto fail;
	int run_size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size < (int)sizeof(struct kvm_run)) {
		r = vm_fail(vm, -EIO, "KVM_GET_VCPU_MMAP_SIZE failed");
		goto fail;
	}
	vm->run_size = (size_t)run_size;
	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0) {
		r = vm_fail(vm, -errno, "KVM_CREATE_VM: %m");
		goto fail;
	}
	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)VM_TSS_ADDR) < 0) {
		r = vm_fail(vm, -errno, "KVM_SET_TSS_ADDR: %m");
		goto fail;
	}
	uint64_t idmap = VM_IDENTITY_MAP;
	if (ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &idmap) < 0) {
		r = vm_fail(vm, -errno, "KVM_SET_IDENTITY_MAP_ADDR: %m");
		goto fail;
	}
	if ((r = setup_memory(vm)) < 0)
		goto fail;
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0) {
		r = vm_fail(vm, -errno, "KVM_CREATE_IRQCHIP: %m");
		goto fail;
	}
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0) {
		r = vm_fail(vm, -errno, "KVM_CREATE_PIT2: %m");
		goto fail;
	}
	const struct serial_log slog = { .fd = cfg->console_log_fd, .old_fd = cfg->console_log_old_fd,
					 .max = cfg->console_log_max };
	if ((r = serial_create(cfg->console_fd, &slog, serial_irq, vm, &vm->serial)) < 0 ||
	    (r = i8042_create(&vm->i8042)) < 0) {
		vm_fail(vm, r, "cannot create platform devices");
		goto fail;
	}
	if ((r = cpuid_get_supported(vm->kvm_fd, &vm->cpuid)) < 0) {
		vm_fail(vm, r, "KVM_GET_SUPPORTED_CPUID failed");
		goto fail;
	}
	for (unsigned i = 0; i < cfg->cpus; i++) {
		if ((r = vcpu_init(vm, i)) < 0)
			goto fail;
		vm->nvcpus = i + 1;
	}
	*ret = vm;
	return 0;
fail:
	if (err && errlen)
		snprintf(err, errlen, "%s", vm->err[0] ? vm->err : strerror(-r));
	vm_destroy(vm);
	return r;
}

static int mmio_irq_trigger(void *opaque)
{
	struct vm_mmio_slot *slot = opaque;
	uint64_t one = 1;
	return write(slot->irq_fd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
}

#if defined(SPACE_HAVE_VIRTIO_BLK)
/* Device creation for add_mmio_dev: fills *dev over the VM's RAM, raising irq. */
typedef int (*mmio_create_fn)(const void *arg, const struct guest_mem *mem, struct mmio_irq irq,
			      struct mmio_dev *dev);

/* Places a new MMIO device in the next free window and GSI, with an irqfd for its interrupt. */
static int add_mmio_dev(struct vm *vm, mmio_create_fn create, const void *arg, const char *what)
{
	if (vm->loaded)
		return vm_fail(vm, -EBUSY, "devices must be added before the kernel is loaded");
	if (vm->nmmio == VM_MAX_MMIO_DEVS)
		return vm_fail(vm, -ENOSPC, "at most %d devices", VM_MAX_MMIO_DEVS);
	struct vm_mmio_slot *slot = &vm->mmio[vm->nmmio];
	unsigned gsi = VM_MMIO_FIRST_GSI + vm->nmmio;
	slot->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (slot->irq_fd < 0)
		return vm_fail(vm, -errno, "eventfd: %m");
	struct kvm_irqfd irqfd = { .fd = (uint32_t)slot->irq_fd, .gsi = gsi };
	if (ioctl(vm->vm_fd, KVM_IRQFD, &irqfd) < 0) {
		int r = vm_fail(vm, -errno, "KVM_IRQFD: %m");
		close(TAKE_FD(slot->irq_fd));
		return r;
	}
	struct mmio_irq irq = { .trigger = mmio_irq_trigger, .opaque = slot };
	int r = create(arg, &vm->mem, irq, &slot->dev);
	if (r < 0) {
		close(TAKE_FD(slot->irq_fd));
		return vm_fail(vm, r, "cannot create %s: %s", what, strerror(-r));
	}
	slot->dev.base = VM_MMIO_BASE + vm->nmmio * VM_MMIO_STRIDE;
	slot->dev.gsi = gsi;
	vm->nmmio++;
	return 0;
}

static int create_disk(const void *arg, const struct guest_mem *mem, struct mmio_irq irq,
		       struct mmio_dev *dev)
{
	return virtio_blk_create(arg, mem, irq, dev);
}
#endif

#ifdef SPACE_HAVE_VIRTIO_BLK
static void deadline_in(struct timespec *ts, long ms);

#define DISK_SPACE_RETRY_MS 1000

/*
 * A disk write found the host's file system full (the sandbox pool): the vCPU that made it waits here, a
 * second at a time, and the write is tried again, until it goes through or the VM stops. Said once in the
 * log each way; `status` on the control socket says "disk=pool-full" meanwhile, which the library shows as
 * the sandbox paused, "pool full".
 */
static bool vm_disk_wait_space(void *opaque, enum blk_space_event ev)
{
	struct vm *vm = opaque;
	if (ev == BLK_SPACE_BACK) {
		if (atomic_exchange(&vm->disk_full, false))
			fprintf(stderr, "space-vmm: resumed: the pool has room for the disk's writes again\n");
		return false;
	}
	if (!atomic_exchange(&vm->disk_full, true))
		fprintf(stderr, "space-vmm: paused: the pool is full; the disk's writes wait for room (they go on by "
				"themselves once space is freed)\n");
	pthread_mutex_lock(&vm->pause_lock);
	if (!atomic_load(&vm->stopping)) {
		struct timespec ts;
		deadline_in(&ts, DISK_SPACE_RETRY_MS);
		pthread_cond_timedwait(&vm->pause_cond, &vm->pause_lock, &ts);
	}
	pthread_mutex_unlock(&vm->pause_lock);
	return !atomic_load(&vm->stopping);
}
#endif

bool vm_disk_full(struct vm *vm)
{
	return atomic_load(&vm->disk_full);
}

int vm_add_disk(struct vm *vm, const char *path, bool read_only)
{
#ifdef SPACE_HAVE_VIRTIO_BLK
	struct virtio_blk_config bc = { .path = path, .read_only = read_only, .serial = NULL,
					.wait_space = vm_disk_wait_space, .wait_opaque = vm };
	return add_mmio_dev(vm, create_disk, &bc, path);
#else
	(void)path;
	(void)read_only;
	(void)mmio_irq_trigger;
	return vm_fail(vm, -EOPNOTSUPP, "this space-vmm was built without virtio-blk");
#endif
}

#ifdef SPACE_HAVE_VIRTIO_RNG
static int create_rng(const void *arg, const struct guest_mem *mem, struct mmio_irq irq,
		      struct mmio_dev *dev)
{
	(void)arg;
	return virtio_rng_create(mem, irq, dev);
}
#endif

int vm_add_rng(struct vm *vm)
{
#ifdef SPACE_HAVE_VIRTIO_RNG
	return add_mmio_dev(vm, create_rng, NULL, "virtio-rng");
#else
	return vm_fail(vm, -EOPNOTSUPP, "this space-vmm was built without virtio-rng");
#endif
}

#if defined(SPACE_HAVE_VIRTIO_VSOCK) || defined(SPACE_HAVE_VIRTIO_NET)
/* Device event threads (vsock host side, net receive) run in the DEVICE seccomp role. */
static int device_thread_enter(void)
{
	return vmm_seccomp_thread_enter(VMM_THREAD_DEVICE);
}
#endif

#ifdef SPACE_HAVE_VIRTIO_VSOCK
static int create_vsock(const void *arg, const struct guest_mem *mem, struct mmio_irq irq,
			struct mmio_dev *dev)
{
	return virtio_vsock_create(arg, mem, irq, dev);
}
#endif

int vm_add_vsock(struct vm *vm, uint64_t guest_cid, const char *uds_path)
{
#ifdef SPACE_HAVE_VIRTIO_VSOCK
	struct virtio_vsock_config vc = { .guest_cid = guest_cid, .uds_path = uds_path,
					  .thread_enter = device_thread_enter };
	return add_mmio_dev(vm, create_vsock, &vc, "virtio-vsock");
#else
	(void)guest_cid;
	(void)uds_path;
	return vm_fail(vm, -EOPNOTSUPP, "this space-vmm was built without virtio-vsock");
#endif
}

#ifdef SPACE_HAVE_VIRTIO_NET
static int create_net(const void *arg, const struct guest_mem *mem, struct mmio_irq irq, struct mmio_dev *dev)
{
	return virtio_net_create(arg, mem, irq, dev);
}
#endif

int vm_add_net(struct vm *vm, int tap_fd, const uint8_t mac[6])
{
#ifdef SPACE_HAVE_VIRTIO_NET
	struct virtio_net_config nc = { .fd = tap_fd, .thread_enter = device_thread_enter };
	memcpy(nc.mac, mac, sizeof(nc.mac));
	return add_mmio_dev(vm, create_net, &nc, "virtio-net");
#else
	(void)tap_fd;
	(void)mac;
	return vm_fail(vm, -EOPNOTSUPP, "this space-vmm was built without virtio-net");
#endif
}

static int build_cmdline(struct vm *vm, const char *user, char **ret)
{
	size_t cap = strlen(user) + 1 + vm->nmmio * 64;
	char *s = malloc(cap);
	if (!s)
		return -ENOMEM;
	size_t n = (size_t)snprintf(s, cap, "%s", user);
	for (unsigned i = 0; i < vm->nmmio; i++)
		n += (size_t)snprintf(s + n, cap - n, "%svirtio_mmio.device=%llu@0x%llx:%u", n ? " " : "",
				      (unsigned long long)vm->mmio[i].dev.size,
				      (unsigned long long)vm->mmio[i].dev.base, vm->mmio[i].dev.gsi);
	*ret = s;
	return 0;
}

int vm_load_kernel(struct vm *vm, const char *kernel_path, const char *initrd_path, const char *cmdline)
{
	if (vm->loaded)
		return vm_fail(vm, -EBUSY, "a kernel is already loaded");
	_cleanup_free_ char *kernel = NULL, *initrd = NULL, *full_cmdline = NULL;
	size_t klen = 0, ilen = 0;
	int r = util_read_file(kernel_path, KERNEL_MAX_BYTES, &kernel, &klen);
	if (r < 0)
		return vm_fail(vm, r, "cannot read kernel %s: %s", kernel_path, strerror(-r));
	struct kernel_image img;
	char why[160];
	r = kernel_image_parse((const uint8_t *)kernel, klen, &img, why, sizeof(why));
	if (r < 0)
		return vm_fail(vm, r, "%s: %s", kernel_path, why);
	if (initrd_path) {
		r = util_read_file(initrd_path, INITRD_MAX_BYTES, &initrd, &ilen);
		if (r < 0)
			return vm_fail(vm, r, "cannot read initrd %s: %s", initrd_path, strerror(-r));
	}
	r = build_cmdline(vm, cmdline ? cmdline : "", &full_cmdline);
	if (r < 0)
		return vm_fail(vm, r, "out of memory");

	struct acpi_config ac = { .cpus = vm->cfg.cpus, .nmmio = vm->nmmio };
	for (unsigned i = 0; i < vm->nmmio; i++)
		ac.mmio[i] = (struct acpi_mmio_dev){ vm->mmio[i].dev.base, (uint32_t)vm->mmio[i].dev.size,
						     vm->mmio[i].dev.gsi };
	uint8_t *acpi = guest_mem_ptr(&vm->mem, BOOT_ACPI_ADDR, BOOT_ACPI_SIZE);
	struct acpi_layout layout;
	if (!acpi || (r = acpi_build(&ac, acpi, BOOT_ACPI_SIZE, BOOT_ACPI_ADDR, &layout)) < 0)
		return vm_fail(vm, acpi ? r : -ENOMEM, "cannot build the ACPI tables");

	struct boot_request req = {
		.kernel = (const uint8_t *)kernel, .kernel_len = klen, .img = &img,
		.initrd = (const uint8_t *)initrd, .initrd_len = ilen,
		.cmdline = full_cmdline, .rsdp_addr = BOOT_ACPI_ADDR,
	};
	r = boot_load(&vm->mem, &req, why, sizeof(why));
	if (r < 0)
		return vm_fail(vm, r, "%s", why);
	r = vcpu_set_boot_state(&vm->vcpus[0], img.entry, BOOT_PARAMS_ADDR);
	if (r < 0)
		return r;
	vm->loaded = true;
	return 0;
}

static void on_kick(int sig)
{
	(void)sig; /* only there to make KVM_RUN return EINTR */
}

int vm_run(struct vm *vm, uint64_t timeout_ms, struct vm_outcome *ret)
{
	if (!vm->loaded)
		return vm_fail(vm, -EINVAL, "no kernel loaded");
	if (vm->ran)
		return vm_fail(vm, -EBUSY, "the VM has already run");
	vm->ran = true;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_kick; /* no SA_RESTART: the ioctl must return */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		return vm_fail(vm, -errno, "sigaction: %m");
	sigset_t unblock;
	sigemptyset(&unblock);
	sigaddset(&unblock, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &unblock, NULL);

	int r = 0;
	for (unsigned i = 0; i < vm->nvcpus; i++) {
		int e = pthread_create(&vm->vcpus[i].thread, NULL, vcpu_thread, &vm->vcpus[i]);
		if (e) {
			r = vm_fail(vm, -e, "cannot start vCPU thread: %s", strerror(e));
			vm_stop(vm, VM_EXIT_INTERNAL, 0, "cannot start vCPU threads");
			break;
		}
		vm->vcpus[i].thread_started = true;
	}
	uint64_t deadline = timeout_ms ? util_now_ns() + timeout_ms * 1000000ull : 0;
	while (!atomic_load(&vm->stopping)) {
		int wait_ms = -1;
		if (deadline) {
			uint64_t now = util_now_ns();
			if (now >= deadline) {
				vm_stop(vm, VM_EXIT_TIMEOUT, 0, "timeout after %llu ms", (unsigned long long)timeout_ms);
				break;
			}
			uint64_t left = (deadline - now + 999999) / 1000000;
			wait_ms = left > 60000 ? 60000 : (int)left;
		}
		struct pollfd p = { .fd = vm->stop_fd, .events = POLLIN };
		if (poll(&p, 1, wait_ms) < 0 && errno != EINTR) {
			vm_stop(vm, VM_EXIT_INTERNAL, 0, "poll: %s", strerror(errno));
			break;
		}
	}
	/* Every vCPU leaves KVM_RUN (immediate_exit covers a thread just about to enter it), then join. */
	for (unsigned i = 0; i < vm->nvcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	for (unsigned i = 0; i < vm->nvcpus; i++) {
		if (!vm->vcpus[i].thread_started)
			continue;
		pthread_join(vm->vcpus[i].thread, NULL);
		vm->vcpus[i].thread_started = false;
	}
	serial_flush(vm->serial);
	if (r < 0)
		return r;
	pthread_mutex_lock(&vm->lock);
	*ret = vm->outcome;
	pthread_mutex_unlock(&vm->lock);
	return 0;
}

/* ---- pause / resume (any thread; the vCPU threads park in vm_vcpu_park) ---- */

#define PAUSE_WAIT_MS 2000
#define PAUSE_REKICK_MS 50

void vm_vcpu_park(struct vm *vm)
{
	pthread_mutex_lock(&vm->pause_lock);
	vm->parked++;
	pthread_cond_broadcast(&vm->pause_cond);
	while (atomic_load(&vm->pause_req) && !atomic_load(&vm->stopping))
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	vm->parked--;
	pthread_mutex_unlock(&vm->pause_lock);
}

static unsigned vcpus_started(const struct vm *vm)
{
	unsigned n = 0;
	for (unsigned i = 0; i < vm->nvcpus; i++)
		n += vm->vcpus[i].thread_started;
	return n;
}

static void deadline_in(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int vm_pause(struct vm *vm)
{
	if (!vm->ran || atomic_load(&vm->stopping))
		return -ESRCH;
	/* pause_req is set before the kicks: a vCPU that resets immediate_exit after a kick still sees it. */
	atomic_store(&vm->pause_req, true);
	unsigned want = vcpus_started(vm);
	uint64_t deadline = util_now_ns() + PAUSE_WAIT_MS * 1000000ull;
	int r = 0;
	pthread_mutex_lock(&vm->pause_lock);
	while (vm->parked < want && !atomic_load(&vm->stopping)) {
		if (util_now_ns() >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		/* Kick again now and then: a signal can land just before a vCPU blocks in the kernel. */
		for (unsigned i = 0; i < vm->nvcpus; i++)
			vcpu_kick(&vm->vcpus[i]);
		struct timespec ts;
		deadline_in(&ts, PAUSE_REKICK_MS);
		pthread_cond_timedwait(&vm->pause_cond, &vm->pause_lock, &ts);
	}
	pthread_mutex_unlock(&vm->pause_lock);
	if (atomic_load(&vm->stopping))
		return -ESRCH;
	return r;
}

int vm_resume(struct vm *vm)
{
	if (!vm->ran || atomic_load(&vm->stopping))
		return -ESRCH;
	pthread_mutex_lock(&vm->pause_lock);
	if (atomic_load(&vm->pause_req)) {
		/* The guest's kvmclock pages say it was stopped, so it does not report soft lockups. Fails with
		 * EINVAL when the guest never enabled kvmclock: nothing to tell it then. */
		for (unsigned i = 0; i < vm->nvcpus; i++)
			(void)ioctl(vm->vcpus[i].fd, KVM_KVMCLOCK_CTRL, 0);
		atomic_store(&vm->pause_req, false);
		pthread_cond_broadcast(&vm->pause_cond);
	}
	pthread_mutex_unlock(&vm->pause_lock);
	return 0;
}

bool vm_paused(struct vm *vm)
{
	return atomic_load(&vm->pause_req);
}

void vm_request_stop(struct vm *vm, enum vm_exit_reason reason, const char *detail)
{
	vm_stop(vm, reason, 0, "%s", detail); /* vm_run() then kicks and joins the vCPUs */
}

void vm_destroy(struct vm *vm)
{
	if (!vm)
		return;
	for (unsigned i = 0; i < vm->nvcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	for (unsigned i = 0; i < VM_MAX_VCPUS; i++) {
		struct vcpu *v = &vm->vcpus[i];
		if (v->thread_started)
			pthread_join(v->thread, NULL);
		if (v->run)
			munmap(v->run, vm->run_size);
		if (v->fd >= 0)
			close(v->fd);
	}
	for (unsigned i = 0; i < vm->nmmio; i++) {
		if (vm->mmio[i].dev.ops && vm->mmio[i].dev.ops->destroy)
			vm->mmio[i].dev.ops->destroy(vm->mmio[i].dev.dev);
		if (vm->mmio[i].irq_fd >= 0)
			close(vm->mmio[i].irq_fd);
	}
	serial_destroy(vm->serial);
	i8042_destroy(vm->i8042);
	free(vm->cpuid);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->ram)
		munmap(vm->ram, vm->ram_size);
	if (vm->mem_fd >= 0)
		close(vm->mem_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	if (vm->stop_fd >= 0)
		close(vm->stop_fd);
	pthread_mutex_destroy(&vm->lock);
	pthread_mutex_destroy(&vm->pause_lock);
	pthread_cond_destroy(&vm->pause_cond);
	free(vm);
}
