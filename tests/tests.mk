# Test doubles, workloads, unit tests, fuzz targets and the test command.
# Included by the top-level Makefile.

FAKES_DIR := $(OUTPUT)/fakes
WL_DIR    := $(OUTPUT)/workloads
# (-fcf-protection: each function starts with endbr64, as in CET builds such as Ubuntu's
# Python; the kernel plane's uprobes go past it, core/elfsym.h. The doubles depend on this
# file: built again when their flags change.)
FAKE_CFLAGS := -O2 -g -Wall -Wextra -Werror -fPIC -fno-ipa-icf -fvisibility=hidden \
	       -fcf-protection=branch -Itests/fakes

FAKES := $(FAKES_DIR)/libcuda.so.1 $(FAKES_DIR)/libcudart.so.13 $(FAKES_DIR)/libnccl.so.2 \
	 $(FAKES_DIR)/libcudart_static.a $(FAKES_DIR)/libnvidia-ml.so.1 $(FAKES_DIR)/libcupti.so.13
WORKLOADS := $(WL_DIR)/wl_driver $(WL_DIR)/wl_runtime $(WL_DIR)/wl_static $(WL_DIR)/wl_nccl \
	     $(WL_DIR)/rpath/bin/wl_driver_rpath $(WL_DIR)/wl_dlopen $(WL_DIR)/wl_gputime \
	     $(WL_DIR)/wl_secure $(WL_DIR)/wl_os $(WL_DIR)/wl_stall $(WL_DIR)/wl_stack \
	     $(WL_DIR)/wl_queue $(WL_DIR)/wl_memory $(WL_DIR)/wl_devcode $(WL_DIR)/wl_probe \
	     $(WL_DIR)/wl_pyfake $(WL_DIR)/python3.13-fake $(WL_DIR)/python3.14-fake \
	     $(WL_DIR)/libwl_engine.so $(WL_DIR)/wl_graphapi $(WL_DIR)/libwl_cuptiuser.so

fakes: $(FAKES) $(WORKLOADS)

$(FAKES_DIR)/libcuda.so.1: tests/fakes/libcuda.c tests/fakes/fake_cuda.h tests/tests.mk
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libcuda.so.1 $< -o $@ -lpthread -ldl
	$(Q)ln -sf libcuda.so.1 $(FAKES_DIR)/libcuda.so

$(FAKES_DIR)/libcudart.so.13: tests/fakes/libcudart.c tests/fakes/fake_cudart.h tests/fakes/fake_cuda.h \
			       tests/tests.mk
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libcudart.so.13 $< -o $@ -lpthread -ldl

$(FAKES_DIR)/libcudart_static.a: tests/fakes/libcudart.c tests/fakes/fake_cudart.h tests/fakes/fake_cuda.h \
				  tests/tests.mk
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) -DFAKE_CUDART_STATIC -c $< -o $(FAKES_DIR)/cudart_static.o
	$(Q)ar rcs $@ $(FAKES_DIR)/cudart_static.o

$(FAKES_DIR)/libcupti.so.13: tests/fakes/libcupti.c include/gpuscope/cupti_abi.h tests/tests.mk
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libcupti.so.13 $< -o $@ -lpthread -ldl

$(FAKES_DIR)/libnvidia-ml.so.1: tests/fakes/libnvidia-ml.c tests/tests.mk
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libnvidia-ml.so.1 $< -o $@ -lpthread

$(FAKES_DIR)/libnccl.so.2: tests/fakes/libnccl.c tests/fakes/fake_nccl.h tests/fakes/fake_cuda.h \
			    tests/tests.mk
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libnccl.so.2 $< -o $@ -lpthread -ldl

