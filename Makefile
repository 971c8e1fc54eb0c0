# corepool's front door. `make run` and `make test` are the two commands the
# README opens with; both install Debian dependencies first (scripts/install-deps.sh).
BUILD    ?= build
TYPE     ?= RelWithDebInfo
PREFIX   ?= /usr/local
DESTDIR  ?=
JOBS     ?= $(shell nproc)
CTEST_ARGS ?=

CMAKE_FLAGS = -DCMAKE_BUILD_TYPE=$(TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

.PHONY: all deps configure build run train test test-long test-slurm test-systemd deb install clean model bench bench-quick bench-silero bench-memory bench-ring bench-serve bench-grpc bench-soak bench-all bench-streams

all: build

deps:
	bash scripts/install-deps.sh

# Re-run every time (a second or two) so that PREFIX and TYPE always apply.
configure:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS) -- --no-print-directory

# The main job: tag the demo audio (speech, music, noise, silence with known
# boundaries) with the bundled trained model and print its timeline.
run: deps build
	@mkdir -p $(BUILD)/demo
	$(BUILD)/tools/corepool-gen-audio --demo --out $(BUILD)/demo/demo.wav
	$(BUILD)/supervisor/corepool batch --force --format timeline --out - $(BUILD)/demo/demo.wav

# --no-tests=error: a filter or a build that finds no test fails. The skipped
# tests and their reasons are listed after ctest, pass or fail; make's exit
# status stays ctest's.
test: deps build
	cd $(BUILD) && ctest --no-tests=error --output-on-failure -j$(JOBS) $(CTEST_ARGS); status=$$?; \
	  bash $(CURDIR)/scripts/list-skipped-tests.sh .; exit $$status

# The Slurm recipe for real: munged, slurmctld and slurmd on localhost, a job
# array of deploy/slurm/corepool-array.sbatch, its results against one
# unsharded run (as root or via sudo; ~2 min here). Fails, naming the reason,
# if Slurm cannot start.
test-slurm: deps build
	bash tests/slurm/run.sh $(BUILD)

# The LibTorch-free code under ASan+UBSan and TSan (clang), then every libFuzzer
# target of tests/fuzz for FUZZ_SECONDS (default 60) each, two at a time.
# Own build dirs (build-asan, build-tsan); see scripts/test-sanitizers.sh.
test-long: deps
	bash scripts/test-sanitizers.sh

# Benchmarks print figures (see bench/RESULTS.md); none of them passes or fails on timing.
# The full sweep (modes x workers x intra-op x allocator; ~20 min on 2 cpus),
# and the quick one (< 3 min): results.csv, results.json and PNG plots.
# They measure CNN10 (build/models/cnn10, generated at build time): a model whose
# forward() costs what a production tagger's does, unlike the small default.
CNN10 = $(BUILD)/models/cnn10

bench: deps build
	$(BUILD)/supervisor/corepool --log-level warn bench --model $(CNN10) --out $(BUILD)/bench-results

bench-quick: deps build
	$(BUILD)/supervisor/corepool --log-level warn bench --quick --model $(CNN10) --out $(BUILD)/bench-quick

# Silero VAD (build/models/silero-vad, when ../shared has the .jit) through
# `corepool batch` beside a Python baseline (bench/silero-bench.sh), which needs
# Debian's python3-torch: installed here, not by `make deps` (no test needs it).
bench-silero: build
	EXTRA_PACKAGES=python3-torch bash scripts/install-deps.sh
	bash bench/silero-bench.sh $(BUILD)

# Shared vs naive weights and respawn latency with a ~330 MB generated model.
bench-memory: deps build
	$(BUILD)/models/corepool-gen-model --out $(BUILD)/bench-model --width 8 --hidden 1200000
	$(BUILD)/supervisor/corepool --log-level warn bench --memory --respawn --model $(BUILD)/bench-model

# Every table of bench/RESULTS.md again, each file headed by its commit and
# command (bench/run-all.sh; 10-18 min on 2 cpus, FULL=1 adds the full sweep and
# the soak): $(BUILD)/bench-all/*.txt. Never part of `make test`.
bench-all: deps build
	BUILD=$(BUILD) bash bench/run-all.sh

bench-ring: deps build
	$(BUILD)/bench/corepool-ring-bench

# The HTTP service: READY time, latency over its own floor, wrk throughput.
bench-serve: deps build
	$(BUILD)/models/corepool-gen-model --out $(BUILD)/tiny-model --width 4
	$(BUILD)/bench/corepool-serve-bench --corepool $(BUILD)/supervisor/corepool --model $(CNN10) \
	  --latency-model $(BUILD)/tiny-model

