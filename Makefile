# tensorseal — the two commands: `make demo` and `make test`. Each does all set-up.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BUILD := build
JOBS ?= 2
SIZE ?= full
FUZZ_SECONDS ?= 30

.PHONY: setup build test test-cpp test-py demo bench fuzz sanitize clean python

setup:
	bash scripts/setup.sh

$(BUILD)/build.ninja: CMakeLists.txt
	$(VENV)/bin/cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: setup $(BUILD)/build.ninja
	$(VENV)/bin/cmake --build $(BUILD) -j $(JOBS)

python: setup
	$(PY) -m pip install -q --no-build-isolation ./ 

test: build python
	cd $(BUILD) && ../$(VENV)/bin/ctest --output-on-failure -j $(JOBS)
	$(PY) -m pytest -q tests/py

demo: build python
	$(PY) scripts/demo.py

bench: build python
	$(PY) bench/run.py --size $(SIZE)

fuzz: setup
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

# ASan+UBSan build of the whole ctest suite (build-asan/), then the concurrency test
# under TSan (build-tsan/). SANITIZE=address|thread|all
SANITIZE ?= all
sanitize: setup
	bash scripts/sanitize.sh $(SANITIZE)

clean:
	rm -rf $(BUILD) build-*
