/* One transmission-phase request: decode, check, run on the engine, reply.
 *
 * Check before run: nbd_request_exec only sees requests that passed
 * nbd_request_check, so every engine call is inside [0, size) and every
 * payload is at most NBD_MAX_PAYLOAD bytes. Engine errors map onto the
 * spec's small error set in nbd_errno(). */
#include <errno.h>
#include <string.h>

#include "nbd/nbd.h"
#include "nbd/wire.h"

int nbd_request_decode(const unsigned char h[NBD_REQUEST_LEN], struct nbd_request *r)
{
	if (nbd_get32(h) != NBD_REQUEST_MAGIC)
		return -EPROTO;
	r->flags = nbd_get16(h + 4);
	r->type = nbd_get16(h + 6);
	r->cookie = nbd_get64(h + 8);
	r->offset = nbd_get64(h + 16);
	r->length = nbd_get32(h + 24);
	r->data = NULL;
	return 0;
}

static bool in_bounds(const struct nbd_session *s, const struct nbd_request *r)
{
	return r->offset <= s->size && r->length <= s->size - r->offset;
}

uint32_t nbd_request_check(const struct nbd_session *s, const struct nbd_request *r)
{
	/* FUA is valid on every command once SEND_FUA is offered (spec). */
	uint16_t allowed = NBD_CMD_FLAG_FUA;
	bool writes = false;
	switch (r->type) {
	case NBD_CMD_READ:
		if (s->structured)
			allowed |= NBD_CMD_FLAG_DF;
		break;
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
		writes = true;
		break;
	case NBD_CMD_WRITE_ZEROES:
		writes = true;
		allowed |= NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO;
		break;
	case NBD_CMD_FLUSH:
	case NBD_CMD_CACHE:
	case NBD_CMD_DISC:
		break;
	case NBD_CMD_BLOCK_STATUS:
		if (!s->meta_alloc)
			return NBD_EINVAL; /* no context selected for this export */
		allowed |= NBD_CMD_FLAG_REQ_ONE;
		break;
	default:
		return NBD_EINVAL; /* unknown command */
	}
	if (r->flags & ~allowed)
		return NBD_EINVAL;
	if (writes && s->exp->readonly)
		return NBD_EPERM;
	if (r->type == NBD_CMD_FLUSH || r->type == NBD_CMD_DISC)
		return 0; /* offset and length are reserved: ignored, not policed */
	/* A READ's reply and a WRITE's payload are buffered whole; the
	 * payload-free commands run in bounded steps at any length. */
	if ((r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE) && r->length > NBD_MAX_PAYLOAD)
		return r->flags & NBD_CMD_FLAG_DF ? NBD_EOVERFLOW : NBD_EINVAL; /* spec: "Error values" */
	if (!in_bounds(s, r))
		return r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES ? NBD_ENOSPC
										 : NBD_EINVAL;
	if (r->type == NBD_CMD_WRITE_ZEROES && (r->flags & NBD_CMD_FLAG_FAST_ZERO))
		return NBD_ENOTSUP; /* zeroes are written like data: never faster */
	if (r->type == NBD_CMD_BLOCK_STATUS && r->length == 0)
		return NBD_EINVAL; /* no extent can describe nothing */
	return 0;
}

static uint32_t nbd_errno(long e)
{
	switch (-e) {
	case EPERM:
	case EROFS:
		return NBD_EPERM;
	case ENOMEM:
		return NBD_ENOMEM;
	case EINVAL:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ENOTSUP:
		return NBD_ENOTSUP;
	case ESHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		return NBD_EIO;
	}
}

uint32_t nbd_request_result(const struct nbd_request *r, int64_t res)
{
	if (res < 0)
		return nbd_errno((long)res);
	if (r->type == NBD_CMD_READ && (uint64_t)res != r->length)
		return NBD_EIO; /* the backing store shrank under us */
	return 0;
}

/* Zeroes for WRITE_ZEROES: one shared read-only buffer, so a request of any
 * length costs length / sizeof(zeroes) engine writes and no allocation. */
static const unsigned char zeroes[1u << 16];

/* FUA makes the request's own range durable (spec), not the volume's
 * other dirty pages: a write-back of the range's dirty pages and a sync.
 * A zero-length request changed nothing. */
static uint32_t fua(const struct nbd_session *s, const struct nbd_request *r)
{
	if (!((r->flags & NBD_CMD_FLAG_FUA) || s->exp->write_through) || r->length == 0)
		return 0;
	int e = vc_volume_flush_range(s->exp->vol, r->offset, r->length);
	return e < 0 ? nbd_errno(e) : 0;
}

