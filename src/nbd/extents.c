/* NBD_CMD_BLOCK_STATUS for the base:allocation context.
 *
 * The engine says where the volume's store has holes (vc_volume_extent:
 * SEEK_DATA/SEEK_HOLE, with dirty cached pages in a hole counted as data),
 * so a hole is reported HOLE|ZERO only when it really reads as zeroes and
 * stays so once every acknowledged write lands. A store that cannot say
 * is all data (status 0), which the spec allows for any block.
 *
 * Bounds: at most NBD_MAX_EXTENTS descriptors (8 KiB) per reply; adjacent
 * extents with the same status merge; a descriptor's length fits its 32
 * bits because the request's does. */
#include <stdlib.h>

#include "nbd/nbd.h"
#include "nbd/wire.h"

uint32_t nbd_block_status(const struct nbd_session *s, struct nbd_request *r)
{
	unsigned max = (r->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : NBD_MAX_EXTENTS;
	unsigned char *d = malloc(8u * max);
	if (!d)
		return NBD_ENOMEM;
	unsigned n = 0;
	uint64_t pos = r->offset, end = r->offset + r->length;
	while (pos < end) {
		uint64_t len;
		int k = vc_volume_extent(s->exp->vol, pos, end - pos, &len);
		if (k < 0) {
			if (n > 0)
				break; /* what we have is true: reply with it */
			free(d);
			return NBD_EIO;
		}
		uint32_t flags = k == VC_EXTENT_HOLE ? NBD_STATE_HOLE | NBD_STATE_ZERO : 0;
		if (n > 0 && nbd_get32(d + 8 * (n - 1) + 4) == flags) {
			nbd_put32(d + 8 * (n - 1), nbd_get32(d + 8 * (n - 1)) + (uint32_t)len);
		} else {
			if (n == max)
				break;
			nbd_put32(d + 8 * n, (uint32_t)len);
			nbd_put32(d + 8 * n + 4, flags);
			n++;
		}
		pos += len;
	}
	r->data = d;
	r->ndesc = n;
	return 0;
}
