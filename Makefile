# crashlab — the two commands are `make sweep` and `make test`; both set up
# and build first.  Each C component adds its own rules in <folder>/build.mk:
# it appends its outputs to BUILD and its C test runs to CTEST.

SHELL    := /bin/bash
VENV     := .venv
PY       := $(VENV)/bin/python
CRASHLAB := $(VENV)/bin/crashlab
CC       ?= cc
CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g
ASAN_FLAGS    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# Every C source and header, checked against .clang-format by `make lint`.
C_FILES  := $(sort $(wildcard dhl/*/*.[ch] workloads/*/*.[ch] harness/*/*.[ch] checkers/*/*.[ch]))

BUILD :=
CTEST :=
include $(sort $(wildcard */build.mk))

.PHONY: help setup build check test ctest pytest lint sweep bench images repro report recheck floors clean mutants fuzz

help:
	@echo "make sweep   set up, build, run the default crash sweep, print where the report is"
	@echo "make test    set up, build, run the whole test suite"
	@echo "make check   the quick gate (under a minute): ruff check, ruff format --check,"
	@echo "             mypy, and the unit tier (tests needing no root, FUSE, qemu, recording)"
	@echo "make bench   print the benchmark figures"
	@echo "make mutants build each mutant of tests/mutants/, run the cells that must kill it"
	@echo "make fuzz    $(FUZZ) damaged inputs of each kind (log, meta.json, matrix, command line)"
	@echo "             through the real command: no traceback, no hang, no verdict on bad input"
	@echo "make images  build the base file-system images"
	@echo "make repro RUN=... STATE=...   materialise and explain one crash state"
	@echo "make recheck SWEEP=...   re-check a sweep's recordings with this tree; exit 1 unless"
	@echo "                         every verdict file is byte-identical (tests/tools/recheck.py)"
	@echo "make floors SWEEP=\"A B\"  write the default matrix's coverage floors from finished"
	@echo "                         default sweeps (crashlab floors; harness/sweep/floors.py)"

setup:
	@harness/setup/setup.sh

build: setup $(BUILD)

images: setup
	@for fs in ext4 xfs btrfs f2fs; do \
	  [ -f images/$$fs.img ] || { echo "images: building $$fs"; images/build-image.sh $$fs images/$$fs.img; }; \
	  echo "images/$$fs.img sha256 $$(cat images/$$fs.img.sha256)"; done

# Lint, format and types ([tool.mypy] in pyproject.toml): part of both
# `make check` and `make test`.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	clang-format --dry-run --Werror $(C_FILES)

ctest: build $(CTEST)

# The quick gate: lint and the unit tier (tests/conftest.py marks `unit`
# every test that needs no root, loop device, FUSE, qemu or recording).
check: build lint
	$(PY) -m pytest -q -m unit -p no:cacheprovider $(if $(filter 0,$(PYTEST_JOBS)),,-n $(PYTEST_JOBS))

# Two pytest workers (pytest-xdist), one test file per worker: each test's
# devices and processes live under its own working folder, so the leak
# checks hold in parallel.  PYTEST_JOBS=0 runs serially.
PYTEST_JOBS ?= 2
pytest: build images
	$(PY) -m pytest -q -ra $(if $(filter 0,$(PYTEST_JOBS)),,-n $(PYTEST_JOBS) --dist loadfile) $(PYTEST_ARGS)

test: setup build lint ctest pytest mutants

sweep: build images
	$(CRASHLAB) sweep --matrix default

# Damaged inputs (tests/damage.py), FUZZ of each kind, seeded by FUZZ_SEED;
# `make test` runs a sample of 12 of each (tests/test_damaged_input.py).
FUZZ      ?= 500
FUZZ_SEED ?= 1
fuzz: build images
	@rm -f fuzz-report.txt
	CRASHLAB_FUZZ=$(FUZZ) CRASHLAB_FUZZ_SEED=$(FUZZ_SEED) CRASHLAB_FUZZ_REPORT=$(CURDIR)/fuzz-report.txt \
	  $(PY) -m pytest -q tests/test_damaged_input.py -k test_damaged_inputs
	@cat fuzz-report.txt

mutants: build images
	$(CRASHLAB) mutants

bench: build images
	$(CRASHLAB) bench

repro: build
	@[ -n "$(RUN)" ] && [ -n "$(STATE)" ] || { echo "usage: make repro RUN=results/... STATE=e3.k0-2" >&2; exit 2; }
	$(CRASHLAB) repro "$(RUN)" "$(STATE)" --out "$(or $(OUT),repro-out)"

report: build
	@[ -n "$(SWEEP)" ] || { echo "usage: make report SWEEP=results/<sweep>" >&2; exit 2; }
	$(CRASHLAB) report "$(SWEEP)"

# A reshaping must leave every verdict byte-identical: re-check the same
# recordings with this tree's code (another tree: its own python, same script).
recheck: build
	@[ -n "$(SWEEP)" ] || { echo "usage: make recheck SWEEP=results/<sweep>" >&2; exit 2; }
	$(PY) tests/tools/recheck.py "$(SWEEP)"

floors: setup
	@[ -n "$(SWEEP)" ] || { echo 'usage: make floors SWEEP="results/<default sweep> ..."' >&2; exit 2; }
	$(CRASHLAB) floors $(SWEEP)

clean:
	rm -rf build */build .pytest_cache .ruff_cache
