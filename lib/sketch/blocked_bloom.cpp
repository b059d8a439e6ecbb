#include "sketch/blocked_bloom.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <new>
#include <stdexcept>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "sketch/serialize.h"

namespace sketch {
namespace {

constexpr std::uint64_t kMaxBlocks =
    blocked_bloom_filter::kMaxBits / blocked_bloom_filter::kBlockBits;

std::uint64_t checked_blocks(std::uint64_t bits) {
  if (bits < 1 || bits > blocked_bloom_filter::kMaxBits) {
    throw std::invalid_argument(
        fmt::format("blocked_bloom_filter: bits must be in [1, 2^40] (got {})", bits));
  }
  return (bits + blocked_bloom_filter::kBlockBits - 1) / blocked_bloom_filter::kBlockBits;
}

// ---- scalar path -------------------------------------------------------------------------

// Returns the number of bits it newly set (0..8): each word gets exactly one bit, so that is
// the number of words where it was clear.
std::uint32_t insert_scalar(std::uint32_t* block, std::uint32_t key) noexcept {
  return detail::blocked_bloom_test_and_insert_scalar(block, key);
}

bool contains_scalar(const std::uint32_t* block, std::uint32_t key) noexcept {
  return detail::blocked_bloom_contains_scalar(block, key);
}

// ---- AVX2 path ---------------------------------------------------------------------------
// Compiled for AVX2 by function attribute only, and called only when the CPU has it, so the
// binary still runs on any x86-64.

#if SKETCH_BLOCKED_BLOOM_AVX2

__attribute__((target("avx2"))) std::uint32_t insert_avx2(std::uint32_t* block,
                                                          std::uint32_t key) noexcept {
  return detail::blocked_bloom_test_and_insert_avx2(block, key);
}

__attribute__((target("avx2"))) bool contains_avx2(const std::uint32_t* block,
                                                   std::uint32_t key) noexcept {
  return detail::blocked_bloom_has_avx2(block, detail::blocked_bloom_mask_avx2(key));
}

#else

std::uint32_t insert_avx2(std::uint32_t* block, std::uint32_t key) noexcept {
  return insert_scalar(block, key);
}

bool contains_avx2(const std::uint32_t* block, std::uint32_t key) noexcept {
  return contains_scalar(block, key);
}

#endif

// ---- batches -----------------------------------------------------------------------------

// The loop of blocked_bloom_filter::test_and_insert(span, span), for one path, prefetching
// kPrefetchDistance items ahead or not at all (kPrefetch). Returns the number of bits it set.
// Always inlined into the two entry points below, so that the AVX2 one is compiled for AVX2 as a
// whole and inlines its per-item body (no call per item).
template <bool kAvx2, bool kPrefetch>
[[gnu::always_inline]] inline std::uint64_t test_and_insert_loop(std::uint32_t* words,
                                                                 std::uint64_t blocks,
                                                                 const hash128* hashes,
                                                                 bool* present,
                                                                 std::size_t n) noexcept {
  constexpr std::size_t kAhead = blocked_bloom_filter::kPrefetchDistance;
  constexpr std::uint64_t kWords = blocked_bloom_filter::kWordsPerBlock;
  if constexpr (kPrefetch) {
    const std::size_t warm = std::min(n, kAhead);
    for (std::size_t i = 0; i < warm; ++i) {
      __builtin_prefetch(words + reduce(hashes[i].high, blocks) * kWords, 1, 3);
    }
  }
  std::uint64_t added = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (kPrefetch && i + kAhead < n) {
      __builtin_prefetch(words + reduce(hashes[i + kAhead].high, blocks) * kWords, 1, 3);
    }
    std::uint32_t* block = words + reduce(hashes[i].high, blocks) * kWords;
    const auto key = static_cast<std::uint32_t>(hashes[i].low);
    std::uint32_t gained;
#if SKETCH_BLOCKED_BLOOM_AVX2
    if constexpr (kAvx2) {
      gained = detail::blocked_bloom_test_and_insert_avx2(block, key);
    } else {
      gained = detail::blocked_bloom_test_and_insert_scalar(block, key);
    }
#else
    gained = detail::blocked_bloom_test_and_insert_scalar(block, key);
#endif
    present[i] = gained == 0;
    added += gained;
  }
  return added;
}

std::uint64_t test_and_insert_batch_scalar(std::uint32_t* words, std::uint64_t blocks,
                                           const hash128* hashes, bool* present, std::size_t n,
                                           bool prefetch) noexcept {
  return prefetch ? test_and_insert_loop<false, true>(words, blocks, hashes, present, n)
                  : test_and_insert_loop<false, false>(words, blocks, hashes, present, n);
}

#if SKETCH_BLOCKED_BLOOM_AVX2
__attribute__((target("avx2"), flatten)) std::uint64_t test_and_insert_batch_avx2(
    std::uint32_t* words, std::uint64_t blocks, const hash128* hashes, bool* present, std::size_t n,
    bool prefetch) noexcept {
  return prefetch ? test_and_insert_loop<true, true>(words, blocks, hashes, present, n)
                  : test_and_insert_loop<true, false>(words, blocks, hashes, present, n);
}
#else
std::uint64_t test_and_insert_batch_avx2(std::uint32_t* words, std::uint64_t blocks,
                                         const hash128* hashes, bool* present, std::size_t n,
                                         bool prefetch) noexcept {
  return test_and_insert_batch_scalar(words, blocks, hashes, present, n, prefetch);
}
#endif

// ---- false-positive rate -----------------------------------------------------------------

// log of the probability that a block holding i items answers a foreign query:
// 8 · ln(1 − (31/32)^i), −infinity for i = 0.
double log_block_fpr(double i) noexcept {
  const double log_keep = std::log1p(-1.0 / 32.0);
  return 8.0 * std::log(-std::expm1(i * log_keep));
}

// ln k! for a whole k >= 0: a sum of logs up to 64, beyond it Stirling's series
// k ln k − k + ln(2πk)/2 + 1/(12k) − 1/(360k³), whose error is below 1/(1260 k^5) < 1e-12.
// (std::lgamma is avoided: it writes the global signgam, so it is not thread-safe.)
double log_factorial(double k) noexcept {
  if (k <= 64.0) {
    double sum = 0.0;
    for (double j = 2.0; j <= k; j += 1.0) sum += std::log(j);
    return sum;
  }
  constexpr double kTwoPi = 6.283185307179586;
  return k * std::log(k) - k + 0.5 * std::log(kTwoPi * k) + 1.0 / (12.0 * k) -
         1.0 / (360.0 * k * k * k);
}

}  // namespace