WL_CFLAGS := -O2 -g -Wall -Wextra -Werror -Itests/fakes -Itests/workloads
WL_DEPS := tests/workloads/truth.h tests/workloads/wl_file.h tests/workloads/wl_cuda.h \
	   $(wildcard tests/fakes/*.h)

# Driver-API program linked to libcuda.so.1 (found through LD_LIBRARY_PATH at run time).
$(WL_DIR)/wl_driver: tests/workloads/wl_driver.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(FAKES_DIR) -l:libcuda.so.1 -lpthread

# Graphs built with the graph API.
$(WL_DIR)/wl_graphapi: tests/workloads/wl_graphapi.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(FAKES_DIR) -l:libcuda.so.1

# GPU timing: operations of known simulated duration.
$(WL_DIR)/wl_gputime: tests/workloads/wl_gputime.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(FAKES_DIR) -l:libcuda.so.1 -ldl -lpthread

$(WL_DIR)/wl_queue: tests/workloads/wl_queue.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(FAKES_DIR) -l:libcuda.so.1

$(WL_DIR)/wl_stall: tests/workloads/wl_stall.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(FAKES_DIR) -l:libcuda.so.1 -lpthread

# Every frame kept: frame pointers, nothing inlined.
$(WL_DIR)/wl_stack: tests/workloads/wl_stack.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) -O0 -fno-omit-frame-pointer -fno-inline $< -o $@ -L$(FAKES_DIR) \
		-l:libcuda.so.1

$(WL_DIR)/wl_devcode: tests/workloads/wl_devcode.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(FAKES_DIR) -l:libcuda.so.1

$(WL_DIR)/wl_probe: tests/workloads/wl_probe.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(FAKES_DIR) -l:libcuda.so.1

# Memory problems, each site its own stack: frame pointers, nothing inlined.
# Exports what makes it look like a Python interpreter (dlsym from the library).
$(WL_DIR)/wl_pyfake: tests/workloads/wl_pyfake.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) -rdynamic $< -o $@ -L$(FAKES_DIR) -l:libcuda.so.1

# A native thread that launches for a Python thread (py_cuda.py --engine), frame pointers kept.
$(WL_DIR)/libwl_cuptiuser.so: tests/workloads/wl_cuptiuser.c $(FAKES_DIR)/libcupti.so.13
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) -fPIC -shared $< -o $@ -L$(FAKES_DIR) -l:libcupti.so.13

$(WL_DIR)/libwl_engine.so: tests/workloads/wl_engine.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) -fPIC -shared -fno-omit-frame-pointer $< -o $@ -L$(FAKES_DIR) \
		-l:libcuda.so.1 -lpthread

# A 3.13 or 3.14 interpreter's layout (tests/workloads/wl_pynew.c): named like one (the
# kernel probes' plane looks for python3*), its frames' native frames kept.
$(WL_DIR)/python3.%-fake: tests/workloads/wl_pynew.c tests/workloads/pydebug.h $(WL_DEPS) \
			  $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) -DPY_MINOR=$* -fno-omit-frame-pointer -rdynamic $< -o $@ \
		-L$(FAKES_DIR) -l:libcuda.so.1

$(WL_DIR)/wl_memory: tests/workloads/wl_memory.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) -O0 -fno-omit-frame-pointer -fno-inline $< -o $@ -L$(FAKES_DIR) \
		-l:libcuda.so.1

# No CUDA: the OS plane's workload.
$(WL_DIR)/wl_os: tests/workloads/wl_os.c $(WL_DEPS)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -lpthread

# Loads the in-process library itself (the setuid refusal test makes a setuid copy).
$(WL_DIR)/wl_secure: tests/workloads/wl_secure.c $(WL_DEPS)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -ldl

# The same, finding libcuda through its RUNPATH ($ORIGIN/../lib) instead.
$(WL_DIR)/rpath/bin/wl_driver_rpath: tests/workloads/wl_driver.c $(WL_DEPS) $(FAKES_DIR)/libcuda.so.1
	@mkdir -p $(@D) $(WL_DIR)/rpath/lib
	$(Q)cp $(FAKES_DIR)/libcuda.so.1 $(WL_DIR)/rpath/lib/
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(WL_DIR)/rpath/lib -l:libcuda.so.1 -lpthread \
		-Wl,--enable-new-dtags,-rpath,'$$ORIGIN/../lib'

# Runtime-API program, shared runtime (which dlopens libcuda.so.1).
$(WL_DIR)/wl_runtime: tests/workloads/wl_runtime.c $(WL_DEPS) $(FAKES_DIR)/libcudart.so.13
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(FAKES_DIR) -l:libcudart.so.13

# Runtime-API program with the runtime linked in statically, symbols hidden (local).
$(WL_DIR)/wl_static: tests/workloads/wl_runtime.c $(WL_DEPS) $(FAKES_DIR)/libcudart_static.a
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ $(FAKES_DIR)/libcudart_static.a -lpthread -ldl

# Driver loaded with dlopen from a path given at run time.
$(WL_DIR)/wl_dlopen: tests/workloads/wl_dlopen.c $(WL_DEPS)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -ldl

$(WL_DIR)/wl_nccl: tests/workloads/wl_nccl.c $(WL_DEPS) $(FAKES_DIR)/libnccl.so.2
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $< -o $@ -L$(FAKES_DIR) -l:libnccl.so.2

# ---- unit tests (plain and with AddressSanitizer/UBSan) ----------------------------------------
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUTPUT)/unit/%,$(UNIT_SRCS)) \
	     $(patsubst tests/unit/%.c,$(OUTPUT)/unit-asan/%,$(UNIT_SRCS)) \
	     $(OUTPUT)/unit/alias_lib.so $(OUTPUT)/unit/pylayout

$(OUTPUT)/unit/%: tests/unit/%.c tests/unit/unit.h $(call LIB_OBJS,obj)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $< $(call LIB_OBJS,obj) $(LDLIBS) -lcmocka -ldl -o $@

$(OUTPUT)/unit-asan/%: tests/unit/%.c tests/unit/unit.h $(call LIB_OBJS,asan)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(ASAN_FLAGS) $(WARN) $< $(call LIB_OBJS,asan) $(LDLIBS) -lcmocka -ldl -o $@

# The in-process library's parsers as the library builds them (tests/unit/test_target_alloc.c):
# INJECT_CFLAGS (GS_IN_TARGET), plain and with ASan.
TARGET_SRCS := src/core/alloc.c src/core/util.c src/core/hmap.c src/ptx/fatbin.c src/ptx/rewrite.c \
	       src/ptx/rewrite_modvars.c src/ptx/ptxlex.c \
	       src/ptx/bundle.c src/ptx/translate.c src/ptx/translate_helpers.c
$(OUTPUT)/target-asan/%.o: %.c $(wildcard include/gpuscope/*.h src/*/*.h)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(ASAN_FLAGS) $(WARN) $(INJECT_CFLAGS) -c $< -o $@
$(OUTPUT)/unit/test_target_alloc: tests/unit/test_target_alloc.c tests/unit/unit.h \
				  $(patsubst %.c,$(OUTPUT)/pic/%.o,$(TARGET_SRCS))
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -DGS_IN_TARGET $< $(filter %.o,$^) -lzstd -llz4 -lcmocka \
		-o $@
