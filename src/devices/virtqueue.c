/* SPDX-License-Identifier: Apache-2.0 */
#include "devices/virtqueue.h"

#include <errno.h>
#include <string.h>

#include "util/cleanup.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "virtio rings are little-endian");
_Static_assert(sizeof(struct virtq_desc) == 16, "descriptor layout");

/* Offsets inside the rings, in bytes. */
#define AVAIL_IDX 2u
#define AVAIL_RING 4u
#define USED_IDX 2u
#define USED_RING 4u
#define USED_ELEM 8u

static uint64_t avail_bytes(uint16_t num) { return AVAIL_RING + 2ull * num + 2; }
static uint64_t used_bytes(uint16_t num) { return USED_RING + (uint64_t)USED_ELEM * num + 2; }

void virtqueue_reset(struct virtqueue *vq)
{
	*vq = (struct virtqueue){ 0 };
}

static int vq_fail(struct virtqueue *vq, const char *why, int err)
{
	vq->error = why;
	return err;
}

int virtqueue_activate(struct virtqueue *vq, const struct guest_mem *mem, uint16_t max)
{
	uint16_t num = vq->num;

	vq->ready = false;
	if (num == 0 || num > max || num > VIRTQUEUE_MAX_SIZE || (num & (num - 1)) != 0)
		return vq_fail(vq, "queue size not a power of two within QueueNumMax", -EINVAL);
	if (vq->desc_gpa % 16 || vq->avail_gpa % 2 || vq->used_gpa % 4)
		return vq_fail(vq, "misaligned ring address", -EINVAL);

	void *desc = guest_mem_ptr(mem, vq->desc_gpa, 16ull * num);
	void *avail = guest_mem_ptr(mem, vq->avail_gpa, avail_bytes(num));
	void *used = guest_mem_ptr(mem, vq->used_gpa, used_bytes(num));
	if (!desc || !avail || !used)
		return vq_fail(vq, "ring outside guest RAM", -EINVAL);

	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	vq->mem = mem;
	vq->last_avail = 0;
	vq->used_idx = 0;
	vq->error = NULL;
	vq->ready = true;
	return 0;
}

static uint16_t load16(const void *p)
{
	return __atomic_load_n((const uint16_t *)p, __ATOMIC_ACQUIRE);
}

static void store16(void *p, uint16_t v)
{
	__atomic_store_n((uint16_t *)p, v, __ATOMIC_RELEASE);
}