uint32_t nbd_request_exec(const struct nbd_session *s, struct nbd_request *r)
{
	vc_volume *c = s->exp->vol;
	long e = 0;
	switch (r->type) {
	case NBD_CMD_READ:
		return nbd_request_result(r, vc_volume_read(c, r->data, r->length, r->offset));
	case NBD_CMD_WRITE:
		e = vc_volume_write(c, r->data, r->length, r->offset);
		if (e < 0)
			return nbd_errno(e);
		return fua(s, r);
	case NBD_CMD_WRITE_ZEROES:
		for (uint64_t done = 0; done < r->length;) {
			size_t k = r->length - done < sizeof(zeroes) ? (size_t)(r->length - done)
								     : sizeof(zeroes);
			e = vc_volume_write(c, zeroes, k, r->offset + done);
			if (e < 0)
				return nbd_errno(e);
			done += k;
		}
		return fua(s, r);
	case NBD_CMD_TRIM: {
		/* Only whole pages are dropped, with their dirty data: the spec
		 * lets us shrink the range, and a partial page holds bytes the
		 * client did not trim. The backing store keeps its old bytes,
		 * which the client may no longer assume anything about. */
		uint64_t ps = vc_page_size(s->srv->cache);
		uint64_t lo = (r->offset + ps - 1) / ps * ps, hi = (r->offset + r->length) / ps * ps;
		if (lo < hi && (e = vc_volume_drop(c, lo, hi - lo, VC_DROP_DISCARD)) < 0)
			return nbd_errno(e);
		return fua(s, r);
	}
	case NBD_CMD_FLUSH:
		e = vc_volume_flush(c);
		return e < 0 ? nbd_errno(e) : 0;
	case NBD_CMD_CACHE:
		if (r->length == 0)
			return 0;
		e = vc_volume_prefetch(c, r->offset, r->length, s->exp->prefetch_tier);
		return e < 0 ? nbd_errno(e) : 0;
	case NBD_CMD_BLOCK_STATUS:
		return nbd_block_status(s, r);
	default:
		return NBD_EINVAL;
	}
}

static const char *errmsg(uint32_t error)
{
	switch (error) {
	case NBD_EPERM: return "export is read-only";
	case NBD_EIO: return "I/O error";
	case NBD_ENOMEM: return "out of memory";
	case NBD_EINVAL: return "invalid request";
	case NBD_ENOSPC: return "request past the end of the export";
	case NBD_EOVERFLOW: return "request too large";
	case NBD_ENOTSUP: return "not supported";
	case NBD_ESHUTDOWN: return "server is shutting down";
	default: return "error";
	}
}

int nbd_reply_build(const struct nbd_session *s, const struct nbd_request *r, uint32_t error,
		    unsigned char h[NBD_REPLY_HDR_MAX], struct iovec iov[2])
{
	bool chunked = r->type == NBD_CMD_READ || r->type == NBD_CMD_BLOCK_STATUS;
	iov[0].iov_base = h;
	if (!s->structured || !chunked) {
		nbd_put32(h, NBD_SIMPLE_REPLY_MAGIC);
		nbd_put32(h + 4, error);
		nbd_put64(h + 8, r->cookie);
		iov[0].iov_len = NBD_SIMPLE_REPLY_LEN;
		if (error == 0 && r->type == NBD_CMD_READ && r->length > 0) {
			iov[1] = (struct iovec){ r->data, r->length };
			return 2;
		}
		return 1;
	}
	/* Structured READ: one OFFSET_DATA chunk (DF always holds), or one
	 * ERROR chunk with a message. Both carry DONE. A zero-length read has
	 * no content to describe, so it ends with a NONE chunk. BLOCK_STATUS:
	 * one BLOCK_STATUS chunk (we serve one context), or ERROR. */
	nbd_put32(h, NBD_STRUCTURED_REPLY_MAGIC);
	nbd_put16(h + 4, NBD_REPLY_FLAG_DONE);
	nbd_put64(h + 8, r->cookie);
	if (error) {
		const char *m = errmsg(error);
		uint16_t ml = (uint16_t)strlen(m);
		nbd_put16(h + 6, NBD_REPLY_TYPE_ERROR);
		nbd_put32(h + 16, 6u + ml);
		nbd_put32(h + 20, error);
		nbd_put16(h + 24, ml);
		iov[0].iov_len = NBD_CHUNK_HDR_LEN + 6;
		iov[1] = (struct iovec){ (void *)m, ml };
		return 2;
	}
	if (r->type == NBD_CMD_BLOCK_STATUS) {
		nbd_put16(h + 6, NBD_REPLY_TYPE_BLOCK_STATUS);
		nbd_put32(h + 16, 4u + 8u * r->ndesc);
		nbd_put32(h + 20, NBD_CTX_ALLOCATION_ID);
		iov[0].iov_len = NBD_CHUNK_HDR_LEN + 4;
		iov[1] = (struct iovec){ r->data, 8u * r->ndesc };
		return 2;
	}
	if (r->length == 0) {
		nbd_put16(h + 6, NBD_REPLY_TYPE_NONE);
		nbd_put32(h + 16, 0);
		iov[0].iov_len = NBD_CHUNK_HDR_LEN;
		return 1;
	}
	nbd_put16(h + 6, NBD_REPLY_TYPE_OFFSET_DATA);
	nbd_put32(h + 16, 8u + r->length);
	nbd_put64(h + 20, r->offset);
	iov[0].iov_len = NBD_CHUNK_HDR_LEN + 8;
	iov[1] = (struct iovec){ r->data, r->length };
	return 2;
}
