# Thin wrappers: each target bootstraps, configures, builds and runs.
PRESET ?= release
WERROR := $(if $(CI),ON,OFF)
BUILD := build/$(PRESET)
BIN := $(BUILD)/graph-autofusion
# Spinning OpenMP workers collapse when the cores are shared (measured 10-40x slower under load on the 2-core
# development VM); sleep at barriers unless the caller chose otherwise.
export OMP_WAIT_POLICY ?= passive

.PHONY: setup configure build demo test test-asan bench bench-peers clean

setup:
	@bash scripts/bootstrap.sh

configure: setup
	@cmake --preset $(PRESET) -DGAF_WERROR=$(WERROR) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j$$(nproc)

demo: build
	@$(BIN) demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -j1

test-asan:
	@$(MAKE) --no-print-directory test PRESET=asan

bench: build
	@$(BUILD)/bench/gaf_fusion_bench
	@$(BUILD)/bench/gaf_bench

# Side by side with ONNX Runtime (onnxruntime-node, installed into bench/peers/node_modules).
bench-peers: build
	@bash bench/peers/install.sh && bash bench/peers/run.sh $(BIN)

clean:
	rm -rf build