/* One descriptor copied out of guest memory, so later checks and uses see the same values. */
static struct virtq_desc read_desc(const struct virtq_desc *table, uint32_t i)
{
	struct virtq_desc d;
	memcpy(&d, (const void *)&table[i], sizeof(d));
	/* Keep the compiler from re-reading the guest's copy instead of ours. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return d;
}

static int add_buffer(struct virtqueue *vq, struct virtq_chain *c, const struct virtq_desc *d)
{
	bool writable = d->flags & VIRTQ_DESC_F_WRITE;

	if (!writable && c->nin > 0)
		return vq_fail(vq, "device-readable buffer after a device-writable one", -EPROTO);
	void *host = guest_mem_ptr(vq->mem, d->addr, d->len);
	if (!host)
		return vq_fail(vq, "buffer outside guest RAM", -EPROTO);
	if (d->len == 0)
		return 0;
	unsigned n = c->nout + c->nin;
	if (n >= VIRTQUEUE_MAX_SEGS)
		return vq_fail(vq, "chain has too many buffers", -EPROTO);
	c->iov[n] = (struct iovec){ .iov_base = host, .iov_len = d->len };
	if (writable) {
		c->nin++;
		c->in_len += d->len;
	} else {
		c->nout++;
		c->out_len += d->len;
	}
	return 0;
}

/* Walks an indirect table; its entries may not be indirect themselves. */
static int walk_indirect(struct virtqueue *vq, struct virtq_chain *c, const struct virtq_desc *ind)
{
	if (!vq->indirect)
		return vq_fail(vq, "indirect descriptor without VIRTIO_RING_F_INDIRECT_DESC", -EPROTO);
	if (ind->flags & VIRTQ_DESC_F_NEXT)
		return vq_fail(vq, "indirect descriptor with NEXT set", -EPROTO);
	if (ind->len == 0 || ind->len % sizeof(struct virtq_desc) != 0)
		return vq_fail(vq, "indirect table length not a multiple of 16", -EPROTO);
	if (ind->len / sizeof(struct virtq_desc) > VIRTQUEUE_MAX_SEGS)
		return vq_fail(vq, "indirect table too large", -EPROTO);
	if (ind->addr % 16)
		return vq_fail(vq, "indirect table misaligned", -EPROTO);
	const struct virtq_desc *table = guest_mem_ptr(vq->mem, ind->addr, ind->len);
	if (!table)
		return vq_fail(vq, "indirect table outside guest RAM", -EPROTO);

	uint32_t count = ind->len / sizeof(struct virtq_desc);
	uint32_t i = 0;
	for (uint32_t seen = 0;; seen++) {
		if (seen >= count)
			return vq_fail(vq, "loop in indirect table", -EPROTO);
		struct virtq_desc d = read_desc(table, i);
		if (d.flags & VIRTQ_DESC_F_INDIRECT)
			return vq_fail(vq, "indirect descriptor inside an indirect table", -EPROTO);
		int r = add_buffer(vq, c, &d);
		if (r < 0)
			return r;
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			return 0;
		if (d.next >= count)
			return vq_fail(vq, "next index outside indirect table", -EPROTO);
		i = d.next;
	}
}

int virtqueue_pop(struct virtqueue *vq, struct virtq_chain *c)
{
	if (!vq->ready)
		return vq_fail(vq, "queue not ready", -EPROTO);
	if (vq->error)
		return -EPROTO;

	uint16_t avail_idx = load16((const uint8_t *)vq->avail + AVAIL_IDX);
	uint16_t pending = (uint16_t)(avail_idx - vq->last_avail);
	if (pending == 0)
		return 0;
	if (pending > vq->num)
		return vq_fail(vq, "available index ran ahead by more than the queue size", -EPROTO);

	/* The acquire load above orders the ring-entry read after the index read. */
	uint16_t head = load16((const uint8_t *)vq->avail + AVAIL_RING + 2u * (vq->last_avail % vq->num));
	if (head >= vq->num)
		return vq_fail(vq, "head index outside the descriptor table", -EPROTO);

	c->head = head;
	c->nout = c->nin = 0;
	c->out_len = c->in_len = 0;

	uint16_t i = head;
	for (unsigned seen = 0;; seen++) {
		if (seen >= vq->num)
			return vq_fail(vq, "descriptor chain loops or exceeds the queue size", -EPROTO);
		struct virtq_desc d = read_desc(vq->desc, i);
		int r;
		if (d.flags & VIRTQ_DESC_F_INDIRECT) {
			/* An indirect descriptor must be the only one in its chain. */
			if (seen > 0)
				return vq_fail(vq, "indirect descriptor inside a chain", -EPROTO);
			r = walk_indirect(vq, c, &d);
			if (r < 0)
				return r;
			break;
		}
		r = add_buffer(vq, c, &d);
		if (r < 0)
			return r;
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			break;
		if (d.next >= vq->num)
			return vq_fail(vq, "next index outside the descriptor table", -EPROTO);
		i = d.next;
	}
	vq->last_avail++;
	return 1;
}

void virtqueue_push(struct virtqueue *vq, uint16_t head, uint32_t written)
{
	uint8_t *elem = vq->used + USED_RING + (uint64_t)USED_ELEM * (vq->used_idx % vq->num);
	uint32_t id = head;
	memcpy(elem, &id, 4);
	memcpy(elem + 4, &written, 4);
	vq->used_idx++;
	/* Release: the element and every buffer byte written before are visible before the index. */
	store16(vq->used + USED_IDX, vq->used_idx);
}

bool virtqueue_should_notify(const struct virtqueue *vq, uint16_t old_used)
{
	uint16_t new_used = vq->used_idx;

	/* Order our used->idx store before reading the driver's suppression fields. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (vq->event_idx) {
		uint16_t event = load16((const uint8_t *)vq->avail + AVAIL_RING + 2u * vq->num);
		return (uint16_t)(new_used - event - 1) < (uint16_t)(new_used - old_used);
	}
	return !(load16(vq->avail) & VIRTQ_AVAIL_F_NO_INTERRUPT);
}

bool virtqueue_enable_notify(struct virtqueue *vq)
{
	if (vq->event_idx)
		store16(vq->used + USED_RING + (uint64_t)USED_ELEM * vq->num, vq->last_avail);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return load16((const uint8_t *)vq->avail + AVAIL_IDX) != vq->last_avail;
}

int virtq_chain_slice(const struct virtq_chain *c, bool in, uint64_t offset, uint64_t len,
		      struct iovec *out, unsigned max)
{
	unsigned first = in ? c->nout : 0;
	unsigned end = in ? c->nout + c->nin : c->nout;
	unsigned n = 0;

	for (unsigned i = first; i < end && len > 0; i++) {
		uint64_t seg = c->iov[i].iov_len;
		if (offset >= seg) {
			offset -= seg;
			continue;
		}
		uint64_t take = seg - offset < len ? seg - offset : len;
		if (n >= max)
			return -EINVAL;
		out[n++] = (struct iovec){ .iov_base = (uint8_t *)c->iov[i].iov_base + offset,
					   .iov_len = take };
		len -= take;
		offset = 0;
	}
	return len == 0 ? (int)n : -EINVAL;
}

int virtq_chain_read(const struct virtq_chain *c, uint64_t offset, void *buf, uint64_t len)
{
	/* Used for small headers; a header scattered over more than 16 buffers is refused. */
	struct iovec parts[16];
	int n = virtq_chain_slice(c, false, offset, len, parts, ARRAY_SIZE(parts));
	if (n < 0)
		return n;
	uint8_t *dst = buf;
	for (int i = 0; i < n; i++) {
		memcpy(dst, parts[i].iov_base, parts[i].iov_len);
		dst += parts[i].iov_len;
	}
	return 0;
}
