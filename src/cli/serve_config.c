/* `serve --config FILE`: server options and exports in a file.
 *
 *   # comment
 *   [server]                  any long option of `serve --help`, without
 *   socket = /run/vc.sock     the dashes; flags take true or false
 *   host-bytes = 4G
 *   write-back = true
 *
 *   [export vm1]              an export named vm1 ([export] alone: "")
 *   path = /var/lib/images/vm1.img
 *   readonly = true           per export: readonly, write-back,
 *   description = "root disk" description (the server's by default)
 *
 * Settings before any section belong to [server]. Values may be quoted
 * ("..."); an unquoted one ends at a " #" or " ;" comment. A line is at
 * most 4 KiB. This file only parses: serve.c turns
 * [server] settings into options ahead of the command line's (so the
 * command line wins) and checks their names against its option table. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/serve.h"

int serve_config_bool(const char *v)
{
	static const char *yes[] = { "true", "yes", "on", "1" }, *no[] = { "false", "no", "off", "0" };
	for (unsigned i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0)
			return 1;
		if (strcasecmp(v, no[i]) == 0)
			return 0;
	}
	return -1;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n > 0 && strchr(" \t\r\n", s[n - 1]))
		s[--n] = 0;
	return s;
}

#define FAIL(...)                                              \
	do {                                                   \
		snprintf(err, errlen, __VA_ARGS__);            \
		e = -EINVAL;                                   \
		goto out;                                      \
	} while (0)

int serve_config_load(const char *path, struct serve_config *cf, char *err, size_t errlen)
{
	memset(cf, 0, sizeof *cf);
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	char line[4096 + 2];
	int lineno = 0, e = 0;
	struct serve_export *x = NULL; /* the export section we are in, or NULL: [server] */
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f))
			FAIL("%s:%d: line too long", path, lineno);
		char *s = trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *end = strchr(s, ']');
			if (!end || *trim(end + 1))
				FAIL("%s:%d: a section is [server] or [export NAME]", path, lineno);
			*end = 0;
			char *sec = trim(s + 1);
			if (strcmp(sec, "server") == 0) {
				x = NULL;
				continue;
			}
			if (strncmp(sec, "export", 6) != 0 || (sec[6] && sec[6] != ' ' && sec[6] != '\t'))
				FAIL("%s:%d: unknown section [%s] (want [server] or [export NAME])", path,
				     lineno, sec);
			if (cf->nexports == SERVE_MAX_EXPORTS)
				FAIL("%s:%d: more than %d exports", path, lineno, SERVE_MAX_EXPORTS);
			char *name = trim(sec + 6);
			if (strlen(name) > NBD_MAX_STRING)
				FAIL("%s:%d: export name over %d bytes", path, lineno, NBD_MAX_STRING);
			for (unsigned i = 0; i < cf->nexports; i++)
				if (strcmp(cf->exports[i].name, name) == 0)
					FAIL("%s:%d: a second [export %s]", path, lineno, name);
			x = &cf->exports[cf->nexports++];
			*x = (struct serve_export){ .readonly = -1, .write_back = -1, .line = lineno };
			if (!(x->name = strdup(name)))
				FAIL("out of memory");
			continue;
		}
		char *eq = strchr(s, '=');
		if (!eq)
			FAIL("%s:%d: want KEY = VALUE", path, lineno);
		*eq = 0;
		char *key = trim(s), *val = trim(eq + 1);
		if (*val != '"') /* an unquoted value ends at " #" or " ;" */
			for (char *p = val; *p; p++)
				if ((*p == '#' || *p == ';') && p > val && (p[-1] == ' ' || p[-1] == '\t')) {
					*p = 0;
					val = trim(val);
					break;
				}
		size_t vl = strlen(val);
		if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
			val[vl - 1] = 0;
			val++;
		}
		if (!*key)
			FAIL("%s:%d: want KEY = VALUE", path, lineno);
		if (!x) {
			struct serve_setting *n =
				realloc(cf->settings, (cf->nsettings + 1) * sizeof *cf->settings);
			if (!n)
				FAIL("out of memory");
			cf->settings = n;
			n[cf->nsettings] = (struct serve_setting){ strdup(key), strdup(val), lineno };
			if (!n[cf->nsettings].key || !n[cf->nsettings].value)
				FAIL("out of memory");
			cf->nsettings++;
			continue;
		}
		int b = serve_config_bool(val);
		if (strcmp(key, "path") == 0) {
			free(x->path);
			if (!*val || !(x->path = strdup(val)))
				FAIL("%s:%d: an empty path", path, lineno);
		} else if (strcmp(key, "description") == 0) {
			free(x->description);
			if (strlen(val) > NBD_MAX_STRING || !(x->description = strdup(val)))
				FAIL("%s:%d: description over %d bytes", path, lineno, NBD_MAX_STRING);
		} else if (strcmp(key, "readonly") == 0 || strcmp(key, "write-back") == 0) {
			if (b < 0)
				FAIL("%s:%d: %s wants true or false, not '%s'", path, lineno, key, val);
			*(key[0] == 'r' ? &x->readonly : &x->write_back) = b;
		} else {
			FAIL("%s:%d: unknown export setting '%s' (path, readonly, write-back, "
			     "description)",
			     path, lineno, key);
		}
	}
	for (unsigned i = 0; i < cf->nexports && !e; i++)
		if (!cf->exports[i].path)
			FAIL("%s:%d: [export %s] has no path", path, cf->exports[i].line,
			     cf->exports[i].name);
