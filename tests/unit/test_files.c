// SPDX-License-Identifier: MIT
/*
 * Finding the traced functions in ELF files and the libraries a command will load, and
 * parsing what /proc and ld.so.cache say. Uses the test doubles built under $GS_OUTPUT
 * (default .output).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "core/elfsym.h"
#include "core/libfind.h"
#include "core/procfs.h"

static const char *out_dir(void)
{
	const char *o = getenv("GS_OUTPUT");

	return o ? o : ".output";
}

static void artifact(char *buf, size_t n, const char *rel)
{
	snprintf(buf, n, "%s/%s", out_dir(), rel);
}

/* The offset must point at the function's code: compare with the loaded library. */
static void offsets_point_at_code(void **state)
{
	struct elf_apis a;
	char path[512], err[256];
	unsigned char file_bytes[16];
	void *h, *fn;
	int fd;

	(void)state;
	artifact(path, sizeof(path), "fakes/libcuda.so.1");
	assert_int_equal(elf_find_apis(path, false, &a, err, sizeof(err)), 0);
	assert_string_equal(a.soname, "libcuda.so.1");
	assert_true(a.nfound >= 80);
	assert_int_not_equal(a.offset[GS_API_CU_LAUNCH_KERNEL], 0);
	assert_int_equal(a.offset[GS_API_NCCL_ALL_REDUCE], 0);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	fn = dlsym(h, "cuLaunchKernel");
	assert_non_null(fn);
	fd = open(path, O_RDONLY);
	assert_int_equal(
		pread(fd, file_bytes, sizeof(file_bytes), (off_t)a.offset[GS_API_CU_LAUNCH_KERNEL]),
		sizeof(file_bytes));
	close(fd);
	/* (Past a leading endbr64 where the instruction after it is emulated: the double is
	 * built with -fcf-protection, and cuLaunchKernel pushes first.) */
	assert_memory_equal(file_bytes, (const char *)fn + elf_uprobe_skip(fn, 16),
			    sizeof(file_bytes));
	assert_int_equal(elf_uprobe_skip(fn, 16), 4);
	/* The same from the file (as the Python exception probes are placed). */
	assert_int_equal(elf_uprobe_site(path, a.offset[GS_API_CU_LAUNCH_KERNEL] - 4),
			 a.offset[GS_API_CU_LAUNCH_KERNEL]);
	assert_int_equal(elf_uprobe_site("/nonexistent", 4096), 4096);
	dlclose(h);
}

/* Where a uprobe goes: past a leading endbr64 only where the kernel emulates what follows. */
static void uprobe_sites(void **state)
{
	static const struct {
		unsigned char code[8];
		unsigned int skip;
	} cases[] = {
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5 }, 4 }, /* push %rbp */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x57, 0x41, 0x56 }, 4 }, /* push %r15 */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x53, 0x48, 0x83, 0xec }, 4 }, /* push %rbx */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x90, 0xc3, 0, 0 }, 4 },	   /* nop */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x66, 0x90, 0xc3, 0 }, 4 },	   /* xchg %ax,%ax */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x0f, 0x1f, 0x40, 0 }, 4 },	   /* nopl */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0xe9, 1, 2, 3 }, 4 },	   /* jmp rel32 */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0xe8, 1, 2, 3 }, 4 },	   /* call rel32 */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 8 }, 0 },	   /* sub $8,%rsp */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x85, 0xff, 0 }, 0 },	   /* test %rdi,%rdi */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x6a, 0x00, 0, 0 }, 0 },	   /* push $0 */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x66, 0x89, 0x07, 0 }, 0 },	   /* mov %ax,(%rdi) */
		{ { 0x55, 0x48, 0x89, 0xe5, 0x41, 0x54, 0, 0 }, 0 },	   /* push %rbp: at 0 */
		{ { 0xf3, 0x0f, 0x1e, 0xfb, 0x55, 0, 0, 0 }, 0 },	   /* endbr32 */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(elf_uprobe_skip(cases[i].code, 8), cases[i].skip);
	assert_int_equal(elf_uprobe_skip(cases[0].code, 7), 0); /* (too short to tell) */
}

