# Thin wrappers: each target bootstraps, configures, builds and runs.
PRESET ?= release
WERROR := $(if $(CI),ON,OFF)
BUILD := build/$(PRESET)
BIN := $(BUILD)/graph-autofusion
# OpenMP workers spin a bounded while at barriers, then sleep: unbounded spinning collapses when the cores are
# shared (10-40x slower under heavy load on the 2-core VM), and sleeping at once (OMP_WAIT_POLICY=passive) costs a
# wake-up per kernel (mobilenet_v2: 4.4 ms spinning, 11.5 ms passive; 4.4 ms with this bound). A caller's
# OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
export GOMP_SPINCOUNT ?= 10000

.PHONY: setup configure build demo test test-asan soak bench bench-peers bench-llm python device-bundle fuzz clean

setup:
	@bash scripts/bootstrap.sh

configure: setup
	@cmake --preset $(PRESET) -DGAF_WERROR=$(WERROR) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j$$(nproc)

# Only the CLI: a cold `make demo` need not wait for the tests and benchmarks.
demo: configure
	@cmake --build --preset $(PRESET) -j$$(nproc) --target graph-autofusion
	@$(BIN) demo

# As many tests at a time as there are cores: one test at a time used 1.2 of 2 cores (a cold run of the unit tests
# compiles its generated kernels one at a time).
test: build
	@cd $(BUILD) && ctest --output-on-failure -j$$(nproc)

test-asan:
	@$(MAKE) --no-print-directory test PRESET=asan

# Long correctness runs (scripts/soak.sh): 10,000 random graphs, the conformance models at opt levels 0-3 and under
# random rules files; SOAK_GRAPHS / SOAK_RULES size it.
soak: build
	@bash scripts/soak.sh $(BUILD)

bench: build
	@$(BUILD)/bench/gaf_fusion_bench
	@$(BUILD)/bench/gaf_op_bench
	@$(BUILD)/bench/gaf_block_bench
	@$(BUILD)/bench/gaf_bench

# Side by side with ONNX Runtime (onnxruntime-node, installed into bench/peers/node_modules).
bench-peers: build
	@bash bench/peers/install.sh && bash bench/peers/run.sh $(BIN)

python: configure
	@cmake --build --preset $(PRESET) --target _core

bench-llm: build
	@bash bench/peers/install.sh && bash bench/llm/run.sh

# libFuzzer targets (fuzz/): clang with AddressSanitizer and UBSan in build/fuzz, each target run FUZZ_SECONDS on
# its corpus (seeded from the test models, the ONNX conformance models and fuzz/corpus); findings land in
# build/fuzz/findings.
FUZZ_SECONDS ?= 60
fuzz: setup
	@CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGAF_FUZZ=ON \
	  -DGAF_SANITIZE=ON -DGAF_NATIVE=OFF -DGAF_CUDA=OFF >/dev/null
	@cmake --build build/fuzz -j$$(nproc) --target gaf_fuzz_onnx_loader gaf_fuzz_onnx_text gaf_fuzz_emitter \
	  gaf_fuzz_rules gaf_fuzz_target gaf_fuzz_tensor_proto \
	  gaf_make_test_models
	@bash fuzz/run.sh build/fuzz $(FUZZ_SECONDS)

# The binary and its non-CUDA libraries for the lent GPU machine (.device/bundle.tar.xz; bench/cuda/README.md): built
# without -march=native, since that machine's processor may lack this one's vector extensions.
device-bundle: setup
	@cmake -S . -B build/device -G Ninja -DCMAKE_BUILD_TYPE=Release -DGAF_NATIVE=OFF >/dev/null
	@cmake --build build/device -j$$(nproc) --target graph-autofusion
	@bash tools/device/pack.sh build/device/graph-autofusion .device

clean:
	rm -rf build
