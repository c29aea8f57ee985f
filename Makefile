# tensorseal — the two commands: `make demo` and `make test`. Each does all set-up.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BUILD := build
# Build and test jobs: the machine's cores, at most 8 (a clang ASan compile takes ~1.5 GiB).
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$((n > 8 ? 8 : n)))
SIZE ?= full
FUZZ_SECONDS ?= 30

.PHONY: setup build test check demo bench fuzz sanitize clean python wheels format

setup:
	bash scripts/setup.sh

# One build of the library serves the C++ tests, the CLI and the Python extension
# (staged in $(BUILD)/python: PYTHONPATH=$(BUILD)/python imports it).
$(BUILD)/build.ninja: CMakeLists.txt Makefile
	$(VENV)/bin/cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTENSORSEAL_PYTHON=ON -DPython_EXECUTABLE=$(abspath $(PY))

build: setup $(BUILD)/build.ninja
	$(VENV)/bin/cmake --build $(BUILD) -j $(JOBS)

# Installs the package into .venv like a user's `pip install .` (a separate build).
python: setup
	$(PY) -m pip install -q --no-build-isolation ./

# Repaired (auditwheel) wheels for every CPython 3.9-3.13 on the machine into dist/: one
# cp312-abi3 wheel for 3.12+, one each for 3.9-3.11; each is then installed into a fresh
# venv of every version it serves and runs tseal and python -m tensorseal.
wheels: setup
	JOBS=$(JOBS) bash scripts/wheels.sh

# The README's test command (and CI's): the suite, then the same C++ suite under
# ASan+UBSan and the concurrency test under TSan, then every fuzz target for
# FUZZ_SECONDS (default 30 s each, regression inputs replayed first).
test: check
	JOBS=$(JOBS) bash scripts/sanitize.sh all
	FUZZ_JOBS=$(JOBS) BUILD_JOBS=$(JOBS) bash scripts/fuzz.sh $(FUZZ_SECONDS)

# The suite alone (GoogleTest via ctest, then pytest): the quick loop while developing.
check: build
	cd $(BUILD) && ../$(VENV)/bin/ctest --output-on-failure -j $(JOBS)
	PYTHONPATH=$(BUILD)/python $(PY) -m pytest -q tests/py

demo: build
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

# Rewraps C++ lines over 120 columns with .clang-format (tests/py/test_style.py checks).
format: setup
	bash scripts/format.sh

clean:
	rm -rf $(BUILD) build-*