static void static_runtime_needs_symtab(void **state)
{
	struct elf_apis a;
	char path[512], err[256];

	(void)state;
	artifact(path, sizeof(path), "workloads/wl_static");
	assert_int_equal(elf_find_apis(path, false, &a, err, sizeof(err)), 0);
	assert_int_equal(a.nfound, 0);
	assert_int_equal(elf_find_apis(path, true, &a, err, sizeof(err)), 0);
	assert_int_equal(a.nfound, 2);
	assert_int_not_equal(a.offset[GS_API_CUDA_REGISTER_FUNCTION], 0);
	assert_int_not_equal(a.offset[GS_API_CUDA_GET_KERNEL], 0);
}

static void aliases_probed_once(void **state)
{
	struct elf_apis a;
	char path[512], err[256];

	(void)state;
	artifact(path, sizeof(path), "unit/alias_lib.so");
	assert_int_equal(elf_find_apis(path, false, &a, err, sizeof(err)), 0);
	assert_int_equal(a.nfound, 1);
	assert_int_equal(a.naliases, 1);
	assert_int_not_equal(a.offset[GS_API_CU_MEMCPY_HTOD], 0);
	assert_int_equal(a.offset[GS_API_CU_MEMCPY_HTOD_PTDS], 0);
}

static void not_elf_is_an_error(void **state)
{
	struct elf_apis a;
	char err[256];
	static const char junk[] = "\x7f"
				   "ELF this is not really an ELF file at all";

	(void)state;
	assert_int_equal(elf_find_apis_mem(junk, sizeof(junk), true, &a, err, sizeof(err)), -1);
	assert_int_equal(elf_find_apis("/etc/passwd", false, &a, err, sizeof(err)), -1);
	assert_string_equal(err, "not an ELF file");
	assert_int_equal(elf_find_apis("/nonexistent", false, &a, err, sizeof(err)), -1);
}

/* A cache in glibc's format: optional old table, new header, entries, strings. */
static size_t make_cache(unsigned char *buf, bool old_prefix, const char *key, const char *val)
{
	size_t off = 0, h, strings;
	__u32 nlibs = 2, k, v;

	memset(buf, 0, 1024);
	if (old_prefix) {
		__u32 nold = 1;

		memcpy(buf, "ld.so-1.7.0", 11);
		memcpy(buf + 12, &nold, 4);
		off = (16 + 12 + 7) & ~7UL;
	}
	h = off;
	memcpy(buf + h, "glibc-ld.so.cache1.1", 20);
	memcpy(buf + h + 20, &nlibs, 4);
	strings = 48 + 2 * 24;
	strcpy((char *)buf + h + strings, "libother.so.1");
	strcpy((char *)buf + h + strings + 20, key);
	strcpy((char *)buf + h + strings + 60, val);
	k = (__u32)strings;
	memcpy(buf + h + 48 + 4, &k, 4); /* entry 0: libother -> libother */
	memcpy(buf + h + 48 + 8, &k, 4);
	k = (__u32)(strings + 20);
	v = (__u32)(strings + 60);
	memcpy(buf + h + 72 + 4, &k, 4);
	memcpy(buf + h + 72 + 8, &v, 4);
	return h + strings + 60 + strlen(val) + 1;
}

static void collect(const char *path, void *ctx)
{
	strcpy(ctx, path);
}

static void ldcache_formats(void **state)
{
	unsigned char buf[1024];
	char found[256];
	size_t n;

	(void)state;
	for (int old = 0; old < 2; old++) {
		found[0] = 0;
		n = make_cache(buf, old, "libcuda.so.1", "/usr/lib/nvidia/libcuda.so.1");
		assert_int_equal(ldcache_lookup(buf, n, "libcuda.so.1", collect, found), 1);
		assert_string_equal(found, "/usr/lib/nvidia/libcuda.so.1");
		assert_int_equal(ldcache_lookup(buf, n, "libnccl.so.2", collect, found), 0);
		/* Cut anywhere: never a read past the end. */
		for (size_t cut = 0; cut < n; cut++)
			assert_true(ldcache_lookup(buf, cut, "libcuda.so.1", NULL, NULL) <= 1);
	}
	memcpy(buf, "nonsense", 8);
	assert_int_equal(ldcache_lookup(buf, 100, "libcuda.so.1", NULL, NULL), -1);
}