double blocked_bloom_filter::fpr(double bits, double n) noexcept {
  if (!(n > 0)) return 0.0;
  const double blocks = std::max(1.0, std::ceil(bits / static_cast<double>(kBlockBits)));
  const double lambda = n / blocks;
  if (!(lambda > 0)) return 0.0;
  // From λ = 1500 on, 1 − FPR = E[1 − (1 − q^X)^8] <= 8 E[q^X] = 8 e^{−λ/32} < 1e-19 with
  // q = 31/32 (the Poisson generating function): the rate is 1 in double precision.
  if (lambda >= 1500.0) return 1.0;
  const double log_lambda = std::log(lambda);
  // Poisson log-probabilities by the recurrence ln p_{i+1} = ln p_i + ln λ − ln(i+1), both
  // ways from the mode i0 = ⌊λ⌋, where the terms are largest.
  const double mode = std::floor(lambda);
  const double log_p_mode = -lambda + mode * log_lambda - log_factorial(mode);
  constexpr double kRelative = 1e-17;  // below double precision
  double sum = 0.0;
  // Upward. For i >= λ the ratios p_{j+1}/p_j = λ/(j+1) are at most r = λ/(i+1) < 1 for
  // every j >= i, so the tail Σ_{j>i} p_j is at most p_i · r/(1 − r); each block rate is at
  // most 1, so once that bound is below 1e-17 · sum the rest cannot change the result.
  double log_p = log_p_mode;
  for (double i = mode;; i += 1.0) {
    sum += std::exp(log_p + log_block_fpr(i));
    if (i >= lambda) {
      const double r = lambda / (i + 1.0);
      if (std::exp(log_p) * r / (1.0 - r) <= kRelative * sum || log_p < -745.0) break;
    }
    log_p += log_lambda - std::log(i + 1.0);
  }
  // Downward. Below the mode both factors shrink as i does, so the i terms left below term
  // i sum to at most i · term_i.
  log_p = log_p_mode;
  for (double i = mode - 1.0; i >= 1.0; i -= 1.0) {
    log_p -= log_lambda - std::log(i + 1.0);
    const double term = std::exp(log_p + log_block_fpr(i));
    sum += term;
    if (i * term <= kRelative * sum) break;
  }
  // The 8 bits of an item come from the 32 bits of uint32(h.low): a query whose block holds
  // an item with the same 32 bits is always answered "present", which the independent-bits
  // term above counts only as (1 − (31/32)^i)^8 ≥ 2^-40. Over the block's i items that is
  // at most i · 2^-32 more, λ · 2^-32 in the mean: 2.3e-10 per item of load, negligible at
  // usual targets (λ ≈ 15 at 1e-3: 3.5e-9), but the floor of the rate for targets below
  // about 1e-9, which it keeps suggest_bits() from undersizing (a filter for 1,000 items at
  // 1e-12 was sized 17 times too small).
  return std::min(1.0, sum + lambda * 0x1p-32);
}

