# Thin wrapper over CMake. `make test` and `make demo` each start from nothing.
# Builds use Ninja (it starts a target's compiles before the libraries it links
# are archived) unless BUILD_DIR was already configured with another generator,
# and compile through ccache (cmake/ccache.cmake), whose cache outlives clones.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
GENERATOR = $(if $(wildcard $(BUILD_DIR)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja,))

.PHONY: all deps configure build test demo bench format clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The demo needs the `oar` binary alone: its libraries, not the tests and benches.
demo: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target oar
	@$(BUILD_DIR)/cli/oar launch --pservers 2 --trainers 2 --model fashion_mlp

# The C++ lines changed since the tree was formatted, rewritten to .clang-format
# (CI checks them: scripts/check-format.sh).
format:
	@bash scripts/check-format.sh --fix

bench: build
	@$(BUILD_DIR)/bench/executor_bench
	@$(BUILD_DIR)/bench/conv_bench
	@$(BUILD_DIR)/bench/parallel_executor_bench
	@$(BUILD_DIR)/bench/rpc_bench 2>/dev/null
	@$(BUILD_DIR)/bench/dist_step_bench 2>/dev/null
	@$(BUILD_DIR)/bench/collective_bench 2>/dev/null
	@$(BUILD_DIR)/bench/elastic_bench 2>/dev/null
	@$(BUILD_DIR)/bench/elastic_accuracy_bench 2>/dev/null
	@$(BUILD_DIR)/bench/ctr_bench
	@$(BUILD_DIR)/bench/async_modes_bench
	@if [ "$$(id -u)" = 0 ]; then bash bench/scaling_bench.sh $(BUILD_DIR)/cli/oar; fi
	@if [ -x $(BUILD_DIR)/bench/gpu_bench ]; then $(BUILD_DIR)/bench/gpu_bench; fi
	@python3 bench/paddle_program_bench.py --oar $(BUILD_DIR)/cli/oar

clean:
	rm -rf $(BUILD_DIR)