$(OUTPUT)/unit-asan/test_target_alloc: tests/unit/test_target_alloc.c tests/unit/unit.h \
				       $(patsubst %.c,$(OUTPUT)/target-asan/%.o,$(TARGET_SRCS))
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(ASAN_FLAGS) $(WARN) -DGS_IN_TARGET $< $(filter %.o,$^) -lzstd -llz4 \
		-lcmocka -o $@

# The launching threads' inboxes as the library builds them (tests/unit/test_inbox.c).
$(OUTPUT)/unit/test_inbox: tests/unit/test_inbox.c tests/unit/unit.h src/inject/gputime_inbox.c \
			   $(wildcard src/inject/*.h)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(INJECT_CFLAGS) $< src/inject/gputime_inbox.c \
		-lcmocka -lpthread -o $@
$(OUTPUT)/unit-asan/test_inbox: tests/unit/test_inbox.c tests/unit/unit.h src/inject/gputime_inbox.c \
				$(wildcard src/inject/*.h)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(ASAN_FLAGS) $(WARN) $(INJECT_CFLAGS) $< src/inject/gputime_inbox.c \
		-lcmocka -lpthread -o $@

# The in-process plane's unwinder as the library builds it (tests/unit/test_unwind.c); its
# unload case opens $(OUTPUT)/unit/alias_lib.so.
$(OUTPUT)/unit/test_unwind: tests/unit/test_unwind.c tests/unit/unit.h src/inject/unwind.c \
			    src/core/cfi.c $(wildcard src/inject/*.h) $(OUTPUT)/unit/alias_lib.so
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(INJECT_CFLAGS) $< src/inject/unwind.c src/core/cfi.c \
		-lcmocka -ldl -lpthread -o $@
$(OUTPUT)/unit-asan/test_unwind: tests/unit/test_unwind.c tests/unit/unit.h src/inject/unwind.c \
				 src/core/cfi.c $(wildcard src/inject/*.h) $(OUTPUT)/unit/alias_lib.so
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(ASAN_FLAGS) $(WARN) $(INJECT_CFLAGS) $< src/inject/unwind.c src/core/cfi.c \
		-lcmocka -ldl -lpthread -o $@

# The Python layouts against CPython's own headers (libpython3.11-dev: Debian 12's Python;
# not python3.11-config, which is in python3.11-dev).
$(OUTPUT)/unit/pylayout: tests/unit/pylayout.c src/core/pylayout.h
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) -Wall -Werror -Isrc -I/usr/include/python3.11 $< -o $@

$(OUTPUT)/unit/alias_lib.so: tests/unit/alias_lib.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -fPIC -shared $< -o $@

unit: $(UNIT_BINS)

# ---- fuzz targets (libFuzzer, clang) ----------------------------------------------------------
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(OUTPUT)/fuzz/%,$(FUZZ_SRCS))
FUZZ_FLAGS := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
	      -Wno-unknown-warning-option
# Parsers and the model: what untrusted bytes reach (no BPF, no commands, no HTTP server).
FUZZ_LIB_SRCS := $(filter-out src/sink/httpd.c src/sink/prom_gpus.c,\
		   $(wildcard src/core/*.c src/analysis/*.c src/sink/*.c src/ptx/*.c))
FUZZ_LIB_OBJS := $(patsubst %.c,$(OUTPUT)/fuzz-obj/%.o,$(FUZZ_LIB_SRCS))

$(OUTPUT)/fuzz-obj/%.o: %.c $(wildcard include/gpuscope/*.h src/*/*.h)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CLANG) $(CPPFLAGS) $(FUZZ_FLAGS) -Wall -Werror -c $< -o $@