std::uint64_t blocked_bloom_filter::suggest_bits(std::uint64_t n, double p) {
  if (n < 1) {
    throw std::invalid_argument(
        fmt::format("blocked_bloom_filter: items must be at least 1 (got {})", n));
  }
  if (!(p > 0.0 && p < 1.0)) {
    throw std::invalid_argument(
        fmt::format("blocked_bloom_filter: fpr must be in (0, 1) (got {})", p));
  }
  const auto nd = static_cast<double>(n);
  const auto meets = [&](std::uint64_t blocks) {
    return fpr(static_cast<double>(blocks * kBlockBits), nd) <= p;
  };
  if (!meets(kMaxBlocks)) {
    throw std::invalid_argument(
        fmt::format("blocked_bloom_filter: {} items at fpr {} need more than 2^40 bits", n, p));
  }
  // Invariant: meets(hi), !meets(lo) or lo == 0.
  std::uint64_t lo = 0;
  std::uint64_t hi = kMaxBlocks;
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (meets(mid) ? hi : lo) = mid;
  }
  return hi * kBlockBits;
}

blocked_bloom_filter blocked_bloom_filter::for_capacity(std::uint64_t n, double fpr,
                                                        std::uint64_t seed, simd_path path) {
  return blocked_bloom_filter(suggest_bits(n, fpr), seed, path);
}

blocked_bloom_filter::blocked_bloom_filter(std::uint64_t bits, std::uint64_t seed, simd_path path)
    : blocks_(checked_blocks(bits)),
      seed_(seed),
      avx2_(path == simd_path::automatic && detail::cpu_has_avx2()) {
  words_.assign(blocks_ * kWordsPerBlock, 0);
}

void blocked_bloom_filter::test_and_insert(std::span<const hash128> hashes,
                                           std::span<bool> present) noexcept {
  const std::size_t n = std::min(hashes.size(), present.size());
  const bool prefetch = size_bytes() > detail::batch_prefetch_above_bytes();
  bits_set_ += avx2_ ? test_and_insert_batch_avx2(words_.data(), blocks_, hashes.data(),
                                                  present.data(), n, prefetch)
                     : test_and_insert_batch_scalar(words_.data(), blocks_, hashes.data(),
                                                    present.data(), n, prefetch);
}

