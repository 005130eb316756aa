/* Backend selection, and the argument checks both backends share. AUTO
 * prefers CUDA and falls back to emu only when CUDA is absent (not built,
 * or no usable device); a CUDA device that exists but fails is an error,
 * not a silent fallback. */
#include "device/device.h"

#include <errno.h>
#include <string.h>

#include "base/error.h"
#include "vramcache.h"

/* The emulated devices are VC_EMU_DEVICES numbered ones, as CUDA's are
 * its count: an ordinal past them is a device that is not there. */
static int emu_open(int ordinal, struct vc_device **out)
{
	if (ordinal < 0 || ordinal >= VC_EMU_DEVICES)
		return vc_err(-VC_ENODEVICE, "emu: device %d asked for, but the emulated devices "
					     "are 0 .. %d", ordinal, VC_EMU_DEVICES - 1);
	return vc_emu_open(ordinal, out);
}

int vc_device_open(int kind, int ordinal, struct vc_device **out)
{
	switch (kind) {
	case VC_DEVICE_EMU:
		return emu_open(ordinal, out);
	case VC_DEVICE_CUDA:
		return vc_cuda_open(ordinal, out);
	case VC_DEVICE_AUTO: {
		int r = vc_cuda_open(ordinal, out);
		if (r == -VC_ENOTBUILT || r == -VC_ENODEVICE)
			return emu_open(ordinal, out);
		return r;
	}
	default:
		return vc_err(-VC_ECONFIG, "unknown device kind %d", kind);
	}
}

void vc_device_close(struct vc_device *d)
{
	if (d)
		d->ops->close(d);
}

int vc_device_count(int kind)
{
	switch (kind) {
	case VC_DEVICE_EMU:
		return VC_EMU_DEVICES;
	case VC_DEVICE_CUDA:
		return vc_cuda_count();
	case VC_DEVICE_AUTO: {
		int n = vc_cuda_count();
		return n > 0 ? n : VC_EMU_DEVICES;
	}
	default:
		return 0;
	}
}

/* One ops table per backend, so the table names the backend. */
bool vc_device_same(const struct vc_device *a, const struct vc_device *b)
{
	return a->ops == b->ops && a->ordinal == b->ordinal;
}

int vc_device_peer_enable(struct vc_device *d, struct vc_device *peer)
{
	if (d->ops != peer->ops)
		return vc_err(-ENOTSUP, "device %s %d cannot reach device %s %d: different "
					"backends", d->ops->name, d->ordinal, peer->ops->name,
			      peer->ordinal);
	if (!d->ops->peer_enable)
		return 0; /* the backend's device memory is host memory */
	return d->ops->peer_enable(d, peer);
}

int vc_device_fault(struct vc_device *d)
{
	if (!d->ops->fault)
		return vc_err(-ENOTSUP, "device %s %d cannot be made to fail", d->ops->name,
			      d->ordinal);
	return d->ops->fault(d);
}

int vc_device_parse(const char *name)
{
	static const char *const names[] = { [VC_DEVICE_AUTO] = "auto", [VC_DEVICE_EMU] = "emu",
					     [VC_DEVICE_CUDA] = "cuda" };
	for (int k = 0; k < (int)(sizeof names / sizeof *names); k++)
		if (name && strcmp(name, names[k]) == 0)
			return k;
	return vc_err(-EINVAL, "unknown device \"%s\" (auto, cuda or emu)", name ? name : "");
}

int vc_gc_check(const struct vc_gc_job *j)
{
	const uint32_t ps = j->page_size;
	if (ps < 512 || ps > (2u << 20) || (ps & (ps - 1)) != 0)
		return vc_err(-EINVAL, "gc: page size %u is not a power of two in 512 B .. 2 MiB", ps);
	if (j->base % 16 != 0)
		return vc_err(-EINVAL, "gc: store base %#llx is not 16-byte aligned",
			      (unsigned long long)j->base);
	if (j->per_seg == 0)
		return vc_err(-EINVAL, "gc: no slots per segment");
	const uint64_t pieces = ps > 4096 ? ps / 4096 : 1;
	if ((uint64_t)j->nsrc * j->per_seg * pieces > VC_GC_MAX_SLOTS)
		return vc_err(-EINVAL, "gc: %u segments of %u slots of %u bytes exceed one job", j->nsrc,
			      j->per_seg, ps);
	if (j->nsrc && (!j->src || !j->key || !j->stamp || !j->key_dev || !j->stamp_dev))
		return vc_err(-EINVAL, "gc: a job with sources needs src, key and stamp");
	if (j->ndst > VC_GC_MAX_SLOTS)
		return vc_err(-EINVAL, "gc: %u destination segments", j->ndst);
	if (j->ndst && !j->dst)
		return vc_err(-EINVAL, "gc: a job with destinations needs dst");
	if (j->ndst ? j->dst_first >= j->per_seg : j->dst_first != 0)
		return vc_err(-EINVAL, "gc: first destination slot %u of %u segments of %u slots",
			      j->dst_first, j->ndst, j->per_seg);
	if (j->live > (uint64_t)j->nsrc * j->per_seg)
		return vc_err(-EINVAL, "gc: %u live pages stated in %u segments of %u slots", j->live,
			      j->nsrc, j->per_seg);
	if (j->live && j->stamp_min > j->stamp_max)
		return vc_err(-EINVAL, "gc: stamp bounds %llu > %llu",
			      (unsigned long long)j->stamp_min, (unsigned long long)j->stamp_max);
	if (!j->where_dev != !j->where || (j->where && j->nowners == 0))
		return vc_err(-EINVAL, "gc: a where table needs its host view, device address and size");
	const uint64_t room = j->ndst ? (uint64_t)j->ndst * j->per_seg - j->dst_first : 0;
	if (j->live > room)
		return vc_err(-ENOSPC, "gc: %u live pages, room for %llu", j->live,
			      (unsigned long long)room);
	return 0;
}

int vc_move_check(const struct vc_move *m, const struct vc_xts_key *key)
{
	const uint32_t op = m->op & VC_MOVE_OP_MASK, ciph = m->op & VC_MOVE_CIPHER;
	if ((op != VC_MOVE_COPY && op != VC_MOVE_SWAP) ||
	    (m->op & ~(VC_MOVE_OP_MASK | VC_MOVE_CIPHER | VC_MOVE_FP)))
		return vc_err(-EINVAL, "move: unknown op word %#x", m->op);
	if ((m->op & VC_MOVE_FP) && (op != VC_MOVE_COPY || (m->op & VC_MOVE_DECRYPT)))
		return vc_err(-EINVAL, "move: op word %#x: a fingerprint goes with a plain or an "
				       "encrypting COPY", m->op);
	if (!ciph)
		return 0;
	if (ciph == VC_MOVE_CIPHER || op != VC_MOVE_COPY)
		return vc_err(-EINVAL, "move: op word %#x: a cipher applies to one COPY, one way",
			      m->op);
	if (!key)
		return vc_err(-EINVAL, "move: a cipher move, but no key was given");
	return 0;
}
