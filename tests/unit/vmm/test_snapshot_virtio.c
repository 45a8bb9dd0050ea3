/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshot state of the virtio-mmio transport (virtio_mmio_save/restore), no KVM needed: a virtio-rng
 * driven by the test driver over fake RAM is saved with one request done and one published but not
 * yet notified; a new device restored from that state over the same RAM shows the driver's registers
 * and takes up the pending request. Hostile saved states are refused and leave the device reset: ring
 * addresses outside RAM, a queue size that is not a power of two, driver features never offered,
 * another device type, device bytes the device does not take.
 */
#include <errno.h>
#include <string.h>

#include "../devices/vdrv.h"
#include "check.h"
#include "devices/virtio_rng.h"

static struct mmio_dev new_rng(struct vdrv *d)
{
	struct mmio_dev dev;
	CHECK(virtio_rng_create(&d->mem, vdrv_irq(d), &dev) == 0 && dev.virtio, "virtio_rng_create");
	return dev;
}

static int restore_edit(struct vdrv *d, const struct virtio_mmio_state *good, void (*edit)(struct virtio_mmio_state *))
{
	struct virtio_mmio_state st = *good;
	edit(&st);
	struct mmio_dev dev = new_rng(d);
	int r = virtio_mmio_restore(dev.virtio, &st, NULL, st.dev_len);
	struct vdrv view = *d;
	view.dev = dev;
	if (r < 0)
		CHECK(vdrv_rd(&view, VIRTIO_MMIO_STATUS) == 0, "a refused state leaves the device reset");
	dev.ops->destroy(dev.dev);
	return r;
}

static void ring_outside(struct virtio_mmio_state *st) { st->q[0].desc_gpa = VDRV_HOLE_GPA; }
static void odd_size(struct virtio_mmio_state *st) { st->q[0].num = 3; }
static void unoffered(struct virtio_mmio_state *st) { st->driver_features |= 1ull << 45; }
static void other_type(struct virtio_mmio_state *st) { st->device_id = 2; }
static void dev_bytes(struct virtio_mmio_state *st) { st->dev_len = 4; }

int main(void)
{
	struct vdrv d;
	CHECK(vdrv_init(&d) == 0, "vdrv_init");
	d.dev = new_rng(&d);
	uint32_t status = vdrv_setup(&d, ~0ull, 8);
	CHECK(status & VIRTIO_STATUS_DRIVER_OK, "setup: status 0x%x", status);
	uint64_t b1 = vdrv_alloc(&d, 16), b2 = vdrv_alloc(&d, 16);
	vdrv_desc(&d, d.desc, 0, b1, 16, VIRTQ_DESC_F_WRITE, 0);
	vdrv_desc(&d, d.desc, 1, b2, 16, VIRTQ_DESC_F_WRITE, 0);
	vdrv_publish(&d, 0);
	vdrv_kick(&d);
	uint32_t id, len;
	CHECK(vdrv_take_used(&d, &id, &len) && id == 0 && len == 16, "first request used");
	vdrv_publish(&d, 1); /* pending: the snapshot is taken before the notify */

	struct virtio_mmio_state st;
	CHECK(virtio_mmio_save(d.dev.virtio, &st, NULL, 0) == 0, "save");
	CHECK(st.q[0].ready && st.q[0].last_avail == 1 && st.q[0].used_idx == 1 && st.dev_len == 0 &&
	      st.status == status, "saved queue state");

	struct mmio_dev dev2 = new_rng(&d);
	CHECK(virtio_mmio_restore(dev2.virtio, &st, NULL, 0) == 0, "restore");
	struct vdrv d2 = d;
	d2.dev = dev2;
	CHECK(vdrv_rd(&d2, VIRTIO_MMIO_STATUS) == status, "restored status");
	vdrv_wr(&d2, VIRTIO_MMIO_QUEUE_SEL, 0);
	CHECK(vdrv_rd(&d2, VIRTIO_MMIO_QUEUE_READY) == 1 && vdrv_rd(&d2, VIRTIO_MMIO_QUEUE_NUM) == 8,
	      "restored queue registers");
	vdrv_kick(&d2);
	CHECK(vdrv_take_used(&d2, &id, &len) && id == 1 && len == 16, "restored device took the pending request");
	dev2.ops->destroy(dev2.dev);

	CHECK(restore_edit(&d, &st, ring_outside) == -EINVAL, "ring outside RAM");
	CHECK(restore_edit(&d, &st, odd_size) == -EINVAL, "queue size 3");
	CHECK(restore_edit(&d, &st, unoffered) == -EINVAL, "features never offered");
	CHECK(restore_edit(&d, &st, other_type) == -EINVAL, "another device type");
	CHECK(restore_edit(&d, &st, dev_bytes) == -EINVAL, "device bytes for a device without state");
	vdrv_done(&d);
	return check_exit();
}
