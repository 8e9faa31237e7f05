# gpuscope build.
#
# Debian 12 packages (the one place they are named besides the README):
#   build:  make gcc clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev libzstd-dev pkg-config
#   tests:  python3 python3-pytest libcmocka-dev clang-format libclang-rt-14-dev
#
# Targets: all (default), static, asan, fakes, demo, test, fuzz, format, clean.

OUTPUT    ?= .output
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= bpftool
ARCH      := x86
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
VERSION   := $(shell git describe --always --dirty 2>/dev/null || echo unknown)

APT_BUILD := make gcc clang llvm bpftool libbpf-dev libelf-dev libdw-dev zlib1g-dev libzstd-dev \
	     liblzma-dev libbz2-dev pkg-config libmicrohttpd-dev libiberty-dev liblz4-dev
APT_TEST  := python3 python3-pytest libpython3.11-dev libcmocka-dev clang-format libclang-rt-14-dev procps valgrind \
	     protobuf-compiler prometheus librsvg2-bin python3-pil

WARN      := -Wall -Wextra -Werror -Wno-missing-field-initializers
CFLAGS    ?= -O2 -g
CPPFLAGS  := -D_GNU_SOURCE -Iinclude -Isrc -I$(OUTPUT)
LDLIBS    := -lbpf -ldw -lelf -lz -lzstd -llz4 -liberty -lmicrohttpd -ldl -lpthread -lm
# (libmicrohttpd.a refers to GnuTLS for HTTPS, which the exporter does not serve: the static
# build links stand-ins that fail, instead of GnuTLS and its own dependencies.)
STATIC_LDLIBS := $(LDLIBS) -llzma -lbz2

BPF_SRCS  := $(wildcard src/bpf/*.bpf.c)
BPF_OBJS  := $(patsubst src/bpf/%.bpf.c,$(OUTPUT)/bpf/%.bpf.o,$(BPF_SRCS))
SKELS     := $(patsubst src/bpf/%.bpf.c,$(OUTPUT)/bpf/%.skel.h,$(BPF_SRCS))

# Everything but main.c, so unit tests and fuzz targets link the same objects.
LIB_SRCS  := $(wildcard src/core/*.c src/analysis/*.c src/sink/*.c src/cmd/*.c src/nvml/*.c \
			   src/ptx/*.c src/source/*.c) \
	     src/bpf/tracer.c src/bpf/tracer_attach.c
MAIN_SRC  := src/main.c

# The in-process library: src/inject/, plus the core pieces it shares.
INJECT_SO   := $(OUTPUT)/libgpuscope-inject.so
INJECT_SRCS := $(wildcard src/inject/*.c) \
	       src/core/shmring.c src/core/names.c src/core/event.c src/core/util.c src/core/hmap.c \
	       src/core/alloc.c src/core/pyname.c src/core/pylayout.c src/core/cfi.c \
	       src/ptx/fatbin.c src/ptx/rewrite.c src/ptx/rewrite_modvars.c src/ptx/ptxlex.c \
	       src/ptx/bundle.c src/ptx/translate.c src/ptx/translate_helpers.c \
	       src/ptx/gpuring.c src/ptx/interp.c src/ptx/interp_helpers.c
INJECT_OBJS := $(patsubst %.c,$(OUTPUT)/pic/%.o,$(INJECT_SRCS))
# GS_IN_TARGET: nothing that can end the program (core/alloc.h); core/xalloc.c is left out, so
# a use of xmalloc and friends fails the link (-z defs).
# (Code packed without alignment padding: between a program's launches its own work and the
# driver's push the wrapper's code out of the nearer caches, and each launch reads it again
# line by line; bench/launch_lines.sh counts the lines. And without calls through the PLT or
# vector constants read from .rodata: each a page more that a launch touches, and on the GPU
# guests a page not in the TLB costs ~45 ns: inject.h, GS_HOT_FN.)
INJECT_CFLAGS := -falign-functions=1 -falign-jumps=1 -falign-loops=1 -falign-labels=1 -fPIC -fvisibility=hidden -ftls-model=initial-exec -fno-strict-aliasing -fno-plt \
		 -fno-tree-vectorize \
		 -DGS_IN_TARGET

# NVML for the static build: a small dynamically linked helper it carries (src/nvml/proxy.c).
NVML_HELPER      := $(OUTPUT)/gpuscope-nvml
NVML_HELPER_OBJS := $(patsubst %.c,$(OUTPUT)/obj/%.o,src/nvml/helper/main.c src/nvml/nvml.c src/nvml/nvml_sample.c src/nvml/totals.c \
		      src/core/util.c src/core/xalloc.c src/core/alloc.c)

OBJS       = $(patsubst %.c,$(OUTPUT)/$(1)/%.o,$(LIB_SRCS) $(MAIN_SRC))
LIB_OBJS   = $(patsubst %.c,$(OUTPUT)/$(1)/%.o,$(LIB_SRCS))

# Quiet by default; V=1 shows the commands.
ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-7s %s\n' '$(1)' '$(2)';
endif

.PHONY: all static asan fakes demo demo-ptx deps-build test deps unit fuzz format format-check chaos clean FORCE
all: $(OUTPUT)/gpuscope $(NVML_HELPER) fakes

# The version, rewritten only when `git describe` changes, so objects rebuild when it does.
$(OUTPUT)/version.h: FORCE
	@mkdir -p $(@D)
	@echo '#define GS_VERSION "$(VERSION)"' > $@.tmp
	@cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@
FORCE:

# Keep generated intermediates (skeletons, objects) between builds.
.SECONDARY:

# ---- BPF -------------------------------------------------------------------------------------
$(OUTPUT)/vmlinux.h:
	@mkdir -p $(@D)
	@test -r $(VMLINUX_BTF) || { echo "gpuscope build: $(VMLINUX_BTF) missing: need a kernel with BTF"; exit 1; }
	$(call msg,BTF,$@)
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@

$(OUTPUT)/bpf/%.bpf.o: src/bpf/%.bpf.c $(wildcard src/bpf/*.bpf.h) $(wildcard include/gpuscope/*.h) $(OUTPUT)/vmlinux.h
	@mkdir -p $(@D)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
		-I$(OUTPUT) -Iinclude -Isrc/bpf -c $< -o $@.tmp
	$(Q)$(BPFTOOL) gen object $@ $@.tmp
	@rm -f $@.tmp

$(OUTPUT)/bpf/%.skel.h: $(OUTPUT)/bpf/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $*_bpf > $@.tmp && mv $@.tmp $@

# ---- the probe tools' eBPF objects (carried inside gpuscope, see src/cmd/probe.c) --------------
PROBE_SRCS := $(wildcard src/probes/*.bpf.c)
PROBE_OBJS := $(patsubst src/probes/%.bpf.c,$(OUTPUT)/probes/%.bpf.o,$(PROBE_SRCS))
$(OUTPUT)/probes/%.bpf.o: src/probes/%.bpf.c src/probes/probe.bpf.h include/gpuscope/probe.h
	@mkdir -p $(@D)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -mcpu=v3 -Wall -Werror -Iinclude -c $< -o $@

# ---- user space ------------------------------------------------------------------------------
# $(1): build flavour (obj, asan, static); $(2): extra CFLAGS
define flavour
$(OUTPUT)/$(1)/%.o: %.c $(SKELS) $(wildcard include/gpuscope/*.h src/*/*.h)
	@mkdir -p $$(@D)
	$$(call msg,CC,$$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(2) -DGS_INJECT_SO='"$(INJECT_SO)"' \
		-DGS_PROBES_DIR='"$(OUTPUT)/probes"' -DGS_NVML_HELPER='"$(NVML_HELPER)"' -c $$< -o $$@
endef
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
$(eval $(call flavour,obj,))
$(eval $(call flavour,asan,$(ASAN_FLAGS)))
$(eval $(call flavour,static,-DGS_STATIC_BUILD))
$(foreach f,obj asan static,$(foreach o,src/main.o src/cmd/exporter.o src/source/host.o,$(OUTPUT)/$(f)/$(o))): $(OUTPUT)/version.h
# gpuscope carries the in-process library inside it (see src/source/inject_lib.c).
$(foreach f,obj asan static,$(OUTPUT)/$(f)/src/source/inject_lib.o): $(INJECT_SO)
$(foreach f,obj asan static,$(OUTPUT)/$(f)/src/cmd/probe.o): $(PROBE_OBJS)
$(OUTPUT)/static/src/nvml/proxy.o: $(NVML_HELPER)

$(OUTPUT)/pic/%.o: %.c $(wildcard include/gpuscope/*.h src/*/*.h)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(INJECT_CFLAGS) -c $< -o $@

$(INJECT_SO): $(INJECT_OBJS) src/inject/hot.ld
	$(call msg,LINK,$@)
	$(Q)$(CC) -shared -Wl,-z,defs -Wl,-z,now -Wl,-soname,libgpuscope-inject.so -Wl,-T,src/inject/hot.ld \
		$(CFLAGS) $(INJECT_OBJS) \
		-Wl,--exclude-libs,ALL -Wl,-Bstatic -lzstd -llz4 -Wl,-Bdynamic -ldl -lpthread -o $@

$(OUTPUT)/gpuscope: $(call OBJS,obj)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

$(NVML_HELPER): $(NVML_HELPER_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ -ldl -lpthread -o $@

$(OUTPUT)/asan/gpuscope: $(call OBJS,asan)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(ASAN_FLAGS) $^ $(LDLIBS) -o $@

$(OUTPUT)/static/gpuscope: $(call OBJS,static) $(OUTPUT)/static/src/static/gnutls_stubs.o
	$(call msg,LINK,$@)
	$(Q)$(CC) -static $(CFLAGS) $^ $(STATIC_LDLIBS) -o $@

static: $(OUTPUT)/static/gpuscope
	@echo "static binary: $<"
asan: $(OUTPUT)/asan/gpuscope

include tests/tests.mk

clean:
	rm -rf $(OUTPUT)

# ---- demo ------------------------------------------------------------------------------------
APT_DEMO := $(APT_BUILD)
DEMO := $(OUTPUT)/demo/vector_add

$(DEMO): demo/vector_add.c demo/kernels_ptx.h
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g $(WARN) -Idemo -Itests/fakes $< -o $@ -ldl

# Regenerate the embedded PTX (needs nvcc; the result is committed).
demo-ptx:
	nvcc -ptx -arch=compute_75 demo/kernels.cu -o $(OUTPUT)/kernels.ptx
	{ echo '/* Generated by make demo-ptx from demo/kernels.cu: do not edit. */'; \
	  echo 'static const char kernels_ptx[] ='; \
	  sed 's/\\/\\\\/g; s/"/\\"/g; s/^/\t"/; s/$$/\\n"/' $(OUTPUT)/kernels.ptx; \
	  echo ';'; } > demo/kernels_ptx.h

deps-build:
	@missing=$$(for p in $(APT_DEMO); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# Trace the demo: on the real driver where there is one, else on the CUDA test double.
demo: deps-build
	$(MAKE) $(OUTPUT)/gpuscope fakes $(DEMO)
	@if [ -e /dev/nvidiactl ] && ldconfig -p | grep -q 'libcuda.so.1 '; then \
		echo "gpuscope demo: a GPU and its driver are here: tracing the demo on them"; \
		$(OUTPUT)/gpuscope run -- $(DEMO); \
	else \
		echo "gpuscope demo: no GPU driver here: tracing the same demo on the CUDA test double (tests/fakes)"; \
		LD_LIBRARY_PATH=$(abspath $(FAKES_DIR)) $(OUTPUT)/gpuscope run -- $(DEMO); \
	fi
