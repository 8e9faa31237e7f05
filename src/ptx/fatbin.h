/* SPDX-License-Identifier: MIT */
/*
 * Fatbins: the containers nvcc puts device code in (the .nv_fatbin section, the argument of
 * __cudaRegisterFatBinary through its wrapper, what cuModuleLoadFatBinary, cuModuleLoadData
 * and cuLibraryLoadData may be given). Parsed natively: containers back to back, each a
 * 16-byte header and entries; each entry a header (64 bytes, 80 for PTX since CUDA 12.x)
 * and a payload, which may be compressed: zstd (flag 0x8000; CUDA 13 compresses PTX so by
 * default) or the older LZ4-block style (flag 0x2000; --compress-mode=speed).
 *
 * The bytes are untrusted (another process's memory, a file): every offset and size is
 * checked, and decompression is bounded.
 */
#ifndef GS_PTX_FATBIN_H
#define GS_PTX_FATBIN_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#define FATBIN_WRAPPER_MAGIC   0x466243b1u
#define FATBIN_CONTAINER_MAGIC 0xba55ed50u
#define FATBIN_MAX_PAYLOAD     (256u << 20) /* decompressed, per entry */

enum fatbin_kind {
	FATBIN_PTX = 1,
	FATBIN_ELF = 2, /* a cubin: SASS for one architecture */
};

enum fatbin_compression {
	FATBIN_PLAIN = 0,
	FATBIN_LZ = 1,	 /* flag 0x2000 */
	FATBIN_ZSTD = 2, /* flag 0x8000 */
};

struct fatbin_entry {
	unsigned int kind;	   /* enum fatbin_kind, or what the header said if neither */
	unsigned int arch;	   /* SM: 80, 90, 100, ... */
	unsigned int major, minor; /* PTX ISA version (PTX), ABI version (ELF) */
	__u64 flags;
	unsigned int compression;  /* enum fatbin_compression */
	size_t offset;		   /* of the entry's header, from the start of the buffer */
	const unsigned char *data; /* the payload as stored */
	size_t stored;		   /* its bytes (compressed, or padded) */
	size_t size;		   /* decompressed (compression), else stored */
	unsigned int container;	   /* which container it is in, from 0 */
};

struct fatbin {
	struct fatbin_entry *e;
	size_t n;
	size_t bytes; /* of the buffer the containers took */
};

/*
 * Parse the containers at buf, up to len bytes (the containers end where the next magic is
 * missing, or at len). 0, or -1 with err set: no container at all, or one whose header or
 * entries do not fit (an entry table cut short fails; entries already read are kept only
 * on success).
 */
int fatbin_parse(const void *buf, size_t len, struct fatbin *out, char *err, size_t errlen);
void fatbin_free(struct fatbin *fb);
/*
 * An entry's payload, decompressed, NUL-terminated (the terminator not counted in *n):
 * malloc'ed into *out. 0, or -1 with err set (corrupt or oversized compressed data).
 */
int fatbin_payload(const struct fatbin_entry *e, unsigned char **out, size_t *n, char *err,
		   size_t errlen);
/* The PTX entry to compile for a device of compute capability `sm` (e.g. 90): the one of
 * the highest architecture not above it (PTX is compiled forward). NULL if none. */
const struct fatbin_entry *fatbin_pick_ptx(const struct fatbin *fb, unsigned int sm);
/* Whether the fatbin holds a cubin for exactly `sm` (then the driver runs it as it is). */
bool fatbin_has_elf(const struct fatbin *fb, unsigned int sm);
/*
 * __cudaRegisterFatBinary's argument: its wrapper ({magic, version, data, filename}). The
 * containers' address, or NULL if it is not a wrapper. (The wrapper gives no length: the
 * caller parses up to what it knows is mapped.)
 */
const void *fatbin_wrapper_data(const void *wrapper, unsigned int *version);
/* Decode an LZ4 block (liblz4; exposed for tests): bytes written, or -1 if corrupt or if
 * the output would exceed cap. */
long fatbin_lz_decode(const unsigned char *in, size_t n, unsigned char *out, size_t cap);
const char *fatbin_kind_name(unsigned int kind);
const char *fatbin_compression_name(unsigned int c);

/*
 * Kernel names. PTX text: each name after `.entry`, cut in place (the text is the
 * caller's, NUL-terminated). A cubin (ELF64, untrusted, bounds-checked): its function
 * symbols marked as kernel entries. cb is called once per name.
 */
void ptx_kernel_names(char *ptx, void (*cb)(void *ctx, const char *name), void *ctx);
void cubin_kernel_names(const unsigned char *b, size_t n, void (*cb)(void *ctx, const char *name),
			void *ctx);
/* The SM a cubin is for (from its ELF flags; 0 if not a cubin), and the architecture of
 * PTX text's `.target sm_NN` (0 if none). */
unsigned int cubin_arch(const unsigned char *b, size_t n);
unsigned int ptx_target_arch(const char *ptx);
/* PTX's .target made sm (older than it, so no longer: its other text does not move), in
 * place; false if it has none or the name would not fit. The driver's JIT then refuses the
 * PTX if it uses anything the device has not. */
bool ptx_retarget(char *ptx, unsigned int sm);

#endif
