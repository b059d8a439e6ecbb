// State split by input partition: one Bloom shard and one Count-Min shard per partition of a
// keyed stream, sized so that the whole keeps the memory and the guarantees of one structure
// over the whole stream, and the answers of the shards combined.
//
// Why: a stream keyed by its item (every occurrence of an item in the same partition) can be
// deduplicated and counted partition by partition. Each partition's state then moves with
// the partition when consumers of a group join, leave or crash, and an instance holds only
// the shards of the partitions it owns.
//
// Notation: n distinct items in a dedup window, P partitions, N items in a heavy-hitter
// window (N_s in shard s, Σ_s N_s = N), ε and δ the Count-Min guarantee, φ the heavy-hitter
// threshold.
//
// Bloom shards. The items of a keyed stream fall into the partitions as their keys hash:
// the distinct items of one partition are Binomial(n, 1/P), of mean n/P and standard
// deviation √(n·(1/P)·(1 − 1/P)). A shard sized for n/P would be over capacity about half
// the time. bloom_shard_capacity() is the least c with P·Pr[Binomial(n, 1/P) > c] ≤ α (by
// the union bound, no shard of the P is over c with probability at least 1 − α): each shard
// holds its items at the target false-positive rate p, an item is tested against its own
// partition's shard only, so the stream's rate stays at most p; the memory is P·m(c, p)
// instead of m(n, p), a margin of P·c/n − 1, which falls as 1/√(n/P): with α = 10⁻³ and 32
// partitions, 12.7% at 1,000 items per partition, 4.0% at 10,000, 1.25% at 100,000.
//
// Count-Min shards. Each shard keeps the pipeline's ε and δ, and every shard has the same
// width w = ⌈e/ε⌉, depth d = ⌈ln(1/δ)⌉ and hash seed, so that row r maps an item to the
// same column in every shard. The combined estimate of an item is the sum of the shards'
// estimates:
//     f(x) ≤ Σ_s min_r C_s[r][h_r(x)] ≤ min_r Σ_s C_s[r][h_r(x)] ≤ f(x) + εN   (w.p. ≥ 1 − δ)
// (with plain or conservative update: a conservative shard's estimate is at most a plain
// one's). The first inequality holds because each shard never undercounts its share f_s(x); the
// second because a sum of minima is at most the minimum of the sums; the right-hand side is
// the estimate of one sketch of the same shape over the whole stream (Count-Min is linear:
// Σ_s C_s is that sketch), whose guarantee is Cormode & Muthukrishnan's (2005, Theorem 1;
// seed lecture 000). So the shards answer an item spread over several partitions within εN
// of the truth, as one sketch would, and an item of one partition more tightly still. The
// memory is P times a sketch's: P·d·w counters per slice. Since a heavy hitter must stand
// out against εN, ε = φ/10 suffices (ε = 10⁻³ for φ = 1%: w = 2,719).
//
// Heavy hitters. Every item heavy over the whole window (f(x) ≥ φN) is heavy in at least
// one shard: were f_s(x) < φ·N_s in every shard, the sum would give f(x) < φN. So the
// union of the shards' candidates holds every heavy item (each shard's tracker keeps its
// heavy items, top_k.h), and combined_top() ranks that union by combined estimate. Items
// that are not heavy in any shard are ranked only when some shard keeps them as
// candidates; in a keyed stream f_s(x) = f(x) in the item's partition, so each shard's top
// is the stream's top among its partition's items.
//
// Every function is pure; those reading shards are const calls on them, safe while no one
// modifies them. Those returning a vector allocate it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sketch/hash.h"
#include "sketch/rolling_bloom.h"
#include "sketch/rolling_count_min.h"
#include "sketch/top_k.h"

namespace sketch::shards {

// The overflow probability bloom_shard_capacity() takes unless told otherwise: one chance
// in a thousand, at a moment when the window holds n distinct items, that some shard holds
// more than its capacity (it then rotates a generation early, as a whole filter does past
// its capacity: its window shrinks, its false-positive rate does not rise).
inline constexpr double kDefaultOverflow = 1e-3;

// Pr[X > c] for X ~ Binomial(n, q): the sum of the terms above c, each from the one before
// (t_{j+1} = t_j · (n − j)/(j + 1) · q/(1 − q)) starting from t_{c+1} in log space (lgamma),
// until they no longer change the sum. For 0 < q < 1; 0 when c ≥ n, 1 when c < 0.
[[nodiscard]] double binomial_upper_tail(std::uint64_t n, double q, std::int64_t c) noexcept;

// The capacity of each of `partitions` Bloom shards holding n distinct items of a keyed
// stream: the least c with partitions · Pr[Binomial(n, 1/partitions) > c] ≤ overflow (see
// the file comment). n for one partition; 0 for n = 0. Throws std::invalid_argument unless
// partitions ≥ 1 and 0 < overflow < 1.
[[nodiscard]] std::uint64_t bloom_shard_capacity(std::uint64_t n, std::uint32_t partitions,
                                                 double overflow = kDefaultOverflow);

// The `capacity` of each of `partitions` rolling_bloom shards whose whole holds n distinct
// items per window in G generations: (G − 1)·bloom_shard_capacity(⌈n/(G − 1)⌉, partitions,
// overflow). The margin goes where a shard can overflow, each generation's share of
// ⌈n/(G − 1)⌉ items (rolling_bloom.h), whose spread over the partitions is wider than the
// window's. Throws std::invalid_argument as bloom_shard_capacity() does, or unless
// generations ≥ 2.
[[nodiscard]] std::uint64_t rolling_bloom_shard_capacity(std::uint64_t n, std::uint32_t generations,
                                                         std::uint32_t partitions,
                                                         double overflow = kDefaultOverflow);

// The figures of rolling_bloom shards of one shape, combined for a reader of the whole:
//   estimated_fpr     the mean of the shards' (a new item of a keyed stream is tested
//                     against the shard of its partition, each as likely);
//   estimated_items   the sum;
//   fill_ratio(g)     the mean of generation g's (the shards have the same size);
//   guaranteed_horizon_ms, effective_window_ms   the shortest (what every shard keeps).
// Zeros for no shards.
struct bloom_figures {
  double estimated_fpr = 0;
  double estimated_items = 0;
  std::vector<double> fill_ratio;  // by generation, newest first
  std::int64_t guaranteed_horizon_ms = 0;
  std::int64_t effective_window_ms = 0;
};
[[nodiscard]] bloom_figures combined_bloom_figures(std::span<const rolling_bloom* const> shards,
                                                   std::int64_t now_ms);

// The combined estimate of an item over shards of one shape and seed (the file comment's
// sum): within [f(x), f(x) + εN] with probability ≥ 1 − δ, N their window_items() summed.
// Throws std::invalid_argument when the shards differ in width, depth or seed.
[[nodiscard]] std::uint64_t combined_estimate(std::span<const rolling_count_min* const> shards,
                                              hash128 h);

// The shards' window items, summed: N.
[[nodiscard]] std::uint64_t combined_window_items(
    std::span<const rolling_count_min* const> shards) noexcept;

// The k items of the highest combined estimate among the shards' candidates (each shard's
// tracker, as its last refresh left it), highest first, ties by item bytes; `heavy` when the
// combined estimate is ≥ φ·N and ≥ top_k_tracker::kMinHeavyEstimate, φ the shards'
// threshold. Every item heavy over the whole window is among the candidates (the file
// comment). Throws std::invalid_argument as combined_estimate() does.
[[nodiscard]] std::vector<top_k_tracker::entry> combined_top(
    std::span<const rolling_count_min* const> shards, std::uint32_t k);

}  // namespace sketch::shards
