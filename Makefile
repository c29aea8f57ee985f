# tensorseal — the two commands: `make demo` and `make test`. Each does all set-up.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BUILD := build
# Build and test jobs: the machine's cores, at most 8 (a clang ASan compile takes ~1.5 GiB).
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$((n > 8 ? 8 : n)))
SIZE ?= full
FUZZ_SECONDS ?= 30

.PHONY: setup setup-demo build build-demo test check demo bench fuzz sanitize clean python wheels format

# Everything `make test` needs; setup-demo: only what the library, the CLI, the
# extension and `make demo` need (scripts/setup.sh says which is which).
setup:
	bash scripts/setup.sh

setup-demo:
	bash scripts/setup.sh demo

# One build of the library serves the C++ tests, the CLI and the Python extension
# (staged in $(BUILD)/python: PYTHONPATH=$(BUILD)/python imports it).
# `make build` configures with the test suite, `make build-demo` without it (no
# GoogleTest needed) and builds only the library, tseal and the extension; either
# reconfigures a build directory the other made.
# Debug info is line tables and function names (-g1): backtraces and perf keep file and
# line, the code is the same as with -g, and each file compiles in about two thirds of
# the time (src/torch/pt_writer.cc: 7.6 s -> 5.2 s of CPU). DEBUG_FLAGS=-g for locals.
DEBUG_FLAGS ?= -g1
# The library compiles as unity batches (CMakeLists.txt); UNITY=OFF compiles file by file.
UNITY ?= ON
CONFIGURE = $(VENV)/bin/cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 $(DEBUG_FLAGS) -DNDEBUG" -DTENSORSEAL_UNITY=$(UNITY) \
	  -DTENSORSEAL_PYTHON=ON -DPython_EXECUTABLE=$(abspath $(PY))

build: setup
	$(CONFIGURE) -DTENSORSEAL_TESTS=ON > /dev/null
	$(VENV)/bin/cmake --build $(BUILD) -j $(JOBS)

build-demo: setup-demo
	$(CONFIGURE) -DTENSORSEAL_TESTS=OFF > /dev/null
	$(VENV)/bin/cmake --build $(BUILD) -j $(JOBS) --target tseal _tensorseal

# Installs the package into .venv like a user's `pip install .` (a separate build).
python: setup
	$(PY) -m pip install -q --no-build-isolation ./

# Repaired (auditwheel) wheels for every CPython 3.9-3.13 on the machine into dist/: one
# cp312-abi3 wheel for 3.12+, one each for 3.9-3.11; each is then installed into a fresh
# venv of every version it serves and runs tseal and python -m tensorseal.
wheels: setup
	JOBS=$(JOBS) bash scripts/wheels.sh

# The README's test command (and CI's): the suite, then the same C++ suite under
# ASan+UBSan and the threaded tests under TSan, then every fuzz target for
# FUZZ_SECONDS (default 30 s each, regression inputs replayed first), built in the
# ASan tree from the same library objects.
test: check
	JOBS=$(JOBS) bash scripts/sanitize.sh all
	FUZZ_BUILD=build-asan FUZZ_JOBS=$(JOBS) BUILD_JOBS=$(JOBS) bash scripts/fuzz.sh $(FUZZ_SECONDS)

# The suite alone (GoogleTest via ctest, then pytest): the quick loop while developing.
check: build
	cd $(BUILD) && ../$(VENV)/bin/ctest --output-on-failure -j $(JOBS)
	PYTHONPATH=$(BUILD)/python $(PY) -m pytest -q --durations=15 tests/py

# The main job from a fresh clone in minutes: set-up and build of only what it needs.
demo: build-demo
	PYTHONPATH=$(BUILD)/python $(PY) scripts/demo.py

bench: build
	PYTHONPATH=$(BUILD)/python $(PY) bench/run.py --size $(SIZE)
	OMP_NUM_THREADS=1 PYTHONPATH=$(BUILD)/python $(PY) -m torch.distributed.run --nproc_per_node 2 \
	  --standalone bench/dcp.py --size-mib $(if $(filter small,$(SIZE)),64,1024)
	PYTHONPATH=$(BUILD)/python $(PY) bench/dirs.py --size-mib $(if $(filter small,$(SIZE)),128,2048)

fuzz: setup
	FUZZ_JOBS=$(JOBS) BUILD_JOBS=$(JOBS) bash scripts/fuzz.sh $(FUZZ_SECONDS)

# ASan+UBSan build of the whole ctest suite (build-asan/), then the concurrency test
# under TSan (build-tsan/). SANITIZE=address|thread|all
SANITIZE ?= all
sanitize: setup
	JOBS=$(JOBS) bash scripts/sanitize.sh $(SANITIZE)

# Formats every C++ file with .clang-format (tests/py/test_style.py checks).
format: setup
	bash scripts/format.sh

clean:
	rm -rf $(BUILD) build-*
