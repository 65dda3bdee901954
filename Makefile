# Thin wrapper over CMake. `make test` and `make demo` each start from nothing.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test demo bench clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The demo needs the `oar` binary alone: its libraries, not the tests and benches.
demo: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target oar
	@$(BUILD_DIR)/cli/oar launch --pservers 2 --trainers 2 --model fashion_mlp

bench: build
	@$(BUILD_DIR)/bench/executor_bench
	@$(BUILD_DIR)/bench/conv_bench
	@$(BUILD_DIR)/bench/parallel_executor_bench
	@$(BUILD_DIR)/bench/rpc_bench 2>/dev/null
	@$(BUILD_DIR)/bench/dist_step_bench 2>/dev/null
	@$(BUILD_DIR)/bench/collective_bench 2>/dev/null
	@$(BUILD_DIR)/bench/ctr_bench
	@if [ -x $(BUILD_DIR)/bench/gpu_bench ]; then $(BUILD_DIR)/bench/gpu_bench; fi
	@python3 bench/paddle_program_bench.py --oar $(BUILD_DIR)/cli/oar

clean:
	rm -rf $(BUILD_DIR)
