# s3xfer developer entry points. The README's quick start is `make demo` and
# `make test`; CI runs `make test` (with CI=true: warnings are errors).
SHELL := /bin/bash
.DEFAULT_GOAL := help

ROOT       := $(abspath .)
BUILD      ?= $(ROOT)/build
ASAN_BUILD ?= $(ROOT)/build-asan
TSAN_BUILD ?= $(ROOT)/build-tsan
FUZZ_BUILD ?= $(ROOT)/build-fuzz
# make fuzz: seconds per target; grown corpora and crash inputs go to FUZZ_WORK.
FUZZ_SECONDS ?= 300
FUZZ_WORK  ?= $(FUZZ_BUILD)/work
FUZZ_CC    ?= clang
FUZZ_TARGETS := $(sort $(basename $(notdir $(wildcard $(ROOT)/tests/fuzz/fuzz_*.c))))
VENV       ?= $(ROOT)/.venv
PY         := $(VENV)/bin/python
JOBS       ?= $(shell nproc)
CMAKE_GEN  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
export PYTHONPATH := $(BUILD)/python:$(ROOT)/tests:$(PYTHONPATH)
export S3X_BUILD_DIR := $(BUILD)

.PHONY: help deps venv build asan tsan ctest ctest-asan ctest-tsan pytest pytest-asan-cli pytest-asan-py install-check bench demo test server-start server-stop clean \
        fuzz-build fuzz fuzz-ci fuzz-replay

help:
	@echo "make demo   - install what is missing, build, start a local S3 server if none is configured, upload and download a file"
	@echo "make test   - C tests, sanitizer builds (ASan/UBSan, TSan), install/example check, pytest against the local server"
	@echo "make build  - configure and build into $(BUILD)"
	@echo "make bench  - the default benchmark suite against the local server (docs/performance.md)"
	@echo "make fuzz   - build the libFuzzer targets with clang and run each for FUZZ_SECONDS (default $(FUZZ_SECONDS))"

deps:
	@scripts/install-deps

$(VENV)/.stamp: requirements-dev.txt requirements-notebooks.txt
	@python3 -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt -r requirements-notebooks.txt
	@touch $@

venv: deps $(VENV)/.stamp

build: deps venv
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DS3X_WERROR=ON \
	  -DS3X_BUILD_PYTHON=ON -DPython3_EXECUTABLE=$(PY) > $(BUILD).configure.log 2>&1 \
	  || { cat $(BUILD).configure.log; exit 1; }
	@cmake --build $(BUILD) -j $(JOBS)

asan: deps
	@cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DS3X_WERROR=ON -DS3X_SANITIZE=ON \
	  -DS3X_BUILD_PYTHON=OFF > $(ASAN_BUILD).configure.log 2>&1 || { cat $(ASAN_BUILD).configure.log; exit 1; }
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

tsan: deps
	@cmake -S . -B $(TSAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DS3X_WERROR=ON -DS3X_TSAN=ON \
	  -DS3X_BUILD_PYTHON=OFF > $(TSAN_BUILD).configure.log 2>&1 || { cat $(TSAN_BUILD).configure.log; exit 1; }
	@cmake --build $(TSAN_BUILD) -j $(JOBS)

ctest: build
	@cd $(BUILD) && ctest --output-on-failure

ctest-asan: asan
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure

# ThreadSanitizer: every C test (the ones that run code on more than one
# thread: the receiving loops and the scheduler, the file writers' pool, the
# buffer pool), then CLI downloads with receiving threads through the TSan
# build (tests/python/test_cli.py and test_tls_transfers.py -k
# receive_threads: a report exits 66 and fails the test). libcurl, OpenSSL
# and libxml2 are not instrumented; what they do between our threads is seen
# only through our locks and atomics.
# setarch -R (no address randomization) keeps TSan's fixed memory layout
# working on kernels that randomize mmap with more bits than it expects.
ctest-tsan: build tsan
	@cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 setarch -R ctest --output-on-failure
	@S3X_BUILD_DIR=$(TSAN_BUILD) TSAN_OPTIONS=halt_on_error=1:exitcode=66 setarch -R scripts/with-local-s3 $(PY) -m pytest -q \
	  tests/python/test_cli.py tests/python/test_tls_transfers.py -k receive_threads

install-check: build
	@scripts/with-local-s3 scripts/check-install $(BUILD)

# Two passes (tests/python/conftest.py, SERIAL_FILES): the files that do not
# measure time or memory spread over PYTEST_JOBS pytest-xdist workers, whole
# files per worker (most of a test's time is waiting on the server or a CLI
# process, so two workers overlap well even on 2 cores); then the tests marked
# serial, alone. "No test selected" (exit 5) in one pass is not a failure, so
# PYTEST_ARGS can name a single file; PYTEST_JOBS=0 runs the first pass
# without workers.
# pytest-asan-py below uses the same two passes (PYTEST_TWO_PASSES).
PYTEST_JOBS ?= 2
# PYTEST_TWO_PASSES runs pytest on $(PASS_ARGS), a target's own variable (no
# $(call) arguments, so the arguments may hold commas).
PYTEST_TWO_PASSES = rc=0; scripts/with-local-s3 $(PY) -m pytest -q -n $(PYTEST_JOBS) --dist loadfile -m 'not serial' \
	  $(PASS_ARGS) || { r=$$?; [ $$r -eq 5 ] || rc=$$r; }; \
	  scripts/with-local-s3 $(PY) -m pytest -q -m serial $(PASS_ARGS) || { r=$$?; [ $$r -eq 5 ] || rc=$$r; }; \
	  exit $$rc
pytest: PASS_ARGS = $(PYTEST_ARGS)
pytest: build
	@$(PYTEST_TWO_PASSES)

# The two sanitizer passes below repeat tests the normal pytest already ran
# at full size: the tests whose size is only volume (5,000 files, 300 MiB
# objects) run smaller there, past the same thresholds (conftest.py, scale).
ASAN_TEST_SCALE ?= 0.25

# The CLI tests again against the sanitizer build: real transfers through the
# engine under ASan/UBSan (a sanitizer report exits 86 and fails the test).
# One pass: all but test_cli_bulk.py are serial files, and that one file in
# a parallel pass of its own took as long as it does here.
pytest-asan-cli: build asan
	@S3X_BUILD_DIR=$(ASAN_BUILD) S3X_TEST_SCALE=$(ASAN_TEST_SCALE) ASAN_OPTIONS=detect_leaks=1:exitcode=86 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86 \
	  scripts/with-local-s3 $(PY) -m pytest -q tests/python/test_cli.py tests/python/test_cli_hardening.py tests/python/test_cli_json.py \
	  tests/python/test_cli_bulk.py $(ASAN_PYTEST_ARGS)

# The Python API tests again in-process with an ASan/UBSan build of the module
# (scripts/build-asan-module): the bindings' buffer handling under the sanitizers.
# The same two passes as make pytest: the files that are not serial spread
# over the workers (179 s in one pass, 128 s in two, on 2 cores).
pytest-asan-py: PASS_ARGS = tests/python/test_py_hardening.py tests/python/test_python_api.py tests/python/test_ops.py \
	  tests/python/test_upload.py tests/python/test_download.py tests/python/test_lying_server.py \
	  tests/python/test_batch.py tests/python/test_bulk.py -k 'not peak_rss' $(ASAN_PYTEST_ARGS)
pytest-asan-py: build
	@eval "$$(scripts/build-asan-module --env $(ASAN_BUILD)-python)"; \
	  export LD_PRELOAD=$$S3X_ASAN_PRELOAD S3X_TEST_SCALE=$(ASAN_TEST_SCALE) ASAN_OPTIONS=detect_leaks=0:exitcode=86 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86 \
	  PYTHONPATH=$$S3X_ASAN_PYTHONPATH:$(ROOT)/tests; \
	  $(PYTEST_TWO_PASSES)

test: ctest ctest-asan ctest-tsan install-check pytest pytest-asan-cli pytest-asan-py

# Fuzzing (tests/fuzz/README.md). Every corpus is also replayed by ctest in
# both builds above (ctest, ctest-asan), so make test covers fuzz-replay.
fuzz-build: deps
	@cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) -DCMAKE_C_COMPILER=$(FUZZ_CC) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DS3X_WERROR=ON \
	  -DS3X_FUZZ=ON -DS3X_BUILD_TESTS=OFF -DS3X_BUILD_CLI=OFF -DS3X_BUILD_PYTHON=OFF \
	  > $(FUZZ_BUILD).configure.log 2>&1 || { cat $(FUZZ_BUILD).configure.log; exit 1; }
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)

fuzz: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_WORK) $(FUZZ_TARGETS)

# For CI: a short fixed time per target; fails on a crash, never on time.
# Each libFuzzer process uses one core, so the targets run in FUZZ_JOBS
# groups at once (default: one per core, at most 2): each target still gets
# its full FUZZ_CI_SECONDS, the phase takes about half as long on 2 cores.
# Each group logs to a file of its own, printed whole at the end (no
# interleaved failure reports).
FUZZ_CI_SECONDS ?= 25
FUZZ_JOBS ?= $(shell n=$$(nproc); [ $$n -gt 2 ] && n=2; echo $$n)
fuzz-ci: fuzz-build
	@t=($(FUZZ_TARGETS)); j=$(FUZZ_JOBS); mkdir -p $(FUZZ_WORK); rm -f $(FUZZ_WORK)/ci-group*.log; pids=(); \
	  for ((g = 0; g < j; g++)); do \
	    grp=(); for ((i = g; i < $${#t[@]}; i += j)); do grp+=("$${t[i]}"); done; \
	    [ $${#grp[@]} -eq 0 ] && continue; \
	    tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_CI_SECONDS) $(FUZZ_WORK) "$${grp[@]}" > $(FUZZ_WORK)/ci-group$$g.log 2>&1 & \
	    pids+=($$!); \
	  done; \
	  rc=0; for p in "$${pids[@]}"; do wait $$p || rc=1; done; \
	  cat $(FUZZ_WORK)/ci-group*.log; exit $$rc

# Only the corpus replays, under ASan/UBSan.
fuzz-replay: asan
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -R '_corpus$$'

# The default benchmark suite (s3xfer vs boto3, awscrt, s5cmd, rclone), about
# 15 minutes here; see benchmarks/README.md for the other scripts.
bench: build
	@benchmarks/run --suite default

demo: build
	@scripts/with-local-s3 scripts/demo $(BUILD)/s3xfer

server-start:
	@scripts/local-s3 start

server-stop:
	@scripts/local-s3 stop

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(BUILD).configure.log $(ASAN_BUILD).configure.log \
	  $(FUZZ_BUILD) $(FUZZ_BUILD).configure.log