static void finds_libraries_like_the_loader(void **state)
{
	char dir[] = "/tmp/gs-unit-libXXXXXX", path[1200], exe[512];
	struct lib_list l = {};
	int cuda = 0, nccl = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/libcuda.so.1", dir);
	close(creat(path, 0644));
	snprintf(path, sizeof(path), "%s/libnccl.so.2", dir);
	close(creat(path, 0644));
	setenv("LD_LIBRARY_PATH", dir, 1);
	assert_int_equal(resolve_command("sh", exe, sizeof(exe)), 0);
	libfind_for_command(exe, &l);
	for (size_t i = 0; i < l.n; i++) {
		if (!strncmp(l.v[i].path, dir, strlen(dir))) {
			cuda += l.v[i].kind == GS_LIB_CUDA;
			nccl += l.v[i].kind == GS_LIB_NCCL;
		}
	}
	assert_int_equal(cuda, 1);
	assert_int_equal(nccl, 1);
	lib_list_free(&l);
	unsetenv("LD_LIBRARY_PATH");
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
	strcpy(dir, "/tmp/gs-unit-libXXXXXX");

	/* A virtualenv: bin/python3 links to the system interpreter; the wheels' libraries are
	 * under the venv's own site-packages. */
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path),
		 "mkdir -p %s/bin %s/lib/python3.12/site-packages/nvidia/cu13/lib && "
		 "ln -s /bin/sh %s/bin/python3 && cp %s/fakes/libcudart.so.13 "
		 "%s/lib/python3.12/site-packages/nvidia/cu13/lib/",
		 dir, dir, dir, out_dir(), dir);
	assert_int_equal(system(path), 0);
	snprintf(exe, sizeof(exe), "%s/bin/python3", dir);
	libfind_for_command(exe, &l);
	cuda = 0;
	for (size_t i = 0; i < l.n; i++)
		cuda += strstr(l.v[i].path, "site-packages/nvidia/cu13/lib/libcudart.so.13") &&
			l.v[i].kind == GS_LIB_CUDART;
	assert_int_equal(cuda, 1);
	lib_list_free(&l);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);

	/* RUNPATH $ORIGIN/../lib of the executable. */
	artifact(exe, sizeof(exe), "workloads/rpath/bin/wl_driver_rpath");
	libfind_for_command(exe, &l);
	cuda = 0;
	for (size_t i = 0; i < l.n; i++)
		cuda += strstr(l.v[i].path, "rpath/bin/../lib/libcuda.so.1") != NULL;
	assert_int_equal(cuda, 1);
	lib_list_free(&l);
}

static void commands_and_kinds(void **state)
{
	char out[512];

	(void)state;
	assert_int_equal(resolve_command("definitely-not-a-command-xyz", out, sizeof(out)),
			 -ENOENT);
	assert_int_equal(resolve_command("/etc/passwd", out, sizeof(out)), -EACCES);
	assert_int_equal(resolve_command("", out, sizeof(out)), -ENOENT);
	assert_int_equal(lib_kind_of("/x/libcudart.so.13"), GS_LIB_CUDART);
	assert_int_equal(lib_kind_of("libcudart-8f3e2a.so.11.0"), GS_LIB_CUDART);
	assert_int_equal(lib_kind_of("/usr/lib/libcuda.so.580.95.05"), GS_LIB_CUDA);
	assert_int_equal(lib_kind_of("/a/libnccl.so.2.27.3"), GS_LIB_NCCL);
	assert_int_equal(lib_kind_of("/a/libcudnn.so.9"), GS_LIB_NONE);
}

