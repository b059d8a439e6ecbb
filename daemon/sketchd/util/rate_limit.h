// The one rate limit of sketchd's log lines: at most `burst` lines about one thing in each
// interval; the lines past them are held back (counted, the last one kept) and told in one
// line once the interval has passed, so that a flood of one error neither fills the log nor
// goes unsaid. Every rate-limited line of the daemon goes through it: skipped messages, heavy-
// set changes, alert and commit failures, consume errors, librdkafka's own warnings.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace sketchd {

// Not thread-safe: one owner (keyed_rate_limit below shares one between threads).
class log_rate_limit {
 public:
  using clock = std::chrono::steady_clock;

  // What was held back since the interval began, as take_held() returns it.
  struct held_back {
    std::uint64_t count = 0;
    clock::duration over{};  // since the interval began
    clock::duration ago{};   // since the last held-back line came
    std::string last;        // the last held-back line's text, as given to admit()
  };

  // `burst` ≥ 1 lines in each `interval`.
  explicit log_rate_limit(clock::duration interval, unsigned burst = 1) noexcept;

  // True when a line may be written at `now`: fewer than `burst` lines were written in the
  // current interval and none is held back. Otherwise the line is held back: counted, and
  // `text` kept as the last one. An interval begins at the first line after the previous
  // one ended with nothing held back (or after take_held() told what was).
  [[nodiscard]] bool admit(clock::time_point now, std::string_view text = {});

  // What is held back, once the interval has passed (at once with `now_anyway`), for one
  // line to tell; a new interval begins at `now`, with that line as its first. nullopt when
  // nothing is held back or the interval runs on.
  [[nodiscard]] std::optional<held_back> take_held(clock::time_point now, bool now_anyway = false);

  [[nodiscard]] clock::duration interval() const noexcept { return interval_; }

 private:
  clock::duration interval_;
  unsigned burst_;
  bool started_ = false;
  clock::time_point since_{};  // the current interval's start
  unsigned shown_ = 0;         // lines written in it
  std::uint64_t held_ = 0;
  clock::time_point last_held_at_{};
  std::string last_;
};

// One log_rate_limit per key (a facility and what the line is about), for lines that come
// from several threads. Thread-safe. At most kMaxKeys keys: past them the table starts
// again (a stream of ever new keys cannot grow it without bound).
class keyed_rate_limit {
 public:
  static constexpr std::size_t kMaxKeys = 1024;

  explicit keyed_rate_limit(log_rate_limit::clock::duration interval) noexcept
      : interval_(interval) {}

  // nullopt: hold the line back. Otherwise write it, and the value is how many lines of
  // this key were held back before it (0 for none).
  [[nodiscard]] std::optional<std::uint64_t> admit(const std::string& key,
                                                   log_rate_limit::clock::time_point now,
                                                   std::string_view text);

  // The held-back lines of every key whose interval has passed, with their key; each key
  // begins a new interval.
  template <typename F>
  void take_overdue(log_rate_limit::clock::time_point now, F&& tell) {
    const std::lock_guard lock(mutex_);
    for (auto& [key, limit] : limits_) {
      if (auto held = limit.take_held(now)) tell(key, *held);
    }
  }

 private:
  log_rate_limit::clock::duration interval_;
  std::mutex mutex_;
  std::map<std::string, log_rate_limit, std::less<>> limits_;
};

}  // namespace sketchd
