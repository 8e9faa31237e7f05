// SPDX-License-Identifier: MIT
/* eBPF objects read for device-side probes (see bpfobj.h). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "core/util.h"
#include "ptx/bpfobj.h"
#include "ptx/translate.h"

/* The GPU's kind of a map type, 0 if it has none. */
unsigned int bpfobj_map_kind(unsigned int type)
{
	switch (type) {
	case BPF_MAP_TYPE_ARRAY:
	case BPFTIME_MAP_GPU_ARRAY:
	case BPFTIME_MAP_GPU_ARRAY_HOST:
	case BPFTIME_MAP_GPU_KERNEL_SHARED_ARRAY:
		return GS_MAP_ARRAY;
	case BPF_MAP_TYPE_PERCPU_ARRAY:
	case BPFTIME_MAP_PERGPUTD_ARRAY:
	case BPFTIME_MAP_PERGPUTD_ARRAY_HOST:
		return GS_MAP_PER_THREAD;
	case BPF_MAP_TYPE_HASH:
	case BPFTIME_MAP_GPU_HASH:
		return GS_MAP_HASH;
	case BPF_MAP_TYPE_RINGBUF:
	case BPF_MAP_TYPE_PERF_EVENT_ARRAY:
	case BPFTIME_MAP_GPU_RINGBUF:
		return GS_MAP_RING;
	default:
		return 0;
	}
}

unsigned int bpfobj_ring_bytes(unsigned int type, unsigned int value_size, unsigned int max_entries)
{
	unsigned long long want, bytes = GS_RING_MIN;

	/* (a perf event array's entries are CPUs: on the GPU, one ring of a set size) */
	if (type == BPF_MAP_TYPE_PERF_EVENT_ARRAY)
		return GS_RING_PERF_BYTES;
	if (type != BPFTIME_MAP_GPU_RINGBUF)
		return max_entries; /* (BPF_MAP_TYPE_RINGBUF: its bytes) */
	/* bpftime's: max_entries records of value_size bytes, per thread */
	value_size = value_size < GS_RING_REC_MAX ? value_size : GS_RING_REC_MAX;
	want = (unsigned long long)BPFTIME_RING_THREADS * (max_entries ? max_entries : 1) *
	       (GS_RING_HDR + ((value_size + 7ULL) & ~7ULL));
	while (bytes < want && bytes < GS_RING_MAX)
		bytes <<= 1;
	return (unsigned int)bytes;
}

/* A section of a tracing program for the host: a uprobe, tracepoint, perf event... (kprobe/
 * and kretprobe/ are bpftime's device entry and exit). */
static bool host_section(const char *s)
{
	static const char *const host[] = { "uprobe", "uretprobe",	"usdt",	     "tracepoint",
					    "tp/",    "raw_tracepoint", "raw_tp",    "tp_btf",
					    "fentry", "fexit",		"perf_event" };

	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		if (!strncmp(s, host[i], strlen(host[i])) &&
		    (!s[strlen(host[i])] || s[strlen(host[i])] == '/' ||
		     s[strlen(host[i]) - 1] == '/' || s[strlen(host[i])] == '.'))
			return true;
	return false;
}

/* Whether gpuscope runs a host program, and when (bpfobj.h): uprobe or uretprobe, bare or on
 * a launch function. */
static enum bpfobj_host_run host_run(const char *s)
{
	bool exit = !strncmp(s, "uretprobe", 9);
	const char *rest = s + (exit ? 9 : 6), *fn;

	if (strncmp(s, exit ? "uretprobe" : "uprobe", exit ? 9 : 6) ||
	    (*rest && (*rest != '/' || !rest[1])))
		return BPFOBJ_HOST_NOT_RUN;
	fn = strrchr(rest, ':') ? strrchr(rest, ':') + 1 : rest;
	if (*rest && !strstr(fn, "LaunchKernel"))
		return BPFOBJ_HOST_NOT_RUN;
	return exit ? BPFOBJ_HOST_EXIT : BPFOBJ_HOST_ENTRY;
}

/* A host program run here: the helpers it calls are those it has (msg, -1 if not), and the
 * maps it uses live in host memory. */
