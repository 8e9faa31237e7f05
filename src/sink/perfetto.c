// SPDX-License-Identifier: MIT
/*
 * Perfetto's protobuf trace, written directly (no SDK): a file is a sequence of
 * `Trace.packet` (field 1) records, each a TracePacket. Tracks are TrackDescriptors;
 * slices, instants and counters are TrackEvents on one packet sequence whose event names,
 * categories, argument names and string argument values are interned (InternedData in the
 * packet that first uses a string), so a kernel's long name is written once however many
 * times it runs. Field numbers are those of protos/perfetto/trace (tests/proto/ keeps the
 * subset the tests decode with).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hmap.h"
#include "core/output.h"
#include "core/pb.h"
#include "core/util.h"
#include "sink/timeline.h"

enum {
	/* TracePacket */
	TP_TIMESTAMP = 8,
	TP_SEQ_ID = 10,
	TP_TRACK_EVENT = 11,
	TP_INTERNED = 12,
	TP_SEQ_FLAGS = 13,
	TP_TRACK_DESCRIPTOR = 60,
	SEQ_CLEARED = 1,
	SEQ_NEEDS_STATE = 2,
	/* TrackDescriptor */
	TD_UUID = 1,
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT = 5,
	TD_COUNTER = 8,
	PD_PID = 1,
	PD_CMDLINE = 2,
	PD_NAME = 6,
	THD_PID = 1,
	THD_TID = 2,
	THD_NAME = 5,
	CD_UNIT = 3,
	UNIT_SIZE_BYTES = 3,
	/* TrackEvent */
	TE_CATEGORY_IIDS = 3,
	TE_ANNOTATIONS = 4,
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK = 11,
	TE_DOUBLE_COUNTER = 44,
	TE_FLOW_IDS = 47,
	TE_TERMINATING_FLOW_IDS = 48,
	TYPE_SLICE_BEGIN = 1,
	TYPE_SLICE_END = 2,
	TYPE_INSTANT = 3,
	TYPE_COUNTER = 4,
	/* DebugAnnotation */
	DA_NAME_IID = 1,
	DA_UINT = 3,
	DA_INT = 4,
	DA_DOUBLE = 5,
	DA_POINTER = 7,
	DA_STRING_IID = 17,
	/* InternedData */
	ID_CATEGORIES = 1,
	ID_EVENT_NAMES = 2,
	ID_ANNOTATION_NAMES = 3,
	ID_STRING_VALUES = 29,
	IE_IID = 1,
	IE_NAME = 2, /* EventName.name, EventCategory.name, DebugAnnotationName.name,
		      * InternedString.str */
	SEQUENCE_ID = 1,
};

/* Interned string tables, one iid space each. */
enum {
	T_CAT,
	T_NAME,
	T_ARG,
	T_VALUE,
	NTABLES
};
static const unsigned int table_field[NTABLES] = { ID_CATEGORIES, ID_EVENT_NAMES,
						   ID_ANNOTATION_NAMES, ID_STRING_VALUES };

struct interned {
	char *s;
	__u64 iid;
};

struct perfetto {
	FILE *f;
	bool own; /* not stdout */
	int err;  /* first write error (-errno) */
	struct pb pkt;
	struct hmap strings[NTABLES]; /* hash -> struct interned */
	__u64 next_iid[NTABLES];
	/* Strings first used by the packet being built. */
	struct {
		int table;
		const struct interned *in;
	} fresh[4 + 2 * TL_MAX_ARGS];
	int nfresh;
};

