/* SPDX-License-Identifier: Apache-2.0 */
/* The machine of `space-vmm boot` and `run`: option spellings to a loaded VM (see devspec.h). */
#include "vmm/devspec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "devices/tap.h"
#include "util/cleanup.h"
#include "util/util.h"
#include "vmm/boot.h"
#include "vmm/snapshot.h"
#include "vmm/vmm.h"

static int devspec_usage(char *err, size_t errlen, const char *msg)
{
	snprintf(err, errlen, "%s", msg);
	return -EINVAL;
}

int vmm_devspec_add_disk(struct vmm_devspec *d, char *arg, char *err, size_t errlen)
{
	if (d->ndisks == VMM_MAX_DISKS) {
		snprintf(err, errlen, "at most %d disks", VMM_MAX_DISKS);
		return -EINVAL;
	}
	size_t n = strlen(arg);
	bool ro = n > 3 && strcmp(arg + n - 3, ":ro") == 0;
	if (ro)
		arg[n - 3] = '\0';
	d->disks[d->ndisks].path = arg;
	d->disks[d->ndisks++].ro = ro;
	return 0;
}

int vmm_devspec_set_vsock(struct vmm_devspec *d, char *arg, char *err, size_t errlen)
{
	char *colon = strchr(arg, ':');
	if (!colon || colon[1] == '\0')
		return devspec_usage(err, errlen, "--vsock wants CID:PATH");
	*colon = '\0';
	if (util_parse_uint(arg, 3, UINT32_MAX - 1, &d->vsock_cid) < 0)
		return devspec_usage(err, errlen, "--vsock CID must be 3..4294967294");
	d->vsock_path = colon + 1;
	return 0;
}

/* TAP, or fd:N: an open TAP (IFF_TAP | IFF_NO_PI, no IFF_VNET_HDR), checked now. */
int vmm_devspec_set_net(struct vmm_devspec *d, const char *arg, char *err, size_t errlen)
{
	if (strncmp(arg, "fd:", 3) != 0) {
		d->net_name = arg;
		d->net_fd = -1;
		return 0;
	}
	uint64_t fd;
	if (util_parse_uint(arg + 3, 0, INT32_MAX, &fd) < 0)
		return devspec_usage(err, errlen, "--net fd:N wants a file descriptor number");
	if (tap_check_fd((int)fd, NULL, 0) < 0) {
		snprintf(err, errlen, "--net fd:%llu is not a TAP opened IFF_TAP|IFF_NO_PI without IFF_VNET_HDR",
			 (unsigned long long)fd);
		return -EBADF;
	}
	d->net_name = NULL;
	d->net_fd = (int)fd;
	return 0;
}

/* "aa:bb:cc:dd:ee:ff", a unicast address. */
int vmm_devspec_set_mac(struct vmm_devspec *d, const char *arg, char *err, size_t errlen)
{
	unsigned v[6];
	char end;
	if (sscanf(arg, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &end) != 6 ||
	    strlen(arg) != 17 || (v[0] & 1))
		return devspec_usage(err, errlen, "--mac wants a unicast aa:bb:cc:dd:ee:ff");
	for (int i = 0; i < 6; i++)
		d->mac[i] = (uint8_t)v[i];
	d->have_mac = true;
	return 0;
}

int vmm_devspec_check_kernel(const struct vmm_devspec *d, char *err, size_t errlen)
{
	if (!d->kernel)
		return 0;
	_cleanup_free_ char *img = NULL;
	size_t len;
	int r = util_read_file(d->kernel, 512u << 20, &img, &len);
	if (r < 0) {
		snprintf(err, errlen, "cannot read kernel %s: %s", d->kernel, strerror(-r));
		return r;
	}
	struct kernel_image ki;
	char why[160];
	if ((r = kernel_image_parse((const uint8_t *)img, len, &ki, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "%s: %s", d->kernel, why);
		return r;
	}
	return 0;
}

/* What the devices are made from: the spec and the TAP opened for it (the restore callback's userdata). */
struct devspec_setup {
	const struct vmm_devspec *d;
	int tap_fd;
};

static int devspec_add_devices(struct vm *vm, void *userdata)
{
	const struct devspec_setup *s = userdata;
	const struct vmm_devspec *d = s->d;
	int r;
	for (unsigned i = 0; i < d->ndisks; i++)
		if ((r = vm_add_disk(vm, d->disks[i].path, d->disks[i].ro)) < 0)
			return r;
	if ((d->rng && (r = vm_add_rng(vm)) < 0) ||
	    (d->vsock_path && (r = vm_add_vsock(vm, d->vsock_cid, d->vsock_path)) < 0))
		return r;
	if (s->tap_fd >= 0) {
		uint8_t mac[6];
		memcpy(mac, d->mac, sizeof(mac));
		if (!d->have_mac) {
			if ((r = util_random_bytes(mac, sizeof(mac))) < 0)
				return r;
			mac[0] = (uint8_t)((mac[0] & 0xfe) | 0x02); /* unicast, locally administered */
		}
		if ((r = vm_add_net(vm, s->tap_fd, mac)) < 0)
			return r;
	}
	return 0;
}

int vmm_devspec_create_vm(const struct vmm_devspec *d, const struct vmm_console *con, int kvm_fd,
			  struct vm **ret, char *err, size_t errlen)
{
	/* Ours when opened by name: vm_add_net keeps its own duplicate, and the TAP goes away with the
	 * VMM (or its network namespace). */
	_cleanup_close_ int tap = -1;
	struct devspec_setup s = { .d = d, .tap_fd = d->net_fd };
	if (d->net_name) {
		char ifname[32];
		if ((tap = tap_open(d->net_name, ifname, sizeof(ifname))) < 0) {
			snprintf(err, errlen, "cannot open TAP %s: %s", d->net_name, strerror(-tap));
			return tap;
		}
		s.tap_fd = tap;
	}
	if (d->restore) {
		/* The snapshot fixes vCPUs and RAM; the devices are made again in the same order. */
		struct vm_restore_config rc = VM_RESTORE_CONFIG_INIT;
		rc.console_fd = con->fd;
		rc.console_log_fd = con->log_fd;
		rc.console_log_old_fd = con->log_old_fd;
		rc.console_log_max = con->log_max;
		rc.kvm_fd = kvm_fd;
		rc.add_devices = devspec_add_devices;
		rc.userdata = &s;
		return vm_create_from_snapshot(d->restore, &rc, ret, err, errlen);
	}
	struct vm_config cfg = VM_CONFIG_INIT;
	cfg.cpus = (unsigned)d->cpus;
	cfg.mem_bytes = d->mem_mib << 20;
	cfg.console_fd = con->fd;
	cfg.console_log_fd = con->log_fd;
	cfg.console_log_old_fd = con->log_old_fd;
	cfg.console_log_max = con->log_max;
	cfg.kvm_fd = kvm_fd;
	struct vm *vm;
	int r = vm_create(&cfg, &vm, err, errlen);
	if (r < 0)
		return r;
	if ((r = devspec_add_devices(vm, &s)) < 0 || (r = vm_load_kernel(vm, d->kernel, d->initrd, d->cmdline)) < 0) {
		snprintf(err, errlen, "%s", vm_error(vm)[0] ? vm_error(vm) : strerror(-r));
		vm_destroy(vm);
		return r;
	}
	*ret = vm;
	return 0;
}
