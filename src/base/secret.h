/* Secret bytes on the host: key material (BAG section 3.5).
 *
 * A secret lives in a mapping of its own, locked in memory (mlock: never
 * written to swap) and left out of core dumps (MADV_DONTDUMP); it is
 * zeroed (explicit_bzero) before it is unmapped. A fork child gets a
 * copy but not the lock (mlock is not inherited): a server that
 * daemonizes makes its secrets after the fork. Copies the caller makes
 * elsewhere (a kernel parameter, an OpenSSL context) are the caller's to
 * account for.
 *
 * Functions return 0 or -errno with a message (base/error.h). Cost: one
 * mmap + mlock per secret (a page or two), one getrandom or one file read.
 */
#ifndef VC_BASE_SECRET_H
#define VC_BASE_SECRET_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vc_secret {
	unsigned char *bytes; /* len bytes, inside the locked mapping */
	size_t len;
	size_t map_len; /* private: the whole mapping, this header included */
};

/* len (1 .. 1 MiB) zero bytes, locked. -ENOMEM or -EPERM (with
 * RLIMIT_MEMLOCK in the message) when the memory cannot be locked. */
int vc_secret_alloc(size_t len, struct vc_secret **out);

/* len bytes from the kernel's random source (getrandom: blocks only until
 * the pool is first initialized, at boot): an ephemeral key. */
int vc_secret_random(size_t len, struct vc_secret **out);

/* Exactly len raw bytes from the file at path, refused unless it is a
 * regular file (after symbolic links) owned by this user (the effective
 * uid), with no permission for group or others (mode 0600, 0400 or
 * stricter), of exactly len bytes. Messages name the file and what to
 * change, for example "chmod 600 FILE". A key file is made with
 *   (umask 077; head -c 64 /dev/urandom > FILE)
 * Errors: -ENOENT and other open errors, -EINVAL (not a regular file, wrong
 * size), -EACCES (owner or mode). */
int vc_secret_load(const char *path, size_t len, struct vc_secret **out);

/* Zeroes and unmaps s; NULL is a no-op. */
void vc_secret_free(struct vc_secret *s);

/* Zeroes n bytes at p in a way the compiler keeps (explicit_bzero): for
 * the short-lived copies of key material a caller makes (a launch's
 * parameters) once they are used. */
void vc_secret_zero(void *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif
