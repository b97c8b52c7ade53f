# Makefile -- the one build of dynscope: the engine extension dynscope/_C, its
# ASan/UBSan variant, the tests, the demo and the benchmarks.  Layout and
# dependencies: ../shared/DESIGN.md sections 2 and 5.
#
#   make / make all / make dev   build dynscope/_C$(EXT_SUFFIX) in place, and the
#                                LTTng tracepoint provider build/libdynscope-tp.so
#                                when the lttng-ust headers are installed
#   make test                    install missing deps, build, run C and Python tests
#   make pytest                  the Python tests alone (PYTEST_ARGS="-q tests/test_x.py")
#   PYTHON=/path/to/python3.12 make test   the same on CPython 3.12 (or 3.13):
#                                its own venv (.venv-3.12) and extension build
#   make asan                    build with ASan+UBSan, run the Python tests under it
#   make asan-quick              the same, all but the slowest tests (what CI runs)
#   make check-layout            scripts/check_layout.py: the engine's rooms and the
#                                layers point down, by includes and by nm over the
#                                extension's objects (docs/architecture.md, "Rooms")
#   make check-c                 build and run tests/c/*.c (if any; not bench_*.c)
#   make check-c-asan            the store's C tests under ASan+UBSan
#   make bench-store             the SQLite recorder's throughput (tests/c/bench_store.c)
#   make bench                   run scripts/bench_*.py, each rewriting its section of
#                                docs/performance.md; each also takes --quick (seconds,
#                                prints only), as tests/test_benches.py runs them
#   make demo                    install missing deps, build, record scripts/demo_workload.py,
#                                report it and show dyntop on it
#   make demo-ranks              the demo workload as 4 ranks of one job (rank 2 made to
#                                diverge), a file each (demo-ranks/rank%r.db), their merged
#                                report, and dyntop on the 4 files
#   make fuzz                    tests/test_fuzz.py with 20000 random programs
#   make conformance             CPython's and NumPy's own test suites, plain and
#                                under --capture-all; writes docs/conformance.md
#                                (docs/conformance-X.Y.md with PYTHON=... of another
#                                version: that version's own CPython test modules)
#                                (make test runs a subset: tests/test_conformance.py)
#   make dyntop                  build build/dyntop, the TUI (part of make all)
#   make install                 build/dyntop -> $(PREFIX)/bin, its man page ->
#                                $(PREFIX)/share/man/man1 (PREFIX=/usr/local, DESTDIR)
#   make deps                    scripts/install-deps.sh alone
#   make print-vars              show what the build resolved (PYTHON=... too)
#   make clean                   every version's build and extension
#
# PYTHON=/path/to/python3.X (3.11, 3.12 or 3.13) works with every target that
# runs Python (test, asan, conformance, bench, demo, fuzz, deps, print-vars).
#
# Extra flags: make CFLAGS_EXTRA=-DNDEBUG (or any other) -- a change of flags
# rebuilds the objects that depend on them.

.DEFAULT_GOAL := all
SHELL := bash

# ---------------------------------------------------------------------------
# Python: the venv made by scripts/install-deps.sh for $(PYTHON) -- CPython
# 3.11 by default (.venv), or PYTHON=/path/to/python3.12 (3.13) for that
# version's venv, .venv-3.12 (.venv-3.13).  Each version's extension objects
# go to their own directory (EXT_BUILD); the rest (dyntop, the LTTng
# provider, the C tests) does not depend on Python and is built once, in
# build/, by the default (3.11) build.

PYTHON ?=
ifeq ($(strip $(PYTHON)),)
PYVER := 3.11
else
PYVER := $(shell '$(PYTHON)' -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
ifeq ($(PYVER),)
$(error PYTHON=$(PYTHON) does not run)
endif
endif
SUPPORTED_PYVERS := 3.11 3.12 3.13
ifeq ($(filter $(PYVER),$(SUPPORTED_PYVERS)),)
$(error PYTHON=$(PYTHON) is CPython $(PYVER); dynscope supports CPython $(SUPPORTED_PYVERS))
endif
ifeq ($(PYVER),3.11)
VENV := .venv
EXT_BUILD := build
else
VENV := .venv-$(PYVER)
EXT_BUILD := build/cp$(subst .,,$(PYVER))
endif
VENV_PY := $(VENV)/bin/python
PY := $(if $(wildcard $(VENV_PY)),$(VENV_PY),$(or $(PYTHON),python3))

# Asked of $(PY) once, and only when a recipe needs it (so `make clean` does not
# need Python or NumPy): Python include dir, NumPy include dir, EXT_SUFFIX.
PYCFG_CODE := import sysconfig, numpy; print(sysconfig.get_paths()['include'], numpy.get_include(), sysconfig.get_config_var('EXT_SUFFIX'))
PYCFG = $(eval PYCFG := $$(shell $$(PY) -c "$$(PYCFG_CODE)" 2>/dev/null))$(if $(word 3,$(PYCFG)),$(PYCFG),$(error cannot ask $(PY) for the Python/NumPy include dirs; run $(if $(PYTHON),PYTHON=$(PYTHON) )make deps (scripts/install-deps.sh)))
PY_INC = $(word 1,$(PYCFG))
NUMPY_INC = $(word 2,$(PYCFG))
EXT_SUFFIX = $(word 3,$(PYCFG))

# ---------------------------------------------------------------------------
# Toolchain and flags.

BUILD := build
EXT_NAME := _C
EXT_GLOB := dynscope/$(EXT_NAME).*so

# trace/trace.c is the engine's side of LTTng (plain C, dlopen, no LTTng
# headers); trace/tp.c is the provider, built apart below.
# Sources and libraries come from build.conf, which setup.py reads too.
build_conf = $(shell sed -n 's/^$(1): *//p' build.conf)
SRCS := $(wildcard $(call build_conf,ext_sources))
OBJS := $(SRCS:%.c=$(EXT_BUILD)/%.o)
ASAN_OBJS := $(SRCS:%.c=$(EXT_BUILD)/asan/%.o)

WARN := -Wall -Wextra -Werror
# -isystem: CPython's and NumPy's headers (pycore_* included) are not ours to
# keep warning-free under -Werror.
INCLUDES = -isystem $(PY_INC) -isystem $(NUMPY_INC)
BASE_CFLAGS = -std=c11 $(WARN) -fPIC -g -fvisibility=hidden $(INCLUDES)
CFLAGS_NORMAL = $(BASE_CFLAGS) -O2 $(CFLAGS_EXTRA)
SANITIZE := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
CFLAGS_ASAN = $(BASE_CFLAGS) -O1 $(SANITIZE) $(CFLAGS_EXTRA)
DEPFLAGS := -MMD -MP
LDLIBS := $(addprefix -l,$(call build_conf,ext_libraries)) $(LDLIBS_EXTRA)

# The normal and the ASan extension are linked apart, under build/; only
# install-ext copies one into dynscope/, and it does so whenever the copy there
# differs from build/_C.so -- so after `make asan` the next `make` or
# `make test` puts the normal build back, even if the ASan run was interrupted.
SO := $(EXT_BUILD)/$(EXT_NAME).so
ASAN_SO := $(EXT_BUILD)/asan/$(EXT_NAME).so

# ASan must come first in the process, before python and numpy are loaded.
ASAN_PRELOAD = $(shell $(CC) -print-file-name=libasan.so)
ASAN_ENV = LD_PRELOAD="$(ASAN_PRELOAD)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	PYTHONMALLOC=malloc

PYTEST_ARGS ?= -q tests

# Copy $(1) to dynscope/_C$(EXT_SUFFIX) unless identical.  Atomic (rename), so a
# running process that has the old file mapped is not disturbed.
define install_so
	@dst=dynscope/$(EXT_NAME)$(EXT_SUFFIX); \
	if ! cmp -s $(1) $$dst; then \
		cp $(1) $$dst.tmp && mv -f $$dst.tmp $$dst && echo "installed $(1) -> $$dst"; \
	fi
endef

.PHONY: all dev install-ext tp dyntop install test pytest check-layout check-c check-c-asan bench-store asan asan-quick bench demo demo-ranks deps clean print-vars FORCE

all: install-ext tp dyntop

dev: all

install-ext: $(SO)
	$(call install_so,$(SO))

# ---------------------------------------------------------------------------
# Compile and link.  A flags file per variant, rewritten only when the flags
# change, makes every object of that variant depend on its flags.

$(BUILD)/cflags: FORCE
	@mkdir -p $(@D)
	@echo '$(CC) $(CFLAGS_NORMAL)' | cmp -s - $@ || echo '$(CC) $(CFLAGS_NORMAL)' > $@

$(BUILD)/asan/cflags: FORCE
	@mkdir -p $(@D)
	@echo '$(CC) $(CFLAGS_ASAN)' | cmp -s - $@ || echo '$(CC) $(CFLAGS_ASAN)' > $@

$(BUILD)/%.o: %.c $(BUILD)/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_NORMAL) $(DEPFLAGS) -c $< -o $@

$(BUILD)/asan/%.o: %.c $(BUILD)/asan/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ASAN) $(DEPFLAGS) -c $< -o $@

# Another Python version's extension objects (make picks the rule with the
# shortest stem, so build/cp312/x.o is built here, not by build/%.o).
ifneq ($(EXT_BUILD),$(BUILD))
$(EXT_BUILD)/cflags: FORCE
	@mkdir -p $(@D)
	@echo '$(CC) $(CFLAGS_NORMAL)' | cmp -s - $@ || echo '$(CC) $(CFLAGS_NORMAL)' > $@

$(EXT_BUILD)/asan/cflags: FORCE
	@mkdir -p $(@D)
	@echo '$(CC) $(CFLAGS_ASAN)' | cmp -s - $@ || echo '$(CC) $(CFLAGS_ASAN)' > $@

$(EXT_BUILD)/%.o: %.c $(EXT_BUILD)/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_NORMAL) $(DEPFLAGS) -c $< -o $@

$(EXT_BUILD)/asan/%.o: %.c $(EXT_BUILD)/asan/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ASAN) $(DEPFLAGS) -c $< -o $@
endif

$(SO): $(OBJS)
	$(if $(OBJS),,$(error no engine/*/*.c sources to build))
	$(CC) -shared -o $@ $(OBJS) $(LDLIBS)

$(ASAN_SO): $(ASAN_OBJS)
	$(if $(ASAN_OBJS),,$(error no engine/*/*.c sources to build))
	$(CC) -shared $(SANITIZE) -o $@ $(ASAN_OBJS) $(LDLIBS)

-include $(OBJS:.o=.d) $(ASAN_OBJS:.o=.d)

# ---------------------------------------------------------------------------
# The LTTng-UST tracepoint provider, its own shared object: the engine
# dlopen()s it (trace/trace.c), so the extension never links liblttng-ust.
# Built when <lttng/tracepoint.h> compiles here, skipped (with a note) when
# not.  Flags come from pkg-config lttng-ust when it answers.  Asked only
# when a recipe needs it.

TP_SO := $(BUILD)/libdynscope-tp.so
# (\043 is '#', which $(eval) would read as a comment.)
TP_PROBE = $(eval TP_PROBE := $$(shell printf '\043include <lttng/tracepoint.h>\n' | \
	$$(CC) $$(TP_PKG_CFLAGS) -x c -fsyntax-only - >/dev/null 2>&1 && echo yes))$(TP_PROBE)
TP_PKG_CFLAGS = $(shell pkg-config --cflags lttng-ust 2>/dev/null)
TP_PKG_LIBS = $(or $(shell pkg-config --libs lttng-ust 2>/dev/null),-llttng-ust -ldl)
# -Itrace: lttng's tracepoint-event.h re-includes "./tp.h" from the include path.
TP_CFLAGS = -std=c11 $(WARN) -fPIC -g -O2 -fvisibility=hidden -Itrace $(TP_PKG_CFLAGS) $(CFLAGS_EXTRA)

tp:
	@if [ "$(TP_PROBE)" = yes ]; then \
		$(MAKE) --no-print-directory $(TP_SO); \
	else \
		echo "make: note: lttng-ust headers not found; skipping $(TP_SO) (tracing stays off; install liblttng-ust-dev)"; \
	fi

$(BUILD)/tp_cflags: FORCE
	@mkdir -p $(@D)
	@echo '$(CC) $(TP_CFLAGS) $(TP_PKG_LIBS)' | cmp -s - $@ || echo '$(CC) $(TP_CFLAGS) $(TP_PKG_LIBS)' > $@

$(TP_SO): trace/tp.c trace/tp.h trace/trace.h event/event.h $(BUILD)/tp_cflags
	@mkdir -p $(@D)
	$(CC) $(TP_CFLAGS) -shared -o $@ trace/tp.c $(TP_PKG_LIBS)

# ---------------------------------------------------------------------------
# Tests.  pytest's exit status 5 means "no tests collected": a failure, said
# so (a PYTEST_ARGS that selects nothing, a suite that lost its tests).
# Under CI=true a test skipped for want of a tool CI installs fails too
# (tests/_ci_skips.py).  Under ASan pytest captures sys.stdout/err only
# (--capture=sys), so a sanitizer report written to fd 2 just before abort()
# reaches the terminal instead of a lost temp file.

define run_pytest
	rc=0; $(1) $(VENV_PY) -m pytest $(2) $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make: error: pytest collected no tests (exit 5): a failure" >&2; fi
endef

# With PYTHON=... of another version: its venv and extension; the C tests do
# not depend on Python and run in the default build only.
test:
	$(if $(PYTHON),PYTHON='$(PYTHON)' )bash scripts/install-deps.sh
	$(MAKE) --no-print-directory all
	$(MAKE) --no-print-directory check-layout
	$(if $(filter build,$(EXT_BUILD)),$(MAKE) --no-print-directory check-c,@echo "make test: C tests (check-c) run in the default 3.11 build")
	@$(call run_pytest,); exit $$rc

# The layout rules over the sources and this Python's extension objects
# (tests/test_layout.py runs the same check and plants each violation).
check-layout: $(SO)
	$(PY) scripts/check_layout.py --objects $(EXT_BUILD)

# The Python tests alone, as make test runs them (nothing installed or built).
pytest:
	@$(call run_pytest,); exit $$rc

# C unit tests: every tests/c/*.c but bench_*.c is one standalone program,
# built under build/tests/c/ and run; a non-zero exit fails the target.  They
# may call store/ (the SQLite recorder): its objects are linked in, with
# C_TEST_LIBS.  tests/c/bench_*.c are benchmarks, built by the same rule and
# run by their own targets (bench-store).
C_TESTS := $(patsubst tests/c/%.c,$(BUILD)/tests/c/%,$(filter-out tests/c/bench_%.c,$(wildcard tests/c/*.c)))
C_TESTS_ASAN := $(C_TESTS:$(BUILD)/%=$(BUILD)/asan/%)
STORE_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard store/*.c))
STORE_ASAN_OBJS := $(patsubst %.c,$(BUILD)/asan/%.o,$(wildcard store/*.c))
C_TEST_LIBS := -lsqlite3 -lpthread

$(BUILD)/tests/c/%: tests/c/%.c $(STORE_OBJS) $(BUILD)/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_NORMAL) $(DEPFLAGS) -o $@ $< $(STORE_OBJS) $(LDLIBS) $(C_TEST_LIBS)

$(BUILD)/asan/tests/c/%: tests/c/%.c $(STORE_ASAN_OBJS) $(BUILD)/asan/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ASAN) $(DEPFLAGS) -o $@ $< $(STORE_ASAN_OBJS) $(LDLIBS) $(C_TEST_LIBS)

-include $(C_TESTS:=.d) $(C_TESTS_ASAN:=.d)

# C tests that link more than their own file.
$(BUILD)/tests/c/trace_smoke: tests/c/trace_smoke.c trace/trace.c trace/trace.h \
		event/event.h $(BUILD)/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_NORMAL) -o $@ tests/c/trace_smoke.c trace/trace.c $(LDLIBS)

check-c: $(C_TESTS)
	@if [ -z "$(C_TESTS)" ]; then echo "check-c: no C unit tests (tests/c/*.c)"; fi
	@set -e; for t in $(C_TESTS); do echo "check-c: $$t"; ./$$t; done

# The same C tests under ASan+UBSan (leaks included).  The tests that need
# other sources than store/ (trace_smoke) are left to check-c.
C_TESTS_ASAN_STORE := $(filter $(BUILD)/asan/tests/c/test_store%,$(C_TESTS_ASAN))
check-c-asan: $(C_TESTS_ASAN_STORE)
	@set -e; for t in $(C_TESTS_ASAN_STORE); do echo "check-c-asan: $$t"; \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ./$$t; done

# The recorder's throughput (docs/performance.md, "SQLite recorder").
# BENCH_STORE_ARGS: [EVENTS [VIEW_EVENTS [DIR]]].
bench-store: $(BUILD)/tests/c/bench_store
	./$(BUILD)/tests/c/bench_store $(BENCH_STORE_ARGS)

# The Python tests under ASan+UBSan: the ASan extension in dynscope/ for the
# run, libasan preloaded into pytest and the Python it starts.  Other
# programs (chromium, tmux, dyntop, lttng, ...) are started through
# tests/_programs.py, without the sanitizer (issue 46).  dyntop and the
# provider are built first: their tests need them.  Times: docs/performance.md.
asan: $(ASAN_SO) tp dyntop
	$(call install_so,$(ASAN_SO))
	@$(call run_pytest,$(ASAN_ENV),--capture=sys); \
	$(MAKE) --no-print-directory install-ext || rc=1; \
	exit $$rc

# What CI runs under ASan (.ci/run): every test but test_conformance.py (other
# projects' test suites, captured: over half of make asan's time; make conformance
# runs them in full) and test_install.py (it builds and runs a plain wheel,
# never the ASan extension).
# It runs in ASAN_SHARDS pytest processes at once (scripts/pytest_shards.sh):
# one keeps one core of two busy, and CI runs it alone, after the rest.
ASAN_QUICK_LEAVE_OUT := tests/test_conformance.py tests/test_install.py
ASAN_SHARDS ?= 2
asan-quick: $(ASAN_SO) tp dyntop
	$(call install_so,$(ASAN_SO))
	@rc=0; $(ASAN_ENV) bash scripts/pytest_shards.sh $(ASAN_SHARDS) $(VENV_PY) -q --capture=sys \
		$(filter-out $(ASAN_QUICK_LEAVE_OUT),$(sort $(wildcard tests/test_*.py))) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make: error: pytest collected no tests (exit 5): a failure" >&2; fi; \
	$(MAKE) --no-print-directory install-ext || rc=1; \
	exit $$rc

# ---------------------------------------------------------------------------
# dyntop (tui/, docs/dyntop.md): a plain C program, no Python.  It links the
# store's read helpers (store/read.c and what they call: schema.c, util.c),
# built again here with dyntop's own flags under build/tui/, so the extension's
# objects (-fPIC, Python includes) stay apart.

DYNTOP := $(BUILD)/dyntop
DYNTOP_SRCS := $(wildcard $(call build_conf,dyntop_sources))
DYNTOP_OBJS := $(DYNTOP_SRCS:%.c=$(BUILD)/tui/%.o)
NCURSES_CFLAGS = $(shell pkg-config --cflags ncursesw 2>/dev/null)
NCURSES_LIBS = $(or $(shell pkg-config --libs ncursesw 2>/dev/null),-lncursesw)
TUI_CFLAGS = -std=c11 $(WARN) -g -O2 $(NCURSES_CFLAGS) $(CFLAGS_EXTRA)
PREFIX ?= /usr/local

dyntop: $(DYNTOP)

$(BUILD)/tui/cflags: FORCE
	@mkdir -p $(@D)
	@echo '$(CC) $(TUI_CFLAGS)' | cmp -s - $@ || echo '$(CC) $(TUI_CFLAGS)' > $@

$(BUILD)/tui/%.o: %.c $(BUILD)/tui/cflags
	@mkdir -p $(@D)
	$(CC) $(TUI_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(DYNTOP): $(DYNTOP_OBJS)
	$(CC) -o $@ $(DYNTOP_OBJS) $(NCURSES_LIBS) -lsqlite3 -lpthread

-include $(DYNTOP_OBJS:.o=.d)

install: $(DYNTOP)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(DYNTOP) $(DESTDIR)$(PREFIX)/bin/dyntop
	install -m 0644 docs/dyntop.1 $(DESTDIR)$(PREFIX)/share/man/man1/dyntop.1

# Conformance fuzzing (issue 9): 20000 generated programs with fresh
# randomness each run (make test runs 500 derandomized ones).
.PHONY: conformance
conformance: all
	PYTHON=$(PY) bash scripts/conformance.sh --doc docs/$(if $(filter 3.11,$(PYVER)),conformance.md,conformance-$(PYVER).md)

# The model zoo (tests/models), dynscope and TorchDynamo side by side:
# docs/models.md (docs/models-X.Y.md with PYTHON=... of another version; each
# run also remakes docs/models.md's table of every version side by side).
# Then generate() with a KV cache, eager, dynscope and Dynamo side by side
# (scripts/generate_bench.py: the section "generate() with a KV cache").
# Needs torch and transformers (DYNSCOPE_WITH_TORCH=1 make deps).
ZOO_DOC = docs/$(if $(filter 3.11,$(PYVER)),models.md,models-$(PYVER).md)
.PHONY: zoo
zoo: all
	$(PY) scripts/model_zoo.py --out $(ZOO_DOC)
	$(PY) scripts/generate_bench.py --out $(ZOO_DOC)

# Every architecture of transformers' base-model table, built tiny, dynscope
# and TorchDynamo side by side, then each causal-LM head in training mode (a
# step with loss.backward(), losses and gradients bit-exact): docs/sweep.md
# (scripts/hf_sweep.py; issue 38).  Resumable (build/sweep.jsonl and
# build/sweep_train.jsonl keep what ran: SWEEP_ARGS=--fresh forgets it),
# 25 + 20 minutes here.  Needs torch and transformers; not in make test
# (tests/test_sweep.py runs a fixed sample of 24, and a few in training mode).
.PHONY: sweep
sweep: all
	$(PY) scripts/hf_sweep.py $(SWEEP_ARGS)
	$(PY) scripts/hf_sweep.py --train --reps 5 $(SWEEP_ARGS)

.PHONY: fuzz
fuzz: all
	DYNSCOPE_FUZZ_RANDOM=1 DYNSCOPE_FUZZ_EXAMPLES=20000 $(VENV_PY) -m pytest -q -s tests/test_fuzz.py

# ---------------------------------------------------------------------------
# Demo and benchmarks.

# scripts/bench_trace.py runs this C loop (trace/trace.h's cost).
$(BUILD)/bench_trace: scripts/bench_trace.c trace/trace.c trace/trace.h \
		event/event.h $(BUILD)/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_NORMAL) -o $@ scripts/bench_trace.c trace/trace.c $(LDLIBS)

bench: all
	@shopt -s nullglob; benches=(scripts/bench_*.py); \
	if [ $${#benches[@]} -eq 0 ]; then echo "bench: no scripts/bench_*.py yet"; exit 0; fi; \
	for b in "$${benches[@]}"; do echo "== $$b"; $(PY) "$$b" || exit $$?; done

# The main job: a NumPy training loop recorded to dynscope.db, a report, then
# dyntop on it (its batch output when there is no terminal, e.g. in CI logs).
# Like make test, it installs what is missing first (so it runs the venv's
# python: $(PY) was resolved before the venv existed on a fresh machine).
demo:
	$(if $(PYTHON),PYTHON='$(PYTHON)' )bash scripts/install-deps.sh
	$(MAKE) --no-print-directory all
	rm -f dynscope.db dynscope.db-wal dynscope.db-shm
	$(VENV_PY) -m dynscope run --db dynscope.db scripts/demo_workload.py
	$(VENV_PY) -m dynscope report dynscope.db
	@if [ -t 0 ] && [ -t 1 ]; then $(BUILD)/dyntop dynscope.db; \
	else $(BUILD)/dyntop -b -n 1 dynscope.db; fi

# Many processes: 4 ranks, each recording its own file through the path
# template rank%r.db (docs/recording.md); dyntop's divergence view (v) names
# the odd rank.
demo-ranks:
	$(if $(PYTHON),PYTHON='$(PYTHON)' )bash scripts/install-deps.sh
	$(MAKE) --no-print-directory all
	rm -rf demo-ranks
	$(VENV_PY) scripts/demo_ranks.py demo-ranks
	$(VENV_PY) -m dynscope report demo-ranks/rank0.db demo-ranks/rank1.db demo-ranks/rank2.db demo-ranks/rank3.db
	@if [ -t 0 ] && [ -t 1 ]; then $(BUILD)/dyntop demo-ranks/rank*.db; \
	else $(BUILD)/dyntop -b -n 1 demo-ranks/rank*.db; fi

# ---------------------------------------------------------------------------

deps:
	$(if $(PYTHON),PYTHON='$(PYTHON)' )bash scripts/install-deps.sh

# (Before the venv exists it says so, instead of stopping at PYCFG.)
print-vars: PYCFG = $(or $(shell $(PY) -c "$(PYCFG_CODE)" 2>/dev/null),? ? ?)
print-vars:
	@echo "PYTHON     = $(or $(PYTHON),(unset: CPython 3.11, python3 or python3.11))"
	@echo "PYVER      = $(PYVER)"
	@echo "VENV       = $(VENV)$(if $(wildcard $(VENV_PY)),, (not made yet: make deps))"
	@echo "EXT_BUILD  = $(EXT_BUILD) (the extension's objects; dyntop, the LTTng provider, C tests: $(BUILD))"
	@echo "PY         = $(PY)"
	@echo "CC         = $(CC)"
	@echo "PY_INC     = $(PY_INC)"
	@echo "NUMPY_INC  = $(NUMPY_INC)"
	@echo "EXT_SUFFIX = $(EXT_SUFFIX)"
	@echo "EXTENSION  = dynscope/$(EXT_NAME)$(EXT_SUFFIX)"
	@echo "SRCS       = $(SRCS)"
	@echo "CFLAGS     = $(CFLAGS_NORMAL)"
	@echo "ASAN FLAGS = $(CFLAGS_ASAN)"
	@echo "LDLIBS     = $(LDLIBS)"
	@echo "TP_SO      = $(TP_SO) (lttng-ust headers: $(or $(TP_PROBE),no))"
	@echo "TP_CFLAGS  = $(TP_CFLAGS) $(TP_PKG_LIBS)"
	@echo "ASAN_PRELOAD = $(ASAN_PRELOAD)"

clean:
	rm -rf $(BUILD) $(EXT_GLOB) dynscope/*.so.tmp *.egg-info

FORCE:
