# megajit build. Outputs live under build/. `make help` lists the targets.
CUDA_HOME ?= /usr/local/cuda
PREFIX ?= /usr/local
CC ?= gcc
BUILD := build

DEB_PACKAGES := libxxhash-dev libsqlite3-dev libcjson-dev libcmocka-dev
# -Itemplates: template headers include each other relative to the template root.
CPPFLAGS := -I. -Itemplates -I$(CUDA_HOME)/include -D_GNU_SOURCE
CWARN := -std=c11 -Wall -Wextra -Werror -Wno-missing-field-initializers
# Only what include/megajit.h marks MJ_API leaves libmegajit.so (.ci/check-exports).
VISIBILITY := -fvisibility=hidden
CFLAGS ?= -O2 -g
LIBS := -lsqlite3 -lxxhash -lcjson -ldl -lpthread -lm
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

LIB_SRC := $(wildcard apis/*.c runtime/*.c runtime/families/*.c cache/*.c heuristics/*.c)
GEN_SRC := $(BUILD)/gen/templates_embedded.c
TEMPLATES := $(shell find templates -type f \( -name '*.cuh' -o -name '*.h' \) | LC_ALL=C sort)
CLI_SRC := $(wildcard tools/megajit/*.c)
# Benchmarks and the launch_ranks client: linked into the CLI and the GPU tests, never the library.
BENCH_SRC := $(wildcard tools/bench/*.c)
REF_SRC := $(wildcard tests/reference/*.c)
# The parts of the benchmarks and the CLI that need no device: the CPU tests link them too.
HOST_TOOL_SRC := tools/bench/rng.c tools/bench/moe_shapes.c tools/bench/moe_routing.c \
                 tools/bench/moe_floor.c tools/bench/moe_weights.c tools/bench/moe_check.c \
                 tools/bench/routing_dump.c tools/bench/moe_phases.c tools/megajit/util.c tools/megajit/bench_moe_args.c
TEST_SRC := $(wildcard tests/test_*.c)
TEST_CXX_SRC := $(wildcard tests/test_*.cpp)
# GPU test programs; tests/gpu/test_X.c also links its parts, tests/gpu/X/*.c, and
# every program the shared bookkeeping of tests/gpu/check.c.
GPU_SRC := $(wildcard tests/gpu/test_*.c) tests/gpu/launch_ranks.c
GPU_CHECK_OBJ := $(BUILD)/obj/tests/gpu/check.o
gpu_parts = $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/gpu/$(patsubst test_%,%,$(1))/*.c))

LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC)) $(BUILD)/obj/gen/templates_embedded.o
SAN_OBJ := $(patsubst %.c,$(BUILD)/san/%.o,$(LIB_SRC) $(REF_SRC) $(HOST_TOOL_SRC)) $(BUILD)/san/gen/templates_embedded.o
CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC))
BENCH_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(BENCH_SRC))
REF_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(REF_SRC))
TEST_C_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_CXX_BIN := $(patsubst tests/%.cpp,$(BUILD)/tests/%,$(TEST_CXX_SRC))
TEST_BIN := $(TEST_C_BIN) $(TEST_CXX_BIN)
GPU_BIN := $(patsubst tests/gpu/%.c,$(BUILD)/tests/gpu/%,$(GPU_SRC))

RPATH_BIN := -Wl,-rpath,'$$ORIGIN/../lib'
SONAME := libmegajit.so.0

# Every target a person runs carries a "## what it does" comment: `make help` lists them.
.PHONY: all deps lib cli test test-cpu test-python test-gpu demo install clean help format format-check \
        check-header check-exports check-install
all: lib cli $(BUILD)/lib/pkgconfig/megajit.pc ## build the library, the CLI and the pkg-config file

help: ## this list
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-z-]+:.*## / {printf "make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# $(call apt_install,PACKAGES,WHY): installs the Debian packages among PACKAGES
# that are missing (as root), or says which to install.
apt_install = missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing) >/dev/null || exit 1; \
	  else echo "$(2) needs the Debian packages:$$missing -- run as root: apt-get install$$missing" >&2; exit 1; fi; fi

deps: ## install the missing Debian development packages (as root) and check for CUDA
	@$(call apt_install,$(DEB_PACKAGES),megajit)
	@test -f $(CUDA_HOME)/include/nvrtc.h || { echo "CUDA toolkit not found at $(CUDA_HOME) (set CUDA_HOME)" >&2; exit 1; }

# build/lib keeps a copy of libcjson.so.1 for the build tree's binaries only:
# the GPU machine has no cJSON. make install never copies it.
lib: $(BUILD)/lib/libmegajit.a $(BUILD)/lib/libmegajit.so $(BUILD)/lib/libcjson.so.1 ## build libmegajit.{a,so}
cli: $(BUILD)/bin/megajit ## build the megajit CLI

$(BUILD)/bin/embed_templates: tools/embed_templates.c
	@mkdir -p $(@D)
	$(CC) $(CWARN) $(CFLAGS) $(LDFLAGS) -o $@ $<

$(GEN_SRC): $(BUILD)/bin/embed_templates $(TEMPLATES)
	@mkdir -p $(@D)
	$(BUILD)/bin/embed_templates templates $@ $(TEMPLATES)

# Objects depend on the Makefile too: a changed flag must rebuild them.
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c Makefile
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CWARN) $(CFLAGS) $(VISIBILITY) -fPIC -c -o $@ $<
$(BUILD)/san/gen/%.o: $(BUILD)/gen/%.c Makefile
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CWARN) $(CFLAGS) $(SAN) -fPIC -c -o $@ $<
$(BUILD)/obj/%.o: %.c Makefile
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CWARN) $(CFLAGS) $(VISIBILITY) -fPIC -MMD -MP -c -o $@ $<
$(BUILD)/san/%.o: %.c Makefile
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CWARN) $(CFLAGS) $(SAN) -fPIC -MMD -MP -c -o $@ $<

$(BUILD)/lib/libmegajit.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/lib/libmegajit.so: $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,-rpath,'$$ORIGIN' -o $@.0 $^ $(LIBS)
	ln -sf libmegajit.so.0 $@
# The GPU machine has no cJSON: ship the runtime library beside ours.
$(BUILD)/lib/libcjson.so.1:
	@mkdir -p $(@D)
	cp -L $$(gcc -print-file-name=libcjson.so.1) $@
$(BUILD)/san/libmegajit.a: $(SAN_OBJ)
	rm -f $@ && ar rcs $@ $^

# The MegaMoE benchmark checks its outputs against the fp64 reference (tests/reference).
$(BUILD)/bin/megajit: $(CLI_OBJ) $(BENCH_OBJ) $(REF_OBJ) $(BUILD)/lib/libmegajit.a $(BUILD)/lib/libcjson.so.1
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BENCH_OBJ) $(REF_OBJ) $(BUILD)/lib/libmegajit.a $(RPATH_BIN) -L$(BUILD)/lib $(LIBS)

# pkg-config file for a prefix: $(call pc_file,PREFIX,OUT)
pc_file = printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: megajit\nDescription: JIT MoE kernel runtime\nVersion: 0.1.0\nLibs: -L$${libdir} -lmegajit\nLibs.private: $(LIBS)\nCflags: -I$${includedir}\n' '$(1)' > $(2)

# The in-tree file points at build/ (include/megajit.h is copied into build/include).
$(BUILD)/lib/pkgconfig/megajit.pc: Makefile include/megajit.h
	@mkdir -p $(@D) $(BUILD)/include
	cp include/megajit.h $(BUILD)/include/
	$(call pc_file,$(abspath $(BUILD)),$@)

$(TEST_C_BIN): $(BUILD)/tests/%: tests/%.c $(BUILD)/san/libmegajit.a $(BUILD)/bin/megajit
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CWARN) $(CFLAGS) $(SAN) $(LDFLAGS) -o $@ $< $(BUILD)/san/libmegajit.a $(LIBS) -lcmocka

# C++ tests compile kernel headers on the host (their math is plain C++, in the
# kernels' dialect: C++20, whose constexpr layout functions declare a local
# before setting it); CFLAGS reach them too so that `make CFLAGS=-fsanitize=...`
# builds every object the same way.
$(TEST_CXX_BIN): $(BUILD)/tests/%: tests/%.cpp $(BUILD)/san/libmegajit.a
	@mkdir -p $(@D)
	g++ -std=c++20 -I. -Itemplates -Wall -Wextra -Werror $(CFLAGS) $(CXXFLAGS) $(SAN) -ffp-contract=off $(LDFLAGS) -o $@ $< $(BUILD)/san/libmegajit.a $(LIBS) -lcmocka

# Static pattern: the generic tests rule must never build GPU tests (no -lcuda there).
.SECONDEXPANSION:
$(GPU_BIN): $(BUILD)/tests/gpu/%: tests/gpu/%.c $$(call gpu_parts,$$*) $(GPU_CHECK_OBJ) $(BUILD)/lib/libmegajit.a $(REF_OBJ) $(BENCH_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CWARN) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call gpu_parts,$*) $(GPU_CHECK_OBJ) $(REF_OBJ) $(BENCH_OBJ) $(BUILD)/lib/libmegajit.a $(RPATH_BIN) -Wl,-rpath,'$$ORIGIN/../../lib' -L$(BUILD)/lib $(LIBS) -L$(CUDA_HOME)/lib64/stubs -lcuda

test-cpu: $(TEST_BIN) ## run every CPU test binary (ASan+UBSan); make test first installs deps
	@set -e; pass=0; fail=0; for t in $(TEST_BIN); do \
	  echo "== $$t"; if MEGAJIT_BUILD=$(BUILD) $$t; then pass=$$((pass+1)); else fail=$$((fail+1)); fi; done; \
	echo "binaries: $$pass passed, $$fail failed"; test $$fail = 0

# The Python package as a user installs it: `pip install ./python` into a
# private venv (pytest installed there when missing), then python/tests run
# against the installed copy, from outside the source tree.
PYTHON ?= python3
PY_VENV := $(BUILD)/python-venv
test-python: all ## pip install ./python into build/python-venv and run its CPU tests (pytest)
	@test -x $(PY_VENV)/bin/python || $(PYTHON) -m venv $(PY_VENV) || { \
	  echo "test-python: $(PYTHON) -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
	@$(PY_VENV)/bin/python -c "import pytest" 2>/dev/null || { echo "installing pytest"; \
	  $(PY_VENV)/bin/python -m pip install -q --disable-pip-version-check pytest; }
	$(PY_VENV)/bin/python -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./python
	cd $(BUILD) && MEGAJIT_TEST_INSTALLED=1 MEGAJIT_BUILD=$(abspath $(BUILD)) \
	  $(abspath $(PY_VENV))/bin/python -m pytest -q -p no:cacheprovider $(abspath python/tests)

check-exports: $(BUILD)/lib/libmegajit.so ## libmegajit.so.0 exports exactly the MJ_API functions
	.ci/check-exports $(BUILD)/lib/libmegajit.so.0 include/megajit.h

# What users compile: the header alone, C11 and C++11, all warnings as errors.
HEADER_WARN := -Wall -Wextra -Werror -pedantic -Iinclude
check-header: tests/header_probe.c include/megajit.h ## include/megajit.h compiles on its own as C11 and C++11
	@mkdir -p $(BUILD)/tests
	$(CC) -std=c11 $(HEADER_WARN) -o $(BUILD)/tests/header_probe_c tests/header_probe.c
	g++ -std=c++11 $(HEADER_WARN) -x c++ -o $(BUILD)/tests/header_probe_cxx tests/header_probe.c
	$(BUILD)/tests/header_probe_c && $(BUILD)/tests/header_probe_cxx

# An installed library depends on the system's packages like any Debian one.
check-install: all ## make install into a scratch DESTDIR ships no libcjson
	rm -rf $(BUILD)/install-check
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(BUILD))/install-check >/dev/null
	@if find $(BUILD)/install-check -name 'libcjson*' | grep -q .; then \
	  echo "check-install: make install copied libcjson into PREFIX" >&2; exit 1; fi
	@echo "check-install: $$(find $(BUILD)/install-check -type f | wc -l) files installed, no libcjson"

test: deps ## install deps, build, check the header, exports and install, run every CPU test (C and Python)
	$(MAKE) --no-print-directory all
	$(MAKE) --no-print-directory check-header
	$(MAKE) --no-print-directory check-exports
	$(MAKE) --no-print-directory check-install
	$(MAKE) --no-print-directory test-cpu
	$(MAKE) --no-print-directory test-python

# The launch-cost probe behind bench/README.md's floor (CUDA runtime, static).
$(BUILD)/bench/launch_probe: bench/launch_probe.cu
	@mkdir -p $(@D)
	$(CUDA_HOME)/bin/nvcc -O3 -std=c++17 -arch=sm_90a -Werror all-warnings -o $@ $<

# Whether ALU work and wgmma overlap on one SM (bench/README.md). A wgmma
# that ptxas serialized (C75xx) would void its timings: refused.
$(BUILD)/bench/rs_overlap: bench/rs_overlap.cu
	@mkdir -p $(@D)
	$(CUDA_HOME)/bin/nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a -Werror all-warnings \
	  -Itemplates -Xptxas -v -o $@ $< > $@.ptxas 2>&1 || { cat $@.ptxas; exit 1; }
	@if grep 'C75[0-9][0-9]' $@.ptxas; then rm -f $@; echo "ptxas serialized a wgmma"; exit 1; fi

test-gpu: all $(GPU_BIN) $(BUILD)/bench/launch_probe $(BUILD)/bench/rs_overlap ## build the GPU tests (run them on a GPU machine: tests/gpu/run.sh)

demo: deps ## install deps, build, precompile the default preset into build/demo-cache, print its stats
	$(MAKE) --no-print-directory all
	rm -rf $(BUILD)/demo-cache
	$(BUILD)/bin/megajit precompile --preset deepseek-v3-ep8 --arch sm_90a --cache $(BUILD)/demo-cache
	$(BUILD)/bin/megajit cache stat --cache $(BUILD)/demo-cache

install: all ## install the header, libraries, CLI and pkg-config file (PREFIX=/usr/local, DESTDIR)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/megajit.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/lib/libmegajit.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/lib/libmegajit.so.0 $(DESTDIR)$(PREFIX)/lib/
	ln -sf libmegajit.so.0 $(DESTDIR)$(PREFIX)/lib/libmegajit.so
	$(call pc_file,$(PREFIX),$(DESTDIR)$(PREFIX)/lib/pkgconfig/megajit.pc)
	install -m 755 $(BUILD)/bin/megajit $(DESTDIR)$(PREFIX)/bin/

FORMATTED = $$(git ls-files '*.c' '*.h' '*.cuh' '*.cu' '*.cpp')

format: ## rewrite every tracked source with the repo's .clang-format
	clang-format -i $(FORMATTED)

format-check: ## install clang-format when missing (as root), fail on any unformatted source or stale generated one
	@command -v clang-format >/dev/null 2>&1 || { $(call apt_install,clang-format,format-check); }
	clang-format --dry-run -Werror $(FORMATTED)
	python3 tools/gen_wgmma.py | clang-format --assume-filename=templates/common/wgmma_ops.cuh | \
	  diff -q - templates/common/wgmma_ops.cuh >/dev/null || \
	  { echo "templates/common/wgmma_ops.cuh is stale: regenerate it (tools/gen_wgmma.py)"; exit 1; }

clean: ## remove build/
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
