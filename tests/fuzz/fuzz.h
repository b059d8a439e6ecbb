// Shared by the fuzz targets of tests/fuzz/ (see its CMakeLists.txt for the two ways they
// are built: under libFuzzer, or with replay_main.cpp as a test over a corpus).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "sketch/serialize.h"

// A property every input must keep; a violation aborts, which the fuzzer reports with the
// input and a test replaying that input fails on.
#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (false)

// Whether the library verifies the checksums of the records it reads. A fuzzing build does
// not (see the top-level CMakeLists.txt): it then accepts a record whose nested records'
// checksums are wrong, and writes it back with the right ones, so a record read back is
// written back the same only up to those checksums.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
inline constexpr bool kChecksumsVerified = false;
#else
inline constexpr bool kChecksumsVerified = true;
#endif

// Whether every library record in `bytes` (every "SKCH" magic, and any such bytes that are
// not one) carries the current format version: a record of an older version the library
// still reads (sketch/serialize.h) is written back in the current one, so not the same.
inline bool all_current_version(std::string_view bytes) {
  for (std::size_t at = bytes.find("SKCH"); at != std::string_view::npos;
       at = bytes.find("SKCH", at + 1)) {
    if (at + 6 > bytes.size()) return false;
    const auto version = static_cast<unsigned>(static_cast<unsigned char>(bytes[at + 4])) |
                         static_cast<unsigned>(static_cast<unsigned char>(bytes[at + 5])) << 8;
    if (version != sketch::kFormatVersion) return false;
  }
  return true;
}

// The environment the configuration targets substitute ${VAR} from: SET and PORT are set,
// EMPTY is set to "", every other variable is unset.
inline std::optional<std::string> fuzz_env(std::string_view name) {
  if (name == "SET") return std::string("value");
  if (name == "PORT") return std::string("127.0.0.1:9464");
  if (name == "EMPTY") return std::string();
  return std::nullopt;
}