void blocked_bloom_filter::insert(hash128 h) noexcept {
  std::uint32_t* block = block_of(h);
  const auto key = static_cast<std::uint32_t>(h.low);
  bits_set_ += avx2_ ? insert_avx2(block, key) : insert_scalar(block, key);
}

bool blocked_bloom_filter::contains(hash128 h) const noexcept {
  const std::uint32_t* block = block_of(h);
  const auto key = static_cast<std::uint32_t>(h.low);
  return avx2_ ? contains_avx2(block, key) : contains_scalar(block, key);
}

double blocked_bloom_filter::fill_ratio() const noexcept {
  return static_cast<double>(bits_set()) / static_cast<double>(bits());
}

double blocked_bloom_filter::estimated_items() const noexcept {
  return estimated_items(bits(), bits_set());
}

double blocked_bloom_filter::estimated_fpr() const noexcept {
  return estimated_fpr(bits(), bits_set());
}

double blocked_bloom_filter::estimated_items(std::uint64_t bits, std::uint64_t bits_set) noexcept {
  if (bits_set == bits) return std::numeric_limits<double>::infinity();
  const double m = static_cast<double>(bits);
  return -(m / kHashes) * std::log1p(-static_cast<double>(bits_set) / m);
}

double blocked_bloom_filter::estimated_fpr(std::uint64_t bits, std::uint64_t bits_set) noexcept {
  const double n = estimated_items(bits, bits_set);
  if (std::isinf(n)) return 1.0;
  return fpr(static_cast<double>(bits), n);
}

void blocked_bloom_filter::clear() noexcept {
  std::fill(words_.begin(), words_.end(), 0U);
  bits_set_ = 0;
  count_stale_ = false;
}

bool blocked_bloom_filter::compatible(const blocked_bloom_filter& other) const noexcept {
  return blocks_ == other.blocks_ && seed_ == other.seed_;
}

void blocked_bloom_filter::require_compatible(const blocked_bloom_filter& other,
                                              const char* operation) const {
  if (blocks_ != other.blocks_) {
    throw std::invalid_argument(
        fmt::format("blocked_bloom_filter::{}: incompatible filters: bits differ ({} vs {})",
                    operation, bits(), other.bits()));
  }
  if (seed_ != other.seed_) {
    throw std::invalid_argument(
        fmt::format("blocked_bloom_filter::{}: incompatible filters: seeds differ ({:#x} vs {:#x})",
                    operation, seed_, other.seed_));
  }
}