static int host_prog_check(const struct bpfobj_prog *p, struct bpfobj *o, char *msg, size_t msglen)
{
	for (size_t k = 0; k < p->n; k++) {
		const struct bpf_insn *in = &p->insns[k];

		if (in->code == (BPF_JMP | BPF_CALL)) {
			if (in->src_reg) {
				snprintf(msg, msglen,
					 "instruction %zu calls another function: not supported "
					 "in host programs yet",
					 k);
				return -1;
			}
			switch (in->imm) {
			case 1:
			case 2:
			case 3:
			case 5:
			case GS_BPF_TRACE_PRINTK:
			case GS_BPF_PID_TGID:
			case GS_BPF_PUTS:
				break;
			default:
				snprintf(msg, msglen,
					 "instruction %zu calls helper %d; a host program run in "
					 "the program has %s",
					 k, in->imm, BPFOBJ_HOST_HELPERS);
				return -1;
			}
		}
		if (in->code == (BPF_LD | BPF_IMM | BPF_DW) && in->src_reg == BPF_PSEUDO_MAP_IDX &&
		    in->imm >= 0 && (size_t)in->imm < o->nmaps)
			o->maps[in->imm].shared = true;
	}
	return 0;
}

/* A read-only data section of the object: its index and where it starts in o->rodata. */
struct ro_sec {
	size_t ndx, base;
};
#define MAX_RO 16

/* Gather the object's .rodata* sections into o->rodata (each 8-aligned): their number. */
static size_t read_rodata(Elf *e, size_t shstr, struct bpfobj *o, struct ro_sec *ro)
{
	Elf_Scn *scn = NULL;
	size_t n = 0;

	while (n < MAX_RO && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;
		size_t base = (o->rodata_len + 7) & ~(size_t)7;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & SHF_WRITE) ||
		    !(name = elf_strptr(e, shstr, sh.sh_name)) || strncmp(name, ".rodata", 7) ||
		    !(d = elf_getdata(scn, NULL)) || d->d_size > GS_RODATA_MAX - base)
			continue;
		o->rodata = xrealloc(o->rodata, base + d->d_size + 1);
		memset(o->rodata + o->rodata_len, 0, base - o->rodata_len);
		if (d->d_buf)
			memcpy(o->rodata + base, d->d_buf, d->d_size);
		else
			memset(o->rodata + base, 0, d->d_size);
		o->rodata_len = base + d->d_size;
		ro[n++] = (struct ro_sec){ elf_ndxscn(scn), base };
	}
	return n;
}

/*
 * Resolve the program's relocations (found in the ELF file: libbpf does not give them out
 * before loading): references to maps become BPF_PSEUDO_MAP_IDX immediates in insns, to
 * read-only data BPF_PSEUDO_MAP_VALUE ones (an offset into o->rodata); a device program's
 * to a map the GPU has not, a host program's run here to anything but an array, and
 * anything else, are refused (msg). 0, or -1.
 */
