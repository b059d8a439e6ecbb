// The `sketch` commands (DESIGN.md, "sketch command"): each takes its options as parsed
// and returns the exit status; a bad argument throws usage_error (exit status 2), a
// failure to read or write std::exception (exit status 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sketch::cli {

struct size_options {
  std::string items;
  std::optional<double> fpr;
  std::string layout = "blocked";
  // The compressed layout only: a budget instead of --fpr, and the array's bound.
  std::optional<double> transmitted_bits_per_item;
  double max_bits_per_item = 64;
};

// `sketch size`: prints bits, bytes, hashes, bits_per_item and fpr of a filter for
// --items at --fpr; for the compressed layout (sized for transmission, Mitzenmacher 2002)
// also transmitted_bits_per_item and transmitted_bytes, at --fpr or within
// --transmitted-bits-per-item.
[[nodiscard]] int run_size(const size_options& o);

struct fpr_options {
  std::string bits;
  std::string items;
  std::optional<std::uint32_t> hashes;
  std::string layout = "classic";
};

// `sketch fpr`: prints the false-positive probability of M bits, N items, K hashes.
[[nodiscard]] int run_fpr(const fpr_options& o);

struct dedup_options {
  std::string items = "10M";
  std::optional<double> fpr;
  std::optional<double> bits_per_item;
  std::optional<std::uint32_t> hashes;
  std::optional<std::string> layout;  // blocked, or classic when --hashes is given
  std::vector<std::string> files;
};

// `sketch dedup`: prints each line the first time the filter sees it.
[[nodiscard]] int run_dedup(const dedup_options& o);

struct topk_options {
  std::uint32_t k = 10;
  double epsilon = 0.0001;
  double delta = 0.001;
  std::vector<std::string> files;
};

// `sketch topk`: prints the K most frequent lines as ESTIMATE<TAB>ITEM, highest first.
[[nodiscard]] int run_topk(const topk_options& o);

struct compressed_options {
  double bits_per_item = 0;
  std::uint32_t hashes = 0;
  std::optional<std::string> items;
};

// `sketch compressed`: a compressed Bloom filter of --bits-per-item array bits per item and
// --hashes hash functions (Mitzenmacher 2002, seed 002): prints fpr and
// entropy_bits_per_item from the formulas; with --items N also compressed_bits_per_item and
// measured_fpr of a filter of N random items, Golomb-coded by the library.
[[nodiscard]] int run_compressed(const compressed_options& o);

}  // namespace sketch::cli
