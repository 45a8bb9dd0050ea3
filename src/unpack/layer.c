/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A layer's bytes (unpack.h): read with pread from the range of a descriptor the library opened, hashed
 * as read (the blob's digest), decompressed (gzip, zstd, xz, bzip2 or none), hashed again (the diff id),
 * and counted against the run's cap on decompressed bytes, so a small hostile blob cannot expand without
 * bound. Multi-member gzip and concatenated xz/zstd/bzip2 streams are read whole; after the end of the
 * compressed data only zero bytes may follow.
 */
#include <bzlib.h>
#include <errno.h>
#include <lzma.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "unpack/unpack.h"
#include "util/util.h"

#define IN_BUF (256u << 10)
/* zstd frames may ask for windows up to 2^31; this is what `zstd` itself decodes by default (128 MiB). */
#define ZSTD_WINDOW_LOG_MAX 27
#define XZ_MEMLIMIT (256ull << 20)

struct layer_stream {
	struct layer_spec spec;
	uint64_t pos;                 /* of the blob consumed */
	uint64_t *total_out, max_out; /* decompressed bytes of the whole run, and its cap */
	EVP_MD_CTX *blob_md, *diff_md;
	enum unpack_comp comp;
	uint8_t *in;
	size_t in_pos, in_len;
	bool in_eof;                  /* the blob is all read */
	bool end;                     /* the decompressed stream ended */
	char err[256];
	union {
		z_stream z;
		lzma_stream xz;
		bz_stream bz;
	} u;
	ZSTD_DStream *zs;
	bool inited;
	bool zstd_frame_done;         /* the last frame was complete */
};

const char *layer_comp_name(enum unpack_comp c)
{
	static const char *const names[] = { "auto", "none", "gzip", "zstd", "xz", "bzip2" };
	return c <= COMP_BZIP2 ? names[c] : "?";
}

enum unpack_comp layer_sniff(const uint8_t *h, size_t n)
{
	if (n >= 2 && h[0] == 0x1f && h[1] == 0x8b)
		return COMP_GZIP;
	if (n >= 4 && h[0] == 0x28 && h[1] == 0xb5 && h[2] == 0x2f && h[3] == 0xfd)
		return COMP_ZSTD;
	if (n >= 6 && !memcmp(h, "\xfd" "7zXZ\0", 6))
		return COMP_XZ;
	if (n >= 3 && !memcmp(h, "BZh", 3))
		return COMP_BZIP2;
	return COMP_NONE;
}

static int errf(struct layer_stream *s, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int errf(struct layer_stream *s, int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return r;
}

/* Refills the input buffer from the blob's range; sets in_eof at its end. */
static int refill(struct layer_stream *s)
{
	if (s->in_pos < s->in_len || s->in_eof)
		return 0;
	uint64_t left = s->spec.length - s->pos;
	size_t want = left < IN_BUF ? (size_t)left : IN_BUF;
	s->in_pos = s->in_len = 0;
	if (!want) {
		s->in_eof = true;
		return 0;
	}
	ssize_t k;
	do
		k = pread(s->spec.fd, s->in, want, (off_t)(s->spec.offset + s->pos));
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return errf(s, -errno, "read: %s", strerror(errno));
	if (k == 0)
		return errf(s, -EPIPE, "the blob is shorter than the image says (%llu of %llu bytes)",
			    (unsigned long long)s->pos, (unsigned long long)s->spec.length);
	if (EVP_DigestUpdate(s->blob_md, s->in, (size_t)k) != 1)
		return errf(s, -EIO, "sha256 failed");
	s->pos += (uint64_t)k;
	s->in_len = (size_t)k;
	return 0;
}

static int init_decoder(struct layer_stream *s)
{
	switch (s->comp) {
	case COMP_GZIP:
		/* 16 + 15: gzip wrapper, the largest window. */
		if (inflateInit2(&s->u.z, 16 + MAX_WBITS) != Z_OK)
			return errf(s, -ENOMEM, "zlib init failed");
		break;
	case COMP_ZSTD:
		if (!(s->zs = ZSTD_createDStream()) ||
		    ZSTD_isError(ZSTD_DCtx_setParameter(s->zs, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX)))
			return errf(s, -ENOMEM, "zstd init failed");
		s->zstd_frame_done = true;
		break;
	case COMP_XZ:
		s->u.xz = (lzma_stream)LZMA_STREAM_INIT;
		if (lzma_stream_decoder(&s->u.xz, XZ_MEMLIMIT, LZMA_CONCATENATED) != LZMA_OK)
			return errf(s, -ENOMEM, "xz init failed");
		break;
	case COMP_BZIP2:
		if (BZ2_bzDecompressInit(&s->u.bz, 0, 0) != BZ_OK)
			return errf(s, -ENOMEM, "bzip2 init failed");
		break;
	default:
		break;
	}
	s->inited = true;
	return 0;
}

/* After the compressed data: nothing, or zeros (padding some writers add). */
static int only_zeros_left(struct layer_stream *s)
{
	for (;;) {
		int r = refill(s);
		if (r < 0)
			return r;
		if (s->in_eof && s->in_pos == s->in_len)
			return 0;
		for (; s->in_pos < s->in_len; s->in_pos++)
			if (s->in[s->in_pos])
				return errf(s, -EBADMSG, "%s data followed by %llu bytes that are not part of it",
					    layer_comp_name(s->comp),
					    (unsigned long long)(s->spec.length - s->pos + s->in_len - s->in_pos));
	}
}

/* One step of the decoder: up to len bytes into buf. 0 with *out 0 only at the stream's end. */
static int decode(struct layer_stream *s, uint8_t *buf, size_t len, size_t *out)
{
	*out = 0;
	while (*out == 0 && !s->end) {
		int r = refill(s);
		if (r < 0)
			return r;
		size_t avail = s->in_len - s->in_pos;
		const uint8_t *in = s->in + s->in_pos;
		if (s->comp == COMP_NONE) {
			if (!avail) {
				s->end = true;
				break;
			}
			size_t k = avail < len ? avail : len;
			memcpy(buf, in, k);
			s->in_pos += k;
			*out = k;
			break;
		}
		if (s->comp == COMP_GZIP) {
			if (!avail && s->in_eof)
				return errf(s, -EBADMSG, "gzip data ends early");
			s->u.z.next_in = (Bytef *)in;
			s->u.z.avail_in = (uInt)avail;
			s->u.z.next_out = buf;
			s->u.z.avail_out = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
			int z = inflate(&s->u.z, Z_NO_FLUSH);
			s->in_pos += avail - s->u.z.avail_in;
			*out = len - s->u.z.avail_out;
			if (z == Z_STREAM_END) {
				/* Another member may follow (pigz, concatenated files). */
				if ((r = refill(s)) < 0)
					return r;
				if (s->in_pos < s->in_len && s->in[s->in_pos] == 0x1f) {
					inflateReset(&s->u.z);
				} else {
					s->end = true;
					if ((r = only_zeros_left(s)) < 0)
						return r;
				}
			} else if (z != Z_OK && z != Z_BUF_ERROR) {
				return errf(s, -EBADMSG, "gzip data is corrupt (%s)", s->u.z.msg ? s->u.z.msg : "zlib");
			} else if (z == Z_BUF_ERROR && !avail && s->in_eof) {
				return errf(s, -EBADMSG, "gzip data ends early");
			}
		} else if (s->comp == COMP_ZSTD) {
			if (!avail && s->in_eof) {
				if (!s->zstd_frame_done)
					return errf(s, -EBADMSG, "zstd data ends early");
				s->end = true;
				break;
			}
			ZSTD_inBuffer ib = { in, avail, 0 };
			ZSTD_outBuffer ob = { buf, len, 0 };
			size_t z = ZSTD_decompressStream(s->zs, &ob, &ib);
			if (ZSTD_isError(z))
				return errf(s, -EBADMSG, "zstd data is corrupt (%s)", ZSTD_getErrorName(z));
			s->zstd_frame_done = z == 0;
			s->in_pos += ib.pos;
			*out = ob.pos;
		} else if (s->comp == COMP_XZ) {
			s->u.xz.next_in = in;
			s->u.xz.avail_in = avail;
			s->u.xz.next_out = buf;
			s->u.xz.avail_out = len;
			lzma_ret x = lzma_code(&s->u.xz, s->in_eof && !avail ? LZMA_FINISH : LZMA_RUN);
			s->in_pos += avail - s->u.xz.avail_in;
			*out = len - s->u.xz.avail_out;
			if (x == LZMA_STREAM_END)
				s->end = true;
			else if (x == LZMA_MEMLIMIT_ERROR)
				return errf(s, -E2BIG, "xz data needs more than %llu MiB to decode",
					    (unsigned long long)(XZ_MEMLIMIT >> 20));
			else if (x != LZMA_OK && x != LZMA_BUF_ERROR)
				return errf(s, -EBADMSG, "xz data is corrupt (error %d)", (int)x);
			else if (x == LZMA_BUF_ERROR && !avail && s->in_eof)
				return errf(s, -EBADMSG, "xz data ends early");
		} else {
			if (!avail && s->in_eof)
				return errf(s, -EBADMSG, "bzip2 data ends early");
			s->u.bz.next_in = (char *)in;
			s->u.bz.avail_in = (unsigned)avail;
			s->u.bz.next_out = (char *)buf;
			s->u.bz.avail_out = (unsigned)(len > UINT32_MAX ? UINT32_MAX : len);
			int b = BZ2_bzDecompress(&s->u.bz);
			s->in_pos += avail - s->u.bz.avail_in;
			*out = len - s->u.bz.avail_out;
			if (b == BZ_STREAM_END) {
				if ((r = refill(s)) < 0)
					return r;
				if (s->in_pos < s->in_len && s->in[s->in_pos] == 'B') {
					BZ2_bzDecompressEnd(&s->u.bz);
					memset(&s->u.bz, 0, sizeof(s->u.bz));
					if (BZ2_bzDecompressInit(&s->u.bz, 0, 0) != BZ_OK)
						return errf(s, -ENOMEM, "bzip2 init failed");
				} else {
					s->end = true;
					if ((r = only_zeros_left(s)) < 0)
						return r;
				}
			} else if (b != BZ_OK) {
				return errf(s, -EBADMSG, "bzip2 data is corrupt (error %d)", b);
			}
		}
	}
	return 0;
}

int64_t layer_read(void *stream, void *buf, size_t len)
{
	struct layer_stream *s = stream;
	size_t out;
	int r = decode(s, buf, len, &out);
	if (r < 0)
		return r;
	if (out) {
		if (EVP_DigestUpdate(s->diff_md, buf, out) != 1)
			return errf(s, -EIO, "sha256 failed");
		*s->total_out += out;
		if (*s->total_out > s->max_out)
			return errf(s, -EFBIG, "the layers expand to more than %llu bytes (the space there is for them)",
				    (unsigned long long)s->max_out);
	}
	return (int64_t)out;
}

static void hex_digest(EVP_MD_CTX *md, char *out, size_t len)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_DigestFinal_ex(md, d, &n);
	size_t at = (size_t)snprintf(out, len, "sha256:");
	for (unsigned i = 0; i < n && at + 3 <= len; i++)
		at += (size_t)snprintf(out + at, len - at, "%02x", d[i]);
}

int layer_finish(struct layer_stream *s, char *err, size_t errlen)
{
	/* What the tar's end left: its zero blocks and any padding the writer added. */
	uint8_t buf[65536];
	for (;;) {
		int64_t k = layer_read(s, buf, sizeof(buf));
		if (k < 0)
			return util_errf(err, errlen, (int)k, "%s", s->err);
		if (k == 0)
			break;
		for (int64_t i = 0; i < k; i++)
			if (buf[i])
				return util_errf(err, errlen, -EBADMSG, "data after the end of the tar archive");
	}
	if (s->pos != s->spec.length || s->in_pos != s->in_len)
		return util_errf(err, errlen, -EBADMSG, "the compressed stream ends before the blob does");
	char got[80];
	hex_digest(s->blob_md, got, sizeof(got));
	if (s->spec.digest[0] && strcmp(got, s->spec.digest))
		return util_errf(err, errlen, -EBADMSG, "digest mismatch: the blob is %s, the image says %s", got,
				 s->spec.digest);
	hex_digest(s->diff_md, got, sizeof(got));
	if (s->spec.diff_id[0] && strcmp(got, s->spec.diff_id))
		return util_errf(err, errlen, -EBADMSG,
				 "diff id mismatch: the uncompressed layer is %s, the image config says %s", got,
				 s->spec.diff_id);
	return 0;
}

uint64_t layer_consumed(const struct layer_stream *s)
{
	return s->pos;
}

void layer_close(struct layer_stream *s)
{
	if (!s)
		return;
	if (s->inited) {
		switch (s->comp) {
		case COMP_GZIP: inflateEnd(&s->u.z); break;
		case COMP_XZ: lzma_end(&s->u.xz); break;
		case COMP_BZIP2: BZ2_bzDecompressEnd(&s->u.bz); break;
		default: break;
		}
	}
	ZSTD_freeDStream(s->zs);
	EVP_MD_CTX_free(s->blob_md);
	EVP_MD_CTX_free(s->diff_md);
	free(s->in);
	free(s);
}

int layer_open(const struct layer_spec *spec, uint64_t max_out, uint64_t *total_out, struct layer_stream **ret,
	       char *err, size_t errlen)
{
	struct layer_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return util_errf(err, errlen, -ENOMEM, "out of memory");
	s->spec = *spec;
	s->max_out = max_out;
	s->total_out = total_out;
	s->in = malloc(IN_BUF);
	s->blob_md = EVP_MD_CTX_new();
	s->diff_md = EVP_MD_CTX_new();
	/* EVP_sha256() was fetched before the seccomp filter (main.c): no provider is loaded here. */
	if (!s->in || !s->blob_md || !s->diff_md || EVP_DigestInit_ex(s->blob_md, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestInit_ex(s->diff_md, EVP_sha256(), NULL) != 1) {
		layer_close(s);
		return util_errf(err, errlen, -ENOMEM, "out of memory");
	}
	int r = refill(s);
	if (r < 0) {
		r = util_errf(err, errlen, r, "%s", s->err);
		layer_close(s);
		return r;
	}
	enum unpack_comp seen = layer_sniff(s->in, s->in_len);
	if (spec->comp != COMP_AUTO && spec->comp != seen) {
		r = util_errf(err, errlen, -EBADMSG, "the image says %s, the data is %s", layer_comp_name(spec->comp),
			      seen == COMP_NONE ? "not compressed (or not a format known here)" : layer_comp_name(seen));
		layer_close(s);
		return r;
	}
	s->comp = seen;
	if ((r = init_decoder(s)) < 0) {
		r = util_errf(err, errlen, r, "%s", s->err);
		layer_close(s);
		return r;
	}
	*ret = s;
	return 0;
}

const char *layer_error(const struct layer_stream *s)
{
	return s->err;
}
