# Thin wrapper around CMake; the README's two commands are `make quickstart` and
# `make test`. Each installs what is missing (as root) and builds first.
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps configure build quickstart test bench experiments clean

all: build

deps:
	@tools/install-deps.sh

# Ninja (ninja-build) where installed: on 2 cores it keeps both busy where make's
# recursive dependency scanning leaves one waiting. A build folder keeps the
# generator it was configured with.
GENERATOR = $(if $(wildcard $(BUILD)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja))

configure: deps
	@cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The quickstart needs only the tandem binary and its policy worker, not the tests.
quickstart: configure
	@cmake --build $(BUILD) -j $(JOBS) --target tandem
	$(BUILD)/tandem run scripts/experiments/quickstart.lua

# PyTorch (Debian's python3-torch) for the tests that check tandem against it: the
# GPT's golden replay and params.safetensors loaded into the equivalent model.
# ctest -j counts quarter-cores (tests/CMakeLists.txt), and -j is six per core, half
# again what the cores hold: a test's count is its measured share rounded up, so the
# waiting tests overlap those that compute. On 2 cores: -j8 left the machine 85% busy
# (172 s), -j12 99% (151 s).
test: build
	@tools/install-deps.sh python3-torch
	cd $(BUILD) && ctest --output-on-failure -j $$(( 6 * $(JOBS) ))

bench: configure
	@tools/install-deps.sh python3-torch
	@cmake --build $(BUILD) -j $(JOBS) --target tandem_benchmarks
	tools/bench/run_all.sh $(BUILD)

# The papers' experiments (scripts/experiments/suite), each ending with a report and
# a comparison table; STUDY=name runs one. Not tests: the whole suite takes about a
# quarter of an hour on 2 cores (docs/results.md).
experiments: build
	python3 tools/experiments/run.py --build $(BUILD) $(STUDY)

clean:
	rm -rf $(BUILD)
