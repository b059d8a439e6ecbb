# sketchd — the two commands a newcomer needs are `make demo` and `make test`.
# Both install whatever Debian packages are missing (scripts/install-deps.sh) first.

JOBS      ?= $(shell nproc)
BUILD     ?= build
ASAN      ?= build-asan
TSAN      ?= build-tsan
FUZZ      ?= build-fuzz
FUZZ_SECONDS ?= 60
CMAKE_ARGS ?=

.PHONY: all deps build build-asan build-tsan test test-all test-unit demo package bench bench-peers fuzz format clean

all: build

deps:
	@bash scripts/install-deps.sh

# Each build target configures its directory first, every time: on a configured directory
# that takes a second or two and changes nothing, and it cannot be skipped wrongly — after
# an interrupted or failed configure (CMake writes CMakeCache.txt even then), or in a
# directory configured earlier with other options (the tests switched off, as
# `scripts/install-deps.sh --build-only` suggests): the options given here are set again.
# The recipes run after `deps`, so cmake is installed by then, under `make -j` too.
CONFIGURE = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DSKETCHD_BUILD_TESTS=ON -DSKETCHD_BUILD_BENCH=ON $(CMAKE_ARGS)

build: deps
	$(CONFIGURE)
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DSKETCHD_SANITIZE=address,undefined \
	  -DSKETCHD_BUILD_TESTS=ON -DSKETCHD_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build $(ASAN) -j $(JOBS)

build-tsan: deps
	cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=Debug -DSKETCHD_SANITIZE=thread \
	  -DSKETCHD_BUILD_TESTS=ON -DSKETCHD_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build $(TSAN) -j $(JOBS)

# What a newcomer runs: every test (unit, cli, integration and static tests) on the optimised
# build, and the unit and cli tests again under AddressSanitizer and UndefinedBehaviorSanitizer
# and the unit tests under ThreadSanitizer (the daemon's threads: processing, polling, HTTP
# workers, librdkafka's callbacks). `make test-all` adds the sanitizer builds' integration
# runs; CI runs both.
# The integration tests spend most of their time waiting (for a consumer group to form, a
# session to expire, a signal's stop) and little of it on the CPU, so they run ITEST_JOBS
# at a time, the other tests JOBS at a time; the longest start first (their COST).
# --no-tests=error: a build without tests fails, never passes;
# SKETCHD_REQUIRE_TOOLS=1: a test whose tool (kcat, promtool…) is missing fails instead of
# being skipped, since `deps` installs every one.
ITEST_JOBS ?= $(shell echo $$((3 * $(JOBS))))
CTEST = SKETCHD_REQUIRE_TOOLS=1 ctest --output-on-failure --no-tests=error

test: build build-asan build-tsan
	cd $(BUILD) && $(CTEST) -j $(JOBS) -LE integration
	cd $(BUILD) && $(CTEST) -j $(ITEST_JOBS) -L integration
	cd $(ASAN) && $(CTEST) -j $(JOBS) -LE 'static|integration'
	cd $(TSAN) && $(CTEST) -j $(JOBS) -L unit

# The integration tests again under the sanitizers, after `make test`: the real daemon
# against a live broker under AddressSanitizer and UndefinedBehaviorSanitizer, then under
# ThreadSanitizer.
test-all: build-asan build-tsan
	cd $(ASAN) && $(CTEST) -j $(ITEST_JOBS) -L integration
	cd $(TSAN) && $(CTEST) -j $(ITEST_JOBS) -L integration

test-unit: build
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) -L unit

# The demo needs the daemon only: the tests and benchmarks are built by `make test` and
# `make bench`, in the same directory with the same options.
demo: deps
	$(CONFIGURE)
	cmake --build $(BUILD) -j $(JOBS) --target sketchd
	$(BUILD)/daemon/sketchd run --config config/demo.yaml

# The Debian package, sketchd_VERSION-1_ARCH.deb in $(BUILD): the two binaries of the
# optimised build, the configuration as a conffile, the hardened systemd unit, the
# dashboards and the alert rules (cmake/Packaging.cmake; docs/OPERATIONS.md, "Installing
# the package"). Like the demo, it builds only what it needs. Its Depends are Debian's
# runtime packages, as dpkg-shlibdeps finds them: install it with `apt install ./FILE.deb`.
package: deps
	$(CONFIGURE)
	cmake --build $(BUILD) -j $(JOBS) --target sketchd sketch_cli
	cd $(BUILD) && cpack -G DEB
	@echo "package: $$(ls -t $(BUILD)/sketchd_*.deb | head -n 1)"

bench: build
	bash bench/run.sh $(BUILD)

# The library beside its peers (fastfilter_cpp, Apache DataSketches), built from their public
# sources in a build directory of its own; needs git and network access the first time.
bench-peers: deps
	bash bench/peers.sh build-peers

# Each fuzz target of tests/fuzz/ for FUZZ_SECONDS under libFuzzer, with AddressSanitizer
# and UndefinedBehaviorSanitizer (clang; installs Debian's clang if missing). Not part of
# `make test`, which replays the targets' corpora instead. Details in tests/fuzz/run.sh.
fuzz:
	@bash scripts/install-deps.sh --fuzz
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSKETCHD_FUZZ=ON -DSKETCHD_JEMALLOC=OFF \
	  -DSKETCHD_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build $(FUZZ) -j $(JOBS) --target library_records_fuzz config_fuzz extractor_fuzz \
	  http_fuzz http_connection_fuzz snapshot_fuzz values_fuzz
	bash tests/fuzz/run.sh $(FUZZ) $(FUZZ_SECONDS)

# The C++ sources in the style of .clang-format (needs Debian's clang-format, which the
# build does not).
format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN) $(TSAN) $(FUZZ)
