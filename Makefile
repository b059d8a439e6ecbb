# sketchd — the two commands a newcomer needs are `make demo` and `make test`.
# Both install whatever Debian packages are missing (scripts/install-deps.sh) first.

JOBS      ?= $(shell nproc)
BUILD     ?= build
ASAN      ?= build-asan
TSAN      ?= build-tsan
FUZZ      ?= build-fuzz
FUZZ_SECONDS ?= 60
CMAKE_ARGS ?=

.PHONY: all deps build build-asan build-tsan test test-unit demo bench fuzz format clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(ASAN)/CMakeCache.txt:
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DSKETCHD_SANITIZE=address,undefined \
	  -DSKETCHD_BUILD_BENCH=OFF $(CMAKE_ARGS)

build-asan: deps $(ASAN)/CMakeCache.txt
	cmake --build $(ASAN) -j $(JOBS)

$(TSAN)/CMakeCache.txt:
	cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=Debug -DSKETCHD_SANITIZE=thread \
	  -DSKETCHD_BUILD_BENCH=OFF $(CMAKE_ARGS)

build-tsan: deps $(TSAN)/CMakeCache.txt
	cmake --build $(TSAN) -j $(JOBS)

# Every test: unit, cli, integration and static tests on the optimised build; all but the
# static ones (checks of the dashboards and deployment files) again under
# AddressSanitizer and UndefinedBehaviorSanitizer; the unit and integration tests again
# under ThreadSanitizer (the daemon's threads: processing, polling, HTTP workers,
# librdkafka's callbacks).
test: build build-asan build-tsan
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(ASAN) && ctest --output-on-failure -j $(JOBS) -LE static
	cd $(TSAN) && ctest --output-on-failure -j $(JOBS) -L 'unit|integration'

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

demo: build
	$(BUILD)/daemon/sketchd run --config config/demo.yaml

bench: build
	bash bench/run.sh $(BUILD)

# Each fuzz target of tests/fuzz/ for FUZZ_SECONDS under libFuzzer, with AddressSanitizer
# and UndefinedBehaviorSanitizer (clang; installs Debian's clang if missing). Not part of
# `make test`, which replays the targets' corpora instead. Details in tests/fuzz/run.sh.
$(FUZZ)/CMakeCache.txt:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSKETCHD_FUZZ=ON -DSKETCHD_JEMALLOC=OFF \
	  -DSKETCHD_BUILD_BENCH=OFF $(CMAKE_ARGS)

fuzz:
	@bash scripts/install-deps.sh --fuzz
	$(MAKE) $(FUZZ)/CMakeCache.txt
	cmake --build $(FUZZ) -j $(JOBS) --target library_records_fuzz config_fuzz extractor_fuzz \
	  http_fuzz snapshot_fuzz values_fuzz
	bash tests/fuzz/run.sh $(FUZZ) $(FUZZ_SECONDS)

# The C++ sources in the style of .clang-format (needs Debian's clang-format, which the
# build does not).
format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN) $(TSAN) $(FUZZ)