$(OUTPUT)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CLANG) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -Wall -Werror $< $(FUZZ_LIB_OBJS) \
		-lbpf -ldw -lelf -lz -lzstd -llz4 -liberty -lstdc++ -lm -o $@

fuzz: $(FUZZ_BINS)

# ---- style -----------------------------------------------------------------------------------
# Generated files are left as generated.
FORMAT_FILES := $(filter-out demo/kernels_ptx.h,$(shell git ls-files '*.c' '*.h' 2>/dev/null))
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

# ---- the test command -----------------------------------------------------------------------
# Installs what is missing (Debian 12), builds everything, runs every test under pytest.
deps:
	@missing=$$(for p in $(APT_BUILD) $(APT_TEST); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

test: deps
	$(MAKE) all asan unit fuzz
	/usr/bin/python3 -m pytest -ra tests/

# The chaos suite at the issue's sizes (tests/chaos/; make test runs it small): an hour or
# so. Its table goes to bench/results/DATE-chaos/README.md, written even when a scenario
# fails (that scenario's row is then missing, and make chaos fails).
CHAOS_OUT ?= bench/results/$(shell date -u +%Y-%m-%d)-chaos
chaos: deps
	$(MAKE) all asan unit fuzz
	@mkdir -p $(CHAOS_OUT) && rm -f $(CHAOS_OUT)/rows.jsonl
	GS_CHAOS=long GS_CHAOS_TABLE=$(abspath $(CHAOS_OUT))/rows.jsonl \
		/usr/bin/python3 -m pytest -ra tests/chaos/; rc=$$?; \
	/usr/bin/python3 tests/chaos/table.py $(CHAOS_OUT)/rows.jsonl $(CHAOS_OUT)/README.md; \
	exit $$rc