static void maps_lines(void **state)
{
	struct map_entry e;

	(void)state;
	assert_int_equal(maps_parse_line("7f0a00000000-7f0a00021000 r-xp 00002000 fd:01 1234567 "
					 "   /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05\n",
					 &e),
			 0);
	assert_true(e.exec);
	assert_int_equal(e.start, 0x7f0a00000000ULL);
	assert_int_equal(e.offset, 0x2000);
	assert_int_equal(e.inode, 1234567);
	assert_int_equal(e.dev_major, 0xfd);
	assert_string_equal(e.path, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05");
	assert_int_equal(maps_parse_line("00400000-00401000 r--p 00000000 00:00 0 \n", &e), 0);
	assert_false(e.exec);
	assert_string_equal(e.path, "");
	assert_int_equal(
		maps_parse_line("55d0-55e0 r-xp 0 08:01 42 /opt/my dir/a b.so (deleted)\n", &e), 0);
	assert_string_equal(e.path, "/opt/my dir/a b.so (deleted)");
	assert_int_equal(maps_parse_line("garbage\n", &e), -EINVAL);
	assert_int_equal(maps_parse_line("2000-1000 r-xp 0 08:01 42 /x\n", &e), -EINVAL);
	assert_int_equal(maps_parse_line("1000-2000 r-xpq 0 08:01 42 /x\n", &e), -EINVAL);
}

static void own_process(void **state)
{
	struct map_entry *v;
	char comm[32];
	size_t n;
	int exes = 0;

	(void)state;
	assert_int_equal(proc_exec_files(getpid(), &v, &n), 0);
	for (size_t i = 0; i < n; i++)
		exes += strstr(v[i].path, "test_files") != NULL;
	assert_int_equal(exes, 1);
	free(v);
	assert_int_equal(proc_comm(getpid(), comm, sizeof(comm)), 0);
	assert_string_equal(comm, "test_files");
	assert_int_equal(proc_ppid(getpid()), getppid());
	assert_false(proc_exists(0x3ffffff0));
}

static void read_strings_of_a_process(void **state)
{
	char *pages = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char buf[64];

	(void)state;
	assert_true(pages != MAP_FAILED);
	assert_int_equal(mprotect(pages + 4096, 4096, PROT_NONE), 0);
	/* A string that ends on the last byte before an unreadable page. */
	strcpy(pages + 4096 - 6, "hello");
	assert_int_equal(
		proc_read_str(getpid(), (__u64)(uintptr_t)(pages + 4096 - 6), buf, sizeof(buf)), 5);
	assert_string_equal(buf, "hello");
	/* No terminator before the unreadable page: what was readable, cut. */
	memcpy(pages + 4096 - 4, "abcd", 4);
	assert_int_equal(
		proc_read_str(getpid(), (__u64)(uintptr_t)(pages + 4096 - 4), buf, sizeof(buf)), 4);
	assert_string_equal(buf, "abcd");
	/* Longer than the buffer: cut to n - 1. */
	memset(pages, 'x', 100);
	pages[100] = 0;
	assert_int_equal(proc_read_str(getpid(), (__u64)(uintptr_t)pages, buf, 10), 9);
	assert_string_equal(buf, "xxxxxxxxx");
	assert_true(proc_read_str(getpid(), (__u64)(uintptr_t)(pages + 4096), buf, sizeof(buf)) <
		    0);
	munmap(pages, 8192);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(read_strings_of_a_process),
	cmocka_unit_test(offsets_point_at_code),
	cmocka_unit_test(uprobe_sites),
	cmocka_unit_test(static_runtime_needs_symtab),
	cmocka_unit_test(aliases_probed_once),
	cmocka_unit_test(not_elf_is_an_error),
	cmocka_unit_test(ldcache_formats),
	cmocka_unit_test(finds_libraries_like_the_loader),
	cmocka_unit_test(commands_and_kinds),
	cmocka_unit_test(maps_lines),
	cmocka_unit_test(own_process),
};
UNIT_MAIN(tests)