static __u64 hash_str(const char *s)
{
	__u64 h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* The iid of s in a table, interning it (and noting it for this packet) if new. 0: a
 * hash collision with another string; the caller writes nothing then. */
static __u64 intern(struct perfetto *p, int table, const char *s)
{
	__u64 h = hash_str(s);
	struct interned *in = hmap_get(&p->strings[table], h, 0);

	if (in)
		return strcmp(in->s, s) ? 0 : in->iid;
	in = xmalloc(sizeof(*in));
	in->s = xstrdup(s);
	in->iid = ++p->next_iid[table];
	hmap_put(&p->strings[table], h, 0, in);
	if (p->nfresh < (int)ARRAY_SIZE(p->fresh)) {
		p->fresh[p->nfresh].table = table;
		p->fresh[p->nfresh++].in = in;
	}
	return in->iid;
}

static void emit(struct perfetto *p)
{
	unsigned char head[11];
	size_t n = 0, len = p->pkt.len;

	head[n++] = 0x0a; /* Trace.packet, length-delimited */
	do {
		head[n++] = (unsigned char)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
		len >>= 7;
	} while (len);
	if (!p->err && (fwrite(head, 1, n, p->f) != n ||
			fwrite(p->pkt.buf, 1, p->pkt.len, p->f) != p->pkt.len))
		p->err = -(errno ? errno : EIO);
	pb_reset(&p->pkt);
}

static void begin_packet(struct perfetto *p, __u64 ts, bool timed)
{
	pb_reset(&p->pkt);
	if (timed)
		pb_varint(&p->pkt, TP_TIMESTAMP, ts);
	pb_varint(&p->pkt, TP_SEQ_ID, SEQUENCE_ID);
}

static void p_track(void *w, const struct tl_track *t)
{
	struct perfetto *p = w;
	size_t td, sub;

	begin_packet(p, 0, false);
	td = pb_begin(&p->pkt, TP_TRACK_DESCRIPTOR);
	pb_varint(&p->pkt, TD_UUID, t->uuid);
	if (t->parent)
		pb_varint(&p->pkt, TD_PARENT, t->parent);
	switch (t->kind) {
	case TL_PROCESS:
		sub = pb_begin(&p->pkt, TD_PROCESS);
		pb_varint(&p->pkt, PD_PID, t->pid);
		if (t->cmdline)
			pb_string(&p->pkt, PD_CMDLINE, t->cmdline);
		pb_string(&p->pkt, PD_NAME, t->name);
		pb_end(&p->pkt, sub);
		break;
	case TL_THREAD:
		sub = pb_begin(&p->pkt, TD_THREAD);
		pb_varint(&p->pkt, THD_PID, t->pid);
		pb_varint(&p->pkt, THD_TID, t->tid);
		pb_string(&p->pkt, THD_NAME, t->name);
		pb_end(&p->pkt, sub);
		break;
	case TL_COUNTER:
		pb_string(&p->pkt, TD_NAME, t->name);
		sub = pb_begin(&p->pkt, TD_COUNTER);
		if (t->bytes)
			pb_varint(&p->pkt, CD_UNIT, UNIT_SIZE_BYTES);
		pb_end(&p->pkt, sub);
		break;
	default:
		pb_string(&p->pkt, TD_NAME, t->name);
		break;
	}
	pb_end(&p->pkt, td);
	emit(p);
}

/* A TrackEvent packet: interned data for the strings it uses first, then the event. */
static void track_event(struct perfetto *p, const struct tl_event *e, int type, __u64 ts)
{
	__u64 name = 0, cat = 0, keys[TL_MAX_ARGS], vals[TL_MAX_ARGS];
	size_t te, sub, entry;

	p->nfresh = 0;
	if (type != TYPE_SLICE_END) {
		name = intern(p, T_NAME, e->name);
		cat = e->cat ? intern(p, T_CAT, e->cat) : 0;
		for (int i = 0; i < e->nargs; i++) {
			keys[i] = intern(p, T_ARG, e->args[i].key);
			vals[i] = e->args[i].type == TL_STR ? intern(p, T_VALUE, e->args[i].s) : 0;
		}
	}
	begin_packet(p, ts, true);
	pb_varint(&p->pkt, TP_SEQ_FLAGS, SEQ_NEEDS_STATE);
	if (p->nfresh) {
		sub = pb_begin(&p->pkt, TP_INTERNED);
		for (int i = 0; i < p->nfresh; i++) {
			entry = pb_begin(&p->pkt, table_field[p->fresh[i].table]);
			pb_varint(&p->pkt, IE_IID, p->fresh[i].in->iid);
			pb_string(&p->pkt, IE_NAME, p->fresh[i].in->s);
			pb_end(&p->pkt, entry);
		}
		pb_end(&p->pkt, sub);
	}
	te = pb_begin(&p->pkt, TP_TRACK_EVENT);
	pb_varint(&p->pkt, TE_TYPE, (__u64)type);
	pb_varint(&p->pkt, TE_TRACK, e->track);
	if (name)
		pb_varint(&p->pkt, TE_NAME_IID, name);
	if (cat)
		pb_varint(&p->pkt, TE_CATEGORY_IIDS, cat);
	for (int i = 0; type != TYPE_SLICE_END && i < e->nargs; i++) {
		const struct tl_arg *a = &e->args[i];

		if (!keys[i] || (a->type == TL_STR && !vals[i]))
			continue; /* (a hash collision: left out rather than mislabelled) */
		sub = pb_begin(&p->pkt, TE_ANNOTATIONS);
		pb_varint(&p->pkt, DA_NAME_IID, keys[i]);
		switch (a->type) {
		case TL_STR:
			pb_varint(&p->pkt, DA_STRING_IID, vals[i]);
			break;
		case TL_U64:
			pb_varint(&p->pkt, DA_UINT, a->u);
			break;
		case TL_I64:
			pb_sint(&p->pkt, DA_INT, a->i);
			break;
		case TL_HEX:
			pb_varint(&p->pkt, DA_POINTER, a->u);
			break;
		case TL_F64:
			pb_double(&p->pkt, DA_DOUBLE, a->f);
			break;
		}
		pb_end(&p->pkt, sub);
	}
	if (type != TYPE_SLICE_END && e->flow_out)
		pb_fixed64(&p->pkt, TE_FLOW_IDS, e->flow_out);
	if (type != TYPE_SLICE_END && e->flow_in)
		pb_fixed64(&p->pkt, TE_TERMINATING_FLOW_IDS, e->flow_in);
	pb_end(&p->pkt, te);
	emit(p);
}

static void p_slice(void *w, const struct tl_event *e)
{
	track_event(w, e, TYPE_SLICE_BEGIN, e->ts);
	track_event(w, e, TYPE_SLICE_END, e->ts + e->dur);
}

static void p_instant(void *w, const struct tl_event *e)
{
	track_event(w, e, TYPE_INSTANT, e->ts);
}

static void p_counter(void *w, __u64 track, __u64 ts, double value)
{
	struct perfetto *p = w;
	size_t te;

	begin_packet(p, ts, true);
	pb_varint(&p->pkt, TP_SEQ_FLAGS, SEQ_NEEDS_STATE);
	te = pb_begin(&p->pkt, TP_TRACK_EVENT);
	pb_varint(&p->pkt, TE_TYPE, TYPE_COUNTER);
	pb_varint(&p->pkt, TE_TRACK, track);
	pb_double(&p->pkt, TE_DOUBLE_COUNTER, value);
	pb_end(&p->pkt, te);
	emit(p);
}

static int p_close(void *w)
{
	struct perfetto *p = w;
	struct hmap_slot *s;
	int err = p->err;

	if (fflush(p->f) && !err)
		err = -(errno ? errno : EIO);
	if (p->own && fclose(p->f) && !err)
		err = -(errno ? errno : EIO);
	for (int t = 0; t < NTABLES; t++) {
		hmap_for_each (&p->strings[t], s) {
			free(((struct interned *)s->val)->s);
			free(s->val);
		}
		hmap_free(&p->strings[t]);
	}
	pb_free(&p->pkt);
	free(p);
	return err;
}

static const struct tl_writer_ops perfetto_ops = { .track = p_track,
						   .slice = p_slice,
						   .instant = p_instant,
						   .counter = p_counter,
						   .close = p_close };

/* Open `path` for a trace writer ("-": stdout). */
FILE *timeline__open_file(const char *path, bool *own, char *err, size_t errlen)
{
	*own = strcmp(path, "-") != 0;
	return output_open("write the trace to", path, err, errlen);
}

struct timeline *timeline__open_perfetto(const char *path, char *err, size_t errlen)
{
	struct perfetto *p = xcalloc(1, sizeof(*p));

	p->f = timeline__open_file(path, &p->own, err, errlen);
	if (!p->f) {
		free(p);
		return NULL;
	}
	/* The sequence starts with its incremental state (interned strings) cleared. */
	begin_packet(p, 0, false);
	pb_varint(&p->pkt, TP_SEQ_FLAGS, SEQ_CLEARED);
	emit(p);
	return timeline__new(&perfetto_ops, p, path);
}