out:
	fclose(f);
	if (e)
		serve_config_free(cf);
	return e;
}

void serve_config_free(struct serve_config *cf)
{
	for (unsigned i = 0; i < cf->nsettings; i++) {
		free(cf->settings[i].key);
		free(cf->settings[i].value);
	}
	free(cf->settings);
	for (unsigned i = 0; i < cf->nexports; i++) {
		free(cf->exports[i].name);
		free(cf->exports[i].path);
		free(cf->exports[i].description);
	}
	memset(cf, 0, sizeof *cf);
}

/* What serve_config_apply made, for good (volatile: a store never read
 * back would otherwise be dropped, and LeakSanitizer would call it lost). */
static char **volatile config_argv;

int serve_config_apply(int *argc, char ***argv, const struct option *lo, struct serve_config *cf,
		       char *err, size_t errlen)
{
	memset(cf, 0, sizeof *cf);
	int ac = *argc, at = -1, e;
	char **av = *argv;
	const char *path = NULL;
	for (int i = 1; i < ac && strcmp(av[i], "--") != 0; i++) {
		if (strcmp(av[i], "--config") == 0 && i + 1 < ac) {
			path = av[i + 1];
			at = i;
		} else if (strncmp(av[i], "--config=", 9) == 0) {
			path = av[i] + 9;
			at = i;
		}
	}
	if (!path)
		return 0;
	if ((e = serve_config_load(path, cf, err, errlen)) < 0)
		return e;
	/* argv[0], the [server] settings as options, then the command line
	 * without --config: getopt takes the last of a repeated option, so
	 * the command line wins. */
	char **nv = calloc((size_t)ac + cf->nsettings + 1, sizeof *nv);
	if (!nv)
		return -ENOMEM;
	config_argv = nv; /* for good, even on an error below */
	int n = 0;
	nv[n++] = av[0];
	for (unsigned i = 0; i < cf->nsettings; i++) {
		const struct serve_setting *st = &cf->settings[i];
		const struct option *o = lo;
		while (o->name && (strcmp(o->name, st->key) != 0 || strcmp(o->name, "help") == 0))
			o++;
		if (!o->name) {
			snprintf(err, errlen, "%s:%d: unknown setting '%s' (any long option of "
				 "`vramcache serve --help`)", path, st->line, st->key);
			return -EINVAL;
		}
		if (o->has_arg == no_argument) {
			int b = serve_config_bool(st->value);
			if (b < 0) {
				snprintf(err, errlen, "%s:%d: %s wants true or false, not '%s'", path,
					 st->line, st->key, st->value);
				return -EINVAL;
			}
			if (b && asprintf(&nv[n++], "--%s", st->key) < 0)
				return -ENOMEM;
		} else if (asprintf(&nv[n++], "--%s=%s", st->key, st->value) < 0) {
			return -ENOMEM;
		}
	}
	for (int i = 1; i < ac; i++)
		if (i != at && !(i == at + 1 && strcmp(av[at], "--config") == 0))
			nv[n++] = av[i];
	/* nv and its strings live as long as the process: getopt's optarg
	 * points into them. */
	*argc = n;
	*argv = nv;
	return 0;
}
