// SPDX-License-Identifier: MIT
/*
 * GPU ring buffers (src/ptx/gpuring.c, and the reference interpreter's bpf_ringbuf_output):
 * records of every size, written by a program and drained by the host, in order and intact
 * however they wrap around the ring's end; a full ring drops (counted) and takes records
 * again once drained; a ring holding what no writer writes is refused, not read past.
 */
#include <linux/bpf.h>
#include <stdlib.h>

#include "unit.h"
#include "ptx/gpuring.h"
#include "ptx/translate.h"

#define RING 4096

/* out(map 0, the stack from r10 - 256, size in ctx[0]), its result into ctx[1]. */
static const struct bpf_insn prog[] = {
	{ .code = BPF_LDX | BPF_MEM | BPF_DW, .dst_reg = 3, .src_reg = 1, .off = 0 },
	{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 6, .src_reg = 1 },
	{ .code = BPF_LD | BPF_IMM | BPF_DW,
	  .dst_reg = 1,
	  .src_reg = BPF_PSEUDO_MAP_IDX,
	  .imm = 0 },
	{ .imm = 0 },
	{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 2, .src_reg = 10 },
	{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 2, .imm = -256 },
	{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 4, .imm = 0 },
	{ .code = BPF_JMP | BPF_CALL, .imm = GS_BPF_RING_OUTPUT },
	{ .code = BPF_STX | BPF_MEM | BPF_DW, .dst_reg = 6, .src_reg = 0, .off = 8 },
	{ .code = BPF_EXIT | BPF_JMP },
};

struct seen {
	unsigned int n, bad;
	unsigned int sizes[4096];
};

static void got(void *arg, unsigned long long gpu_ns, const unsigned char *data, unsigned int len)
{
	struct seen *s = arg;

	if (gpu_ns != 1000 + s->n || len != s->sizes[s->n % 4096])
		s->bad++;
	/* (the stack is zero: the interpreter's program writes none of it) */
	for (unsigned int i = 0; i < len; i++)
		if (data[i])
			s->bad++;
	s->n++;
}

static struct bpf_map_mem ring_map(void)
{
	struct bpf_map_mem m = { .kind = GS_MAP_RING, .extra = RING };

	m.data = calloc(1, GS_RING_CTL);
	m.ring = calloc(1, RING);
	m.tail = calloc(1, sizeof(*m.tail));
	return m;
}

static void free_map(struct bpf_map_mem *m)
{
	free(m->data);
	free(m->ring);
	free(m->tail);
}

static long long out(struct bpf_map_mem *m, unsigned long long size, unsigned long long ts)
{
	unsigned long long ctx[2] = { size, 0 }, r0;
	struct bpf_gpu_env env = { .globaltimer = ts };
	char err[256];

	assert_int_equal(bpf_interp(prog, sizeof(prog) / sizeof(prog[0]), ctx, sizeof(ctx), &env, m,
				    1, 1000, &r0, err, sizeof(err)),
			 0);
	assert_int_equal(ctx[1], r0);
	return (long long)r0;
}

/* Sizes 0..256 one after another, drained every few records: each record arrives whole and
 * in order, including the ones that wrap. */
static void every_size_wraps(void **state)
{
	struct bpf_map_mem m = ring_map();
	struct seen s = { 0 };
	unsigned int written = 0, wrapped = 0;

	(void)state;
	for (unsigned int round = 0; round < 3; round++)
		for (unsigned int size = 0; size <= GS_RING_REC_MAX; size++) {
			unsigned long long head;

			memcpy(&head, m.data, 8);
			s.sizes[written % 4096] = size;
			assert_int_equal(out(&m, size, 1000 + written), 0);
			written++;
			if ((head & (RING - 1)) + GS_RING_HDR + size > RING)
				wrapped++;
			if (written % 5 == 0)
				assert_true(gpuring_drain(m.ring, RING, m.tail, 1000, got, &s) >=
					    0);
		}
	assert_true(gpuring_drain(m.ring, RING, m.tail, 1000, got, &s) >= 0);
	assert_int_equal(s.n, written);
	assert_int_equal(s.bad, 0);
	assert_true(wrapped > 3);
	/* Everything read was cleared. */
	for (unsigned int i = 0; i < RING; i++)
		assert_int_equal(m.ring[i], 0);
	free_map(&m);
}

/* Without draining, the ring takes what fits and counts the rest; drained, it takes more. */
static void full_ring_drops(void **state)
{
	struct bpf_map_mem m = ring_map();
	struct seen s = { 0 };
	unsigned long long ctl[2];
	unsigned int ok = 0, again = 0;

	(void)state;
	for (unsigned int i = 0; i < 300; i++) {
		long long r;

		s.sizes[ok] = 16;
		r = out(&m, 16, 1000 + ok);
		ok += r == 0;
		again += r == -11;
	}
	assert_int_equal(ok, RING / 32);
	assert_int_equal(again, 300 - ok);
	memcpy(ctl, m.data, sizeof(ctl));
	assert_int_equal(ctl[1], again);
	assert_int_equal(gpuring_drain(m.ring, RING, m.tail, 1000, got, &s), ok);
	s.sizes[ok] = 16;
	assert_int_equal(out(&m, 16, 1000 + ok), 0);
	assert_int_equal(gpuring_drain(m.ring, RING, m.tail, 1000, got, &s), 1);
	assert_int_equal(s.bad, 0);
	/* Past the largest record: -E2BIG, nothing written, nothing dropped. */
	assert_int_equal(out(&m, GS_RING_REC_MAX + 1, 1), -7);
	memcpy(ctl, m.data, sizeof(ctl));
	assert_int_equal(ctl[1], again);
	free_map(&m);
}

/* What no writer writes (a length past the largest record) stops the reading there. */
static void corrupt_ring_refused(void **state)
{
	unsigned char *ring = calloc(1, RING);
	unsigned long long tail = 0, h = 1000 | 1ULL << 32;
	struct seen s = { 0 };

	(void)state;
	memcpy(ring, &h, 8);
	assert_int_equal(gpuring_drain(ring, RING, &tail, 10, got, &s), -1);
	assert_int_equal(tail, 0);
	assert_int_equal(s.n, 0);
	/* Not a power of two, or too small: refused. */
	assert_int_equal(gpuring_drain(ring, 3000, &tail, 10, got, &s), -1);
	assert_int_equal(gpuring_drain(ring, 2048, &tail, 10, got, &s), -1);
	free(ring);
}

/* A map that is not a ring: -EINVAL. */
static void not_a_ring(void **state)
{
	unsigned char data[64] = { 0 };
	struct bpf_map_mem m = {
		.data = data, .kind = GS_MAP_ARRAY, .value_size = 8, .max_entries = 8
	};

	(void)state;
	assert_int_equal(out(&m, 8, 1), -22);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_size_wraps),
		cmocka_unit_test(full_ring_drops),
		cmocka_unit_test(corrupt_ring_refused),
		cmocka_unit_test(not_a_ring),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