# gRPC ModelInfer against HTTP's binary extension, each minus the workers' forward().
bench-grpc: deps build
	$(BUILD)/models/corepool-gen-model --out $(BUILD)/tiny-model --width 4
	$(BUILD)/bench/corepool-grpc-bench --corepool $(BUILD)/supervisor/corepool --model $(BUILD)/tiny-model

# Real-time 16 kHz WebSocket streams 2 cores sustain, p50 / p99 decision time:
# the default model and CNN10 (lag bounded), Silero VAD (and p99 < 100 ms) when
# build/models/silero-vad is there; thread and process mode (bench/streams_bench.cc; template in bench/RESULTS.md).
# STREAMS_SECONDS per run (default 20); about 10 runs per model and mode.
STREAMS_SECONDS ?= 20
bench-streams: deps build
	$(BUILD)/bench/corepool-streams-bench --corepool $(BUILD)/supervisor/corepool --model models/default \
	  --seconds $(STREAMS_SECONDS) --start-k 16
	$(BUILD)/bench/corepool-streams-bench --corepool $(BUILD)/supervisor/corepool --model $(CNN10) \
	  --seconds $(STREAMS_SECONDS) --start-k 2
	if [ -f $(BUILD)/models/silero-vad/model.pt ]; then \
	  $(BUILD)/bench/corepool-streams-bench --corepool $(BUILD)/supervisor/corepool --model $(BUILD)/models/silero-vad \
	    --seconds $(STREAMS_SECONDS) --start-k 32 --p99-bound-ms 100; \
	else echo "Silero VAD skipped: $(BUILD)/models/silero-vad/model.pt not found"; fi

# RSS/PSS over two hours of audio through POST /v1/audio:tag, jemalloc vs glibc,
# both modes (~15 min here): tables on stdout, CSVs and soak-memory.png in $(BUILD)/soak.
bench-soak: deps build
	$(BUILD)/bench/corepool-soak-bench --corepool $(BUILD)/supervisor/corepool --model $(CNN10) \
	  --out $(BUILD)/soak

# Retrain the default tagger (models/default/model.pt, committed) from the
# synthesized classes and real recordings out of Debian packages, then judge it
# on the held-out recordings (models/README.md). fetch-sources.sh downloads the
# packages with apt-get download (about 2.9 GB, checked against their sha256)
# into REAL_AUDIO. One network per seed of TRAIN_SEEDS (deterministic, one
# thread and about 3 GB each, JOBS at a time, 8-11 min each on a Zen 4; logs in
# $(BUILD)/train/seed-N/train.log), then the model is their average
# (--members), scored beside each of them on the real validation segments.
REAL_AUDIO ?= $(BUILD)/real-audio
TRAIN_ARGS ?=
TRAIN_SEEDS ?= 1 2 3 4 5
TRAINER = $(BUILD)/models/train/corepool-train-tagger
train: deps configure
	bash models/data/fetch-sources.sh $(REAL_AUDIO)
	cmake --build $(BUILD) -j$(JOBS) --target corepool corepool-train-tagger -- --no-print-directory
	for s in $(TRAIN_SEEDS); do mkdir -p $(BUILD)/train/seed-$$s && cp models/default/model.toml $(BUILD)/train/seed-$$s/; done
	printf '%s\n' $(TRAIN_SEEDS) | xargs -P $(JOBS) -I{} sh -c '$(TRAINER) --out $(BUILD)/train/seed-{} \
	  --real $(REAL_AUDIO) --seed {} $(TRAIN_ARGS) >$(BUILD)/train/seed-{}/train.log 2>&1 \
	  || { tail -n 20 $(BUILD)/train/seed-{}/train.log; exit 255; }'
	$(TRAINER) --out models/default --real $(REAL_AUDIO) --members $(foreach s,$(TRAIN_SEEDS),$(BUILD)/train/seed-$(s)/model.pt)
	python3 models/data/judge.py --corepool $(BUILD)/supervisor/corepool --model models/default $(REAL_AUDIO)

model: train

# The Debian package, build/corepool_<version>_amd64.deb (cmake/package.cmake):
# the build tree configured for PREFIX=/usr, only the installed programs built,
# then CPack and lintian (errors fail; README lists the warnings kept).
DEB_TARGETS = corepool corepool-gen-model corepool-gen-audio manpages

deb: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) -DCMAKE_INSTALL_PREFIX=/usr
	cmake --build $(BUILD) -j$(JOBS) --target $(DEB_TARGETS) -- --no-print-directory
	cd $(BUILD) && cpack -G DEB
	lintian --fail-on error $(BUILD)/corepool_*_amd64.deb

# The package under a real systemd: a bookworm container (systemd-nspawn, root
# cached in $(BUILD)/systemd-root.tar) boots, installs the .deb with apt-get and
# drives the units through each check of tests/systemd/run_container.sh (root).
test-systemd: deps deb
	bash tests/systemd/run_container.sh $(BUILD)

install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