void blocked_bloom_filter::union_with(const blocked_bloom_filter& other) {
  require_compatible(other, "union_with");
  for (std::size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
  recount();
}

void blocked_bloom_filter::intersect_with(const blocked_bloom_filter& other) {
  require_compatible(other, "intersect_with");
  for (std::size_t i = 0; i < words_.size(); ++i) words_[i] &= other.words_[i];
  recount();
}

blocked_bloom_filter blocked_bloom_filter::halved() const {
  if (blocks_ % 2 != 0) {
    throw std::invalid_argument(fmt::format(
        "blocked_bloom_filter::halved: the number of blocks must be even (got {} blocks)",
        blocks_));
  }
  blocked_bloom_filter half(bits() / 2, seed_, avx2_ ? simd_path::automatic : simd_path::scalar);
  for (std::uint64_t j = 0; j < half.blocks_; ++j) {
    for (std::uint64_t i = 0; i < kWordsPerBlock; ++i) {
      half.words_[j * kWordsPerBlock + i] =
          words_[2 * j * kWordsPerBlock + i] | words_[(2 * j + 1) * kWordsPerBlock + i];
    }
  }
  half.recount();
  return half;
}

std::uint64_t blocked_bloom_filter::count_bits() const noexcept {
  std::uint64_t set = 0;
  for (const std::uint32_t w : words_) set += static_cast<std::uint64_t>(std::popcount(w));
  return set;
}

void blocked_bloom_filter::recount() noexcept {
  bits_set_ = count_bits();
  count_stale_ = false;
}

// Payload (after the common header, whose seed field holds seed()):
//
//   offset  size      field
//   ------  --------  ---------------------------------------------------------------
//        0         8  bits m = 256 · B, 256 <= m <= 2^40
//        8         4  hashes k, always 8 (checked on read)
//       12         8  bits_set: number of set bits (checked against the array on read)
//       20    32 · B  the blocks, in order; block b is 8 words of 4 bytes,
//                     word i of block b at offset 20 + 32b + 4i, bit j = (word >> j) & 1
// All fields little-endian. In a record of format version 4 the blocks are Golomb-coded
// instead, as one array of words in that order (record_writer::bit_array): u8 1, u64 the
// parameter, the code to the payload's end.
void blocked_bloom_filter::serialize_to(std::string& to, bit_coding coding) const {
  detail::record_writer out(structure_type::blocked_bloom_filter, seed_, to);
  const std::uint64_t set = bits_set();
  out.u64(bits());
  out.u32(kHashes);
  out.u64(set);
  out.bit_array(words_, bits(), set, coding);
  std::move(out).finish_appended();
}

blocked_bloom_filter blocked_bloom_filter::deserialize(std::string_view record, simd_path path) {
  detail::record_reader in(record, structure_type::blocked_bloom_filter);
  const std::uint64_t bits = in.u64();
  const std::uint32_t hashes = in.u32();
  const std::uint64_t bits_set = in.u64();
  in.require(bits >= kBlockBits && bits <= kMaxBits && bits % kBlockBits == 0,
             fmt::format("bits {} is not a multiple of 256 in [256, 2^40]", bits));
  in.require(hashes == kHashes, fmt::format("hashes {} is not {}", hashes, kHashes));
  in.require_bit_array_size(bits, sizeof(std::uint32_t));  // before the array is allocated

  blocked_bloom_filter filter(bits, in.seed(), path);
  in.read_bit_array(filter.words_, bits, bits_set);
  in.done();
  filter.recount();
  in.require(filter.bits_set_ == bits_set,
             fmt::format("bits_set {} does not match the {} set bits of the array", bits_set,
                         filter.bits_set_));
  return filter;
}

bool operator==(const blocked_bloom_filter& a, const blocked_bloom_filter& b) noexcept {
  return a.compatible(b) && a.words_ == b.words_;
}

namespace detail {

bool cpu_has_avx2() noexcept {
#if SKETCH_BLOCKED_BLOOM_AVX2
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
#else
  return false;
#endif
}

std::uint64_t batch_prefetch_above_bytes() noexcept {
  static const std::uint64_t bytes = [] {
    std::uint64_t l2 = 0;
#if defined(_SC_LEVEL2_CACHE_SIZE)
    const long reported = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (reported > 0) l2 = static_cast<std::uint64_t>(reported);
#endif
    return l2 > 0 ? l2 / 2 : std::uint64_t{256} * 1024;
  }();
  return bytes;
}

// Large arrays start on a huge-page boundary, so that the advice covers whole huge pages;
// others on a cache line.
namespace {
std::size_t bit_array_alignment(std::size_t bytes) noexcept {
  return bytes >= kHugePageBytes ? kHugePageBytes : 64;
}
}  // namespace

void* allocate_bit_array(std::size_t bytes) {
  const std::size_t align = bit_array_alignment(bytes);
  void* p = ::operator new (bytes, std::align_val_t{align});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only: where transparent huge pages are disabled it fails, and 4 KiB pages serve.
  if (align == kHugePageBytes) static_cast<void>(::madvise(p, bytes, MADV_HUGEPAGE));
#endif
  return p;
}

void free_bit_array(void* p, std::size_t bytes) noexcept {
  const std::size_t align = bit_array_alignment(bytes);
  ::operator delete (p, std::align_val_t{align});
}

}  // namespace detail
}  // namespace sketch