static int resolve(const char *path, const char *section, const char *prog, bool host,
		   bool host_runs, struct bpf_insn *insns, size_t n, const struct bpfobj *o,
		   const struct ro_sec *ro, size_t nro, char *msg, size_t msglen)
{
	const struct bpfobj_map *maps = o->maps;
	size_t nmaps = o->nmaps;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	Elf *e;
	Elf_Scn *scn = NULL;
	size_t shstr, target_ndx = 0;
	__u64 prog_off = 0;

	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_getshdrstrndx(e, &shstr)) {
		if (e)
			elf_end(e);
		close(fd);
		return 0;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (gelf_getshdr(scn, &sh) && (name = elf_strptr(e, shstr, sh.sh_name)) &&
		    !strcmp(name, section))
			target_ndx = elf_ndxscn(scn);
	}
	/* Where the program starts in its section: its function symbol's value. */
	scn = NULL;
	while (target_ndx && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Sym sym;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (int i = 0; gelf_getsym(d, i, &sym); i++) {
			const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);

			if (nm && !strcmp(nm, prog) && sym.st_shndx == target_ndx)
				prog_off = sym.st_value;
		}
	}
	scn = NULL;
	while (target_ndx && !rc && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh, symsh;
		Elf_Data *d, *syms;
		Elf_Scn *symscn;
		GElf_Rel rel;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_REL || sh.sh_info != target_ndx)
			continue;
		d = elf_getdata(scn, NULL);
		symscn = elf_getscn(e, sh.sh_link);
		syms = symscn ? elf_getdata(symscn, NULL) : NULL;
		if (!d || !syms || !gelf_getshdr(symscn, &symsh))
			continue;
		for (int i = 0; !rc && gelf_getrel(d, i, &rel); i++) {
			GElf_Sym sym;
			const char *nm = "?";
			size_t at, m;

			if (rel.r_offset < prog_off ||
			    (rel.r_offset - prog_off) / sizeof(struct bpf_insn) >= n)
				continue; /* (another program's) */
			at = (rel.r_offset - prog_off) / sizeof(struct bpf_insn);
			size_t r = nro;

			if (gelf_getsym(syms, (int)GELF_R_SYM(rel.r_info), &sym)) {
				const char *x = elf_strptr(e, symsh.sh_link, sym.st_name);

				if (x && *x)
					nm = x;
				for (r = 0; r < nro && ro[r].ndx != sym.st_shndx; r++)
					;
			}
			for (m = 0; m < nmaps && strcmp(maps[m].name, nm); m++)
				;
			if (m == nmaps && r < nro &&
			    insns[at].code == (BPF_LD | BPF_IMM | BPF_DW) &&
			    ro[r].base + sym.st_value + (__u64)(__u32)insns[at].imm <
				    o->rodata_len) {
				/* read-only data: its offset in o->rodata */
				insns[at].src_reg = BPF_PSEUDO_MAP_VALUE;
				insns[at].imm =
					(__s32)(ro[r].base + sym.st_value + (__u32)insns[at].imm);
				if (at + 1 < n)
					insns[at + 1].imm = 0;
			} else if (m == nmaps || insns[at].code != (BPF_LD | BPF_IMM | BPF_DW)) {
				snprintf(msg, msglen,
					 "instruction %zu refers to %s: globals and calls to other "
					 "functions are not supported yet",
					 at, nm);
				rc = -1;
			} else if (host_runs && (bpfobj_map_kind(maps[m].type) != GS_MAP_ARRAY ||
						 maps[m].key_size != 4)) {
				snprintf(msg, msglen,
					 "instruction %zu refers to map %s of type %u: a host "
					 "program run in the program shares array maps with the "
					 "GPU (2, 1503, 1504, 1513, 4-byte keys), nothing else",
					 at, nm, maps[m].type);
				rc = -1;
			} else if (!host && bpfobj_map_kind(maps[m].type) != GS_MAP_RING &&
				   (!bpfobj_map_kind(maps[m].type) ||
				    (bpfobj_map_kind(maps[m].type) != GS_MAP_HASH &&
				     maps[m].key_size != 4) ||
				    !maps[m].key_size || maps[m].key_size > 256)) {
				snprintf(msg, msglen,
					 "instruction %zu refers to map %s of type %u, key size "
					 "%u: %s",
					 at, nm, maps[m].type, maps[m].key_size, BPFOBJ_GPU_MAPS);
				rc = -1;
			} else {
				insns[at].src_reg = BPF_PSEUDO_MAP_IDX;
				insns[at].imm = (__s32)m;
			}
		}
	}
	elf_end(e);
	close(fd);
	return rc;
}

/* A device program that prints (helpers 6, 501) writes into a ring of the object's own,
 * added last; each printing call's off says which (translate.h); so does a host program
 * run here (into a ring of host memory of its own, drained the same way). No room for it:
 * the calls keep off 0, and the translator refuses them. */
