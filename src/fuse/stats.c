/* Statistics of a mount, per file and per directory: `vramcache stat PATH`
 * reads them as the extended attribute "user.vramcache.stats" of any file
 * or directory under the mount (ops_meta.c answers it; it is not listed,
 * so copies do not carry it). A file: its identity's counters (bytes read,
 * those whose pages were all in the host tier, written, prefetched; opens;
 * drops for changes in SRC). A directory: the sums over the regular files
 * directly in it, and at the mount's root also the cache's own counters
 * (vc_get_stats: hits per tier, misses, occupancy), the identity
 * table's and the inode table's. Host hits are what vc_volume_read_hit
 * answered; GPU-tier hits and misses are told apart only cache-wide.
 * Cost: a file, O(1); a directory, one fstatat and one identity lookup per
 * entry.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse/fs.h"

struct sums {
	uint64_t files, cached, opens, rd, host, wr, ra, drops;
};

static void add_ident(struct sums *s, const struct fs_ident *id)
{
	s->cached += id->vol != NULL;
	s->opens += atomic_load(&id->opens);
	s->rd += atomic_load(&id->rd_bytes);
	s->host += atomic_load(&id->rd_host_bytes);
	s->wr += atomic_load(&id->wr_bytes);
	s->ra += atomic_load(&id->ra_bytes);
	s->drops += atomic_load(&id->drops);
}

/* The identity of key k, if any, counted into s. */
static void add_file(struct fs *fs, struct sums *s, const struct fs_key *k)
{
	s->files++;
	struct fs_ident *id = fs_ident_find_or_lock(fs, k);
	if (!id) {
		fs_ident_unlock_table(fs);
		return;
	}
	add_ident(s, id);
	fs_ident_put(fs, id);
}

static void print_sums(FILE *f, const struct sums *s)
{
	fprintf(f,
		"\"files\": %llu, \"cached_files\": %llu, \"opens\": %llu, \"read_bytes\": %llu, "
		"\"host_hit_bytes\": %llu, \"host_hit_ratio\": %.4f, \"write_bytes\": %llu, "
		"\"readahead_bytes\": %llu, \"drops\": %llu",
		(unsigned long long)s->files, (unsigned long long)s->cached,
		(unsigned long long)s->opens, (unsigned long long)s->rd,
		(unsigned long long)s->host, s->rd ? (double)s->host / (double)s->rd : 0.0,
		(unsigned long long)s->wr, (unsigned long long)s->ra,
		(unsigned long long)s->drops);
}

static void print_cache(FILE *f, struct fs *fs)
{
	struct vc_stats st = { .size = sizeof st };
	if (vc_get_stats(fs->c, &st) < 0)
		return;
	uint64_t acc = st.hits[VC_TIER_HOST] + st.hits[VC_TIER_GPU] + st.misses;
	pthread_mutex_lock(&fs->id_mu);
	unsigned long long slots = fs->slots_used, nfvols = fs->nfvols;
	size_t nids = fs->id_count;
	pthread_mutex_unlock(&fs->id_mu);
	pthread_mutex_lock(&fs->fd_mu);
	unsigned nfds = fs->nfds;
	pthread_mutex_unlock(&fs->fd_mu);
	pthread_mutex_lock(&fs->ino_mu);
	size_t ninos = fs->ino_count;
	unsigned ino_fds = fs->ino_fds, ino_idle = fs->ino_idle_fds;
	pthread_mutex_unlock(&fs->ino_mu);
	fprintf(f,
		", \"cache\": {\"device\": \"%s\", \"hits_host\": %llu, \"hits_gpu\": %llu, "
		"\"misses\": %llu, \"hit_ratio\": %.4f, \"pages_host\": %llu, \"pages_gpu\": %llu, "
		"\"dirty_pages\": %llu, \"writebacks\": %llu, \"backing_read_bytes\": %llu}, "
		"\"identities\": {\"known\": %zu, \"with_slot\": %llu, \"volumes\": %llu, "
		"\"max_files\": %u, \"evicted\": %llu, \"served_uncached\": %llu, "
		"\"fds_open\": %u, \"max_fds\": %u, \"fd_opens\": %llu, \"fd_closes\": %llu, "
		"\"readahead_jobs\": %llu, \"readahead_dropped\": %llu}, "
		"\"inodes\": {\"known\": %zu, \"file_handles\": %s, \"fds_open\": %u, "
		"\"fds_idle\": %u, \"max_path_fds\": %u, \"fd_opens\": %llu, \"fd_closes\": %llu}",
		vc_device_name(fs->c), (unsigned long long)st.hits[VC_TIER_HOST],
		(unsigned long long)st.hits[VC_TIER_GPU], (unsigned long long)st.misses,
		acc ? (double)(st.hits[VC_TIER_HOST] + st.hits[VC_TIER_GPU]) / (double)acc : 0.0,
		(unsigned long long)st.pages_cached[VC_TIER_HOST],
		(unsigned long long)st.pages_cached[VC_TIER_GPU],
		(unsigned long long)st.dirty_pages, (unsigned long long)st.writebacks,
		(unsigned long long)st.backing_read_bytes, nids, slots, nfvols, fs->o->max_files,
		(unsigned long long)atomic_load(&fs->ids_evicted),
		(unsigned long long)atomic_load(&fs->ids_uncached), nfds, fs->o->max_fds,
		(unsigned long long)atomic_load(&fs->fd_opens),
		(unsigned long long)atomic_load(&fs->fd_closes),
		(unsigned long long)atomic_load(&fs->rq.queued),
		(unsigned long long)atomic_load(&fs->rq.dropped), ninos,
		fs->handles ? "true" : "false", ino_fds, ino_idle, fs->o->max_path_fds,
		(unsigned long long)atomic_load(&fs->ino_fd_opens),
		(unsigned long long)atomic_load(&fs->ino_fd_closes));
}

char *fs_stats_json(struct fs *fs, struct fs_inode *in)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	struct sums s = { 0 };
	if (in->type == S_IFREG) {
		add_file(fs, &s, &in->key);
		fputs("{\"kind\": \"file\", ", f);
		print_sums(f, &s);
		fputs("}\n", f);
	} else if (in->type == S_IFDIR) {
		int pfd = fs_inode_fd(fs, in);
		int fd = pfd >= 0 ? openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		if (pfd >= 0)
			fs_inode_put(fs, in);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d && fd >= 0)
			close(fd);
		for (struct dirent *e; d && (e = readdir(d));) {
			struct stat st;
			int efd = openat(dirfd(d), e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			if (efd < 0)
				continue;
			if (fstat(efd, &st) == 0 && S_ISREG(st.st_mode)) {
				struct fs_keybuf kb;
				fs_key_of(fs, efd, &st, &kb);
				add_file(fs, &s, &kb.k);
			}
			close(efd);
		}
		if (d)
			closedir(d);
		fputs("{\"kind\": \"directory\", ", f);
		print_sums(f, &s);
		if (in == &fs->root)
			print_cache(f, fs);
		fputs("}\n", f);
	} else {
		fputs("{\"kind\": \"other\"}\n", f);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
