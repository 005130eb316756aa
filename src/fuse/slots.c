/* The files volumes: every cached file's pages in a few engine volumes.
 *
 * The engine caches pages of volumes, and its volume table is small
 * (VC_VOLUMES_MAX). A volume per file would bound the files whose pages
 * stay cached by it; instead each cached file (identity, ident.c) gets a
 * slot: a fixed range of FS_SLOT_BYTES (1 TiB) at slot * FS_SLOT_BYTES of
 * one volume, whose store is ours (vc_volume_open_store): its callbacks
 * take an offset apart into the slot and the offset inside it, and move
 * the bytes with the slot's file's fd (fdcache.c). A volume holds
 * slots_per_vol slots (2^20 at 4 KiB pages: the engine numbers 2^48 pages
 * a volume), and volumes are opened as slots run out, so the engine's
 * page numbers, not its volume table, bound the files: over a billion.
 * Nothing of the engine's data path knows about files: a file's pages are
 * pages of its slot's range, its dirty pages are members of the volume's
 * dirty set in that range, and dropping or flushing a file is a range
 * operation (O(the file's pages), never O(the volume)).
 *
 * What the engine does not know, the store does: a file's size. Pages are
 * whole pages of the volume, so the last page of a file reads as the
 * file's bytes and then zeros (pread stops at end of file), and its
 * write-back would write those zeros past the end: the write callback
 * clips every write at the identity's size. Size changes go through
 * ident.c, which drops the pages a change invalidates (as
 * vc_volume_resize does for a volume of its own).
 *
 * A slot goes back to the free list only after its pages are dropped
 * (ident.c), so a reused slot starts empty. A file larger than a slot is
 * served uncached (ident.c).
 *
 * Lock rules: slot allocation, the free list and the volume list are
 * under id_mu (vc_volume_open is serialized by it, as fs.h says). The
 * callbacks take fd_mu (the slot table and fds) and nothing else, and do
 * their I/O with no lock held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse/fs.h"

/* Moves len bytes at off of one slot's file: reads stop at the file's end
 * (zeros for the rest, as a hole), writes at the identity's size. */
static int slot_rw(struct fs *fs, uint32_t slot, bool write, char *buf, size_t len,
		   uint64_t off)
{
	struct fs_ident *id;
	int fd = fs_fd_get_slot(fs, slot, &id);
	if (fd < 0)
		return fd;
	int r = 0;
	if (write) {
		uint64_t size = atomic_load(&id->size);
		len = off >= size ? 0 : len < size - off ? len : (size_t)(size - off);
	}
	size_t done = fs_pio(fd, write, buf, len, off, &r);
	if (r == 0 && done < len) {
		if (write)
			r = -EIO;
		else
			memset(buf + done, 0, len - done);
	}
	fs_fd_put(fs, id);
	return r;
}

/* The store's callbacks: [off, off+len) of volume fv, cut at slots. */
static int vol_rw(struct fs_fvol *fv, bool write, char *buf, size_t len, uint64_t off)
{
	while (len) {
		uint64_t in = off & (FS_SLOT_BYTES - 1);
		size_t k = len < FS_SLOT_BYTES - in ? len : (size_t)(FS_SLOT_BYTES - in);
		int r = slot_rw(fv->fs, fv->first + (uint32_t)(off >> FS_SLOT_SHIFT), write, buf, k,
				in);
		if (r < 0)
			return r;
		buf += k;
		off += k;
		len -= k;
	}
	return 0;
}

static int store_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	return vol_rw(ctx, false, buf, len, off);
}

static int store_write(void *ctx, const void *buf, size_t len, uint64_t off)
{
	return vol_rw(ctx, true, (char *)buf, len, off);
}

/* One file's range (a file's flush): its fd. A wider one (the volume's
 * flush at unmount): every fd open in it, which includes every file with
 * dirty pages (fdcache.c keeps theirs open). */
static int store_sync(void *ctx, uint64_t off, uint64_t len)
{
	struct fs_fvol *fv = ctx;
	uint64_t last = len ? off + len - 1 : fv->fs->slots_per_vol * FS_SLOT_BYTES - 1;
	uint32_t s0 = fv->first + (uint32_t)(off >> FS_SLOT_SHIFT);
	uint32_t s1 = fv->first + (uint32_t)(last >> FS_SLOT_SHIFT);
	if (s0 != s1)
		return fs_fd_sync_slots(fv->fs, s0, s1);
	struct fs_ident *id;
	int fd = fs_fd_get_slot(fv->fs, s0, &id);
	if (fd == -ESTALE)
		return 0; /* no file there: nothing was written */
	if (fd < 0)
		return fd;
	int r = fdatasync(fd) < 0 ? -errno : 0;
	fs_fd_put(fv->fs, id);
	return r;
}

/* Under id_mu: one more volume of slots. */
static int vol_add(struct fs *fs)
{
	if (fs->nfvols == VC_VOLUMES_MAX - 1)
		return -ENOSPC;
	struct fs_fvol *fv = &fs->fvols[fs->nfvols];
	*fv = (struct fs_fvol){ .fs = fs, .first = (uint32_t)(fs->nfvols * fs->slots_per_vol) };
	for (;;) {
		struct vc_store st = { .size = sizeof st, .version = VC_STORE_VERSION, .ctx = fv,
				       .bytes = fs->slots_per_vol * FS_SLOT_BYTES,
				       .read = store_read, .write = store_write,
				       .sync = store_sync };
		int r = vc_volume_open_store(fs->c, &st, fs->o->readonly ? VC_OPEN_READONLY : 0,
					     &fv->vol);
		/* Fewer slots where pages (or the cipher's units) cannot
		 * number so many: only the first volume can shrink its
		 * share, as slot numbers are volume * slots_per_vol + k. */
		if (r == -EFBIG && fs->nfvols == 0 && fs->slots_per_vol > 1) {
			fs->slots_per_vol /= 2;
			continue;
		}
		if (r < 0)
			return r;
		fs->nfvols++;
		return 0;
	}
}

void fs_slots_init(struct fs *fs)
{
	/* 2^48 pages a volume: (2^48 * page size) / 1 TiB slots, at most
	 * 2^20 (then 1023 volumes hold 2^30 slots, numbers that fit 32
	 * bits). */
	uint64_t n = (uint64_t)vc_page_size(fs->c) << (48 - FS_SLOT_SHIFT);
	if (n > (1u << 20))
		n = 1u << 20;
	if (fs->o->slots_per_volume && fs->o->slots_per_volume < n)
		n = fs->o->slots_per_volume;
	fs->slots_per_vol = n;
}

int fs_slot_alloc(struct fs *fs, struct fs_ident *id)
{
	uint32_t slot;
	if (fs->nfree) {
		slot = fs->slot_free[--fs->nfree];
	} else {
		if (fs->slot_next == fs->nfvols * fs->slots_per_vol) {
			int r = vol_add(fs);
			if (r < 0)
				return r;
		}
		slot = (uint32_t)fs->slot_next++;
	}
	id->slot = slot;
	id->vol = fs->fvols[slot / fs->slots_per_vol].vol;
	id->base = (uint64_t)(slot % fs->slots_per_vol) << FS_SLOT_SHIFT;
	fs->slots_used++;
	return 0;
}

void fs_slot_free(struct fs *fs, uint32_t slot)
{
	fs->slots_used--;
	if (fs->nfree == fs->free_cap) {
		size_t n = fs->free_cap ? 2 * fs->free_cap : 1024;
		uint32_t *t = realloc(fs->slot_free, n * sizeof *t);
		if (!t)
			return; /* the slot is lost to reuse, not to correctness */
		fs->slot_free = t;
		fs->free_cap = n;
	}
	fs->slot_free[fs->nfree++] = slot;
}

int fs_slots_fini(struct fs *fs)
{
	int first = 0;
	for (unsigned i = 0; i < fs->nfvols; i++) {
		int r = fs->fvols[i].vol ? vc_volume_close(fs->fvols[i].vol) : 0;
		if (r < 0) {
			fprintf(stderr, "vramcache mount: writing back files: %s\n", vc_last_error());
			if (!first)
				first = r;
		} else {
			fs->fvols[i].vol = NULL;
		}
	}
	free(fs->slot_free);
	fs->slot_free = NULL;
	return first;
}
