# corepool's front door. `make run` and `make test` are the two commands the
# README opens with; both install Debian dependencies first (scripts/install-deps.sh).
BUILD    ?= build
TYPE     ?= RelWithDebInfo
PREFIX   ?= /usr/local
DESTDIR  ?=
JOBS     ?= $(shell nproc)
CTEST_ARGS ?=

CMAKE_FLAGS = -DCMAKE_BUILD_TYPE=$(TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

.PHONY: all deps configure build run test test-long install clean model bench bench-quick bench-memory bench-ring bench-serve bench-soak

all: build

deps:
	bash scripts/install-deps.sh

# Re-run every time (a second or two) so that PREFIX and TYPE always apply.
configure:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS) -- --no-print-directory

# The main job: tag the bundled demo audio with the bundled default model.
run: deps build
	@mkdir -p $(BUILD)/demo
	$(BUILD)/tools/corepool-gen-audio --demo --out $(BUILD)/demo/demo.wav
	$(BUILD)/supervisor/corepool batch --force --out - $(BUILD)/demo/demo.wav

test: deps build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) $(CTEST_ARGS)

# The LibTorch-free code under ASan+UBSan and TSan (clang), then every libFuzzer
# target of tests/fuzz for FUZZ_SECONDS (default 60) each, two at a time.
# Own build dirs (build-asan, build-tsan); see scripts/test-sanitizers.sh.
test-long: deps
	bash scripts/test-sanitizers.sh

# Benchmarks print figures (see bench/RESULTS.md); none of them passes or fails on timing.
# The full sweep (modes x workers x intra-op x allocator; ~20 min on 2 cpus),
# and the quick one (< 3 min): results.csv, results.json and PNG plots.
bench: deps build
	$(BUILD)/supervisor/corepool --log-level warn bench --out $(BUILD)/bench-results

bench-quick: deps build
	$(BUILD)/supervisor/corepool --log-level warn bench --quick --out $(BUILD)/bench-quick

# Shared vs naive weights and respawn latency with a ~330 MB generated model.
bench-memory: deps build
	$(BUILD)/models/corepool-gen-model --out $(BUILD)/bench-model --width 8 --hidden 1200000
	$(BUILD)/supervisor/corepool --log-level warn bench --memory --respawn --model $(BUILD)/bench-model

bench-ring: deps build
	$(BUILD)/bench/corepool-ring-bench

# The HTTP service: READY time, latency over its own floor, wrk throughput.
bench-serve: deps build
	$(BUILD)/models/corepool-gen-model --out $(BUILD)/tiny-model --width 4
	$(BUILD)/bench/corepool-serve-bench --corepool $(BUILD)/supervisor/corepool --model models/default \
	  --latency-model $(BUILD)/tiny-model

# RSS/PSS over two hours of audio through POST /v1/audio:tag, jemalloc vs glibc,
# both modes (~15 min here): tables on stdout, CSVs and soak-memory.png in $(BUILD)/soak.
bench-soak: deps build
	$(BUILD)/bench/corepool-soak-bench --corepool $(BUILD)/supervisor/corepool --model models/default \
	  --out $(BUILD)/soak

# Regenerate models/default/model.pt from its generator.
model: configure
	rm -f models/default/model.pt
	cmake --build $(BUILD) --target default_model

install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