static void add_print_ring(struct bpfobj *o)
{
	for (size_t i = 0; i < o->nprogs; i++) {
		struct bpfobj_prog *p = &o->progs[i];

		for (size_t k = 0; (!p->host || p->run) && k < p->n; k++) {
			struct bpf_insn *in = &p->insns[k];

			if (in->code != (BPF_JMP | BPF_CALL) || in->src_reg ||
			    (in->imm != GS_BPF_TRACE_PRINTK && in->imm != GS_BPF_PUTS))
				continue;
			if (strcmp(o->maps[o->nmaps ? o->nmaps - 1 : 0].name, GS_PRINT_MAP)) {
				struct bpfobj_map *m = &o->maps[o->nmaps];

				if (o->nmaps == BPFOBJ_MAX_MAPS)
					return;
				memset(m, 0, sizeof(*m));
				snprintf(m->name, sizeof(m->name), "%s", GS_PRINT_MAP);
				m->type = BPF_MAP_TYPE_RINGBUF;
				m->max_entries = GS_PRINT_BYTES;
				m->kind = GS_MAP_RING;
				o->nmaps++;
			}
			in->off = (__s16)o->nmaps;
		}
	}
}

int bpfobj_open(const char *path, struct bpfobj *o, char *err, size_t errlen)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *map;
	struct ro_sec ro[MAX_RO];
	size_t nro = 0;
	char msg[512];

	memset(o, 0, sizeof(*o));
	libbpf_set_print(NULL);
	obj = bpf_object__open_file(path, NULL);
	if (!obj) {
		snprintf(err, errlen, "%s is not an eBPF object libbpf can open: %s", path,
			 strerror(errno));
		return -1;
	}
	{
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		Elf *e;
		size_t shstr;

		elf_version(EV_CURRENT);
		if (fd >= 0 && (e = elf_begin(fd, ELF_C_READ, NULL))) {
			if (!elf_getshdrstrndx(e, &shstr))
				nro = read_rodata(e, shstr, o, ro);
			elf_end(e);
		}
		if (fd >= 0)
			close(fd);
	}
	bpf_object__for_each_map(map, obj)
	{
		struct bpfobj_map *m = &o->maps[o->nmaps];

		if (bpf_map__is_internal(map))
			continue; /* (.rodata and the like: read-only data, below) */
		if (o->nmaps == BPFOBJ_MAX_MAPS) {
			snprintf(err, errlen, "%s has more than %d maps", path, BPFOBJ_MAX_MAPS);
			bpf_object__close(obj);
			return -1;
		}
		snprintf(m->name, sizeof(m->name), "%s", bpf_map__name(map));
		m->type = bpf_map__type(map);
		m->key_size = bpf_map__key_size(map);
		m->value_size = bpf_map__value_size(map);
		m->max_entries = bpf_map__max_entries(map);
		m->kind = bpfobj_map_kind(m->type);
		m->shared = m->type == BPFTIME_MAP_GPU_KERNEL_SHARED_ARRAY;
		if (m->kind == GS_MAP_RING)
			m->max_entries = bpfobj_ring_bytes(m->type, m->value_size, m->max_entries);
		o->nmaps++;
	}
	bpf_object__for_each_program(prog, obj)
	{
		struct bpfobj_prog *p;
		size_t n = bpf_program__insn_cnt(prog);

		o->progs = xrealloc(o->progs, (o->nprogs + 1) * sizeof(*o->progs));
		p = &o->progs[o->nprogs++];
		memset(p, 0, sizeof(*p));
		p->name = xstrdup(bpf_program__name(prog));
		p->section = xstrdup(bpf_program__section_name(prog));
		p->n = n;
		p->insns = xmalloc((n + 1) * sizeof(*p->insns));
		memcpy(p->insns, bpf_program__insns(prog), n * sizeof(*p->insns));
		p->host = host_section(p->section);
		p->run = p->host ? host_run(p->section) : BPFOBJ_HOST_NOT_RUN;
		if (resolve(path, p->section, p->name, p->host, p->run, p->insns, n, o, ro, nro,
			    msg, sizeof(msg)) ||
		    (p->run && host_prog_check(p, o, msg, sizeof(msg))))
			p->err = xstrdup(msg);
	}
	bpf_object__close(obj);
	add_print_ring(o);
	return 0;
}

void bpfobj_close(struct bpfobj *o)
{
	for (size_t i = 0; i < o->nprogs; i++) {
		free(o->progs[i].name);
		free(o->progs[i].section);
		free(o->progs[i].insns);
		free(o->progs[i].err);
	}
	free(o->progs);
	free(o->rodata);
	memset(o, 0, sizeof(*o));
}
