// SPDX-License-Identifier: MIT
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/output.h"
#include "core/recording.h"
#include "core/util.h"

struct file_header {
	char magic[8];
	__u32 version;
	__u32 header_size;
};

struct recording {
	FILE *f;
	char *path;
	bool writing;
	unsigned long long offset;
	union {
		struct gs_hdr h;
		unsigned char bytes[GS_EVENT_MAX_SIZE];
	} buf;
};

static struct recording *rec_new(FILE *f, const char *path, bool writing)
{
	struct recording *r = xcalloc(1, sizeof(*r));

	r->f = f;
	r->path = xstrdup(path);
	r->writing = writing;
	return r;
}

struct recording *recording__create(const char *path)
{
	struct file_header fh = { .version = GS_REC_VERSION, .header_size = sizeof(fh) };
	char err[PATH_MAX + 128];
	FILE *f = output_open("create recording", path, err, sizeof(err));

	if (!f) {
		gs_err("%s", err);
		return NULL;
	}
	memcpy(fh.magic, GS_REC_MAGIC, sizeof(fh.magic));
	if (fwrite(&fh, sizeof(fh), 1, f) != 1) {
		gs_err("cannot write recording '%s': %s", path, strerror(errno));
		if (f != stdout)
			fclose(f);
		return NULL;
	}
	return rec_new(f, path, true);
}

int recording__write(struct recording *r, const struct gs_hdr *ev)
{
	if (fwrite(ev, ev->size, 1, r->f) != 1) {
		int err = -errno;

		gs_err("writing recording '%s' failed: %s", r->path, strerror(errno));
		return err ? err : -EIO;
	}
	r->offset += ev->size;
	return 0;
}

int recording__close(struct recording *r)
{
	int err = 0;

	if (!r)
		return 0;
	if (r->writing && fflush(r->f)) {
		err = -errno;
		gs_err("writing recording '%s' failed: %s", r->path, strerror(errno));
	}
	if (r->f != stdout && r->f != stdin && fclose(r->f) && !err) {
		err = -errno;
		gs_err("closing recording '%s' failed: %s", r->path, strerror(errno));
	}
	free(r->path);
	free(r);
	return err;
}

struct recording *recording__open(const char *path, char *err, size_t errlen)
{
	struct file_header fh;
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	size_t n;

	if (!f) {
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	n = fread(&fh, 1, sizeof(fh), f);
	if (n < sizeof(fh) || memcmp(fh.magic, GS_REC_MAGIC, sizeof(fh.magic))) {
		snprintf(err, errlen, "'%s' is not a gpuscope recording (no GPUSCOPE header)",
			 path);
		goto fail;
	}
	if (fh.version != GS_REC_VERSION || fh.header_size != sizeof(fh)) {
		snprintf(err, errlen,
			 "'%s' is a gpuscope recording of format %u, this gpuscope reads format %u",
			 path, fh.version, GS_REC_VERSION);
		goto fail;
	}
	return rec_new(f, path, false);
fail:
	if (f != stdin)
		fclose(f);
	return NULL;
}

int recording__next(struct recording *r, const struct gs_hdr **ev, char *err, size_t errlen)
{
	unsigned long long at = r->offset + sizeof(struct file_header);
	const char *why;
	size_t n;

	n = fread(&r->buf.h, 1, sizeof(r->buf.h), r->f);
	if (n == 0 && feof(r->f))
		return 0;
	if (n < sizeof(r->buf.h)) {
		snprintf(err, errlen, "truncated record header at byte %llu", at);
		return -1;
	}
	if (r->buf.h.size < sizeof(r->buf.h) || r->buf.h.size > sizeof(r->buf)) {
		snprintf(err, errlen, "corrupt record at byte %llu (size %u)", at, r->buf.h.size);
		return -1;
	}
	n = fread(r->buf.bytes + sizeof(r->buf.h), 1, r->buf.h.size - sizeof(r->buf.h), r->f);
	if (n < r->buf.h.size - sizeof(r->buf.h)) {
		snprintf(err, errlen, "truncated record at byte %llu (%zu of %u bytes)", at,
			 n + sizeof(r->buf.h), r->buf.h.size);
		return -1;
	}
	if (gs_event_check(&r->buf, r->buf.h.size, &why)) {
		snprintf(err, errlen, "corrupt record at byte %llu: %s", at, why);
		return -1;
	}
	r->offset += r->buf.h.size;
	*ev = &r->buf.h;
	return 1;
}
