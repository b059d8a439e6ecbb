#include "sketchd/util/rate_limit.h"

#include <algorithm>

namespace sketchd {

log_rate_limit::log_rate_limit(clock::duration interval, unsigned burst) noexcept
    : interval_(interval), burst_(std::max(burst, 1U)) {}

bool log_rate_limit::admit(clock::time_point now, std::string_view text) {
  if (held_ == 0 && (!started_ || now - since_ >= interval_)) {
    started_ = true;
    since_ = now;
    shown_ = 0;
  }
  if (held_ == 0 && shown_ < burst_) {
    ++shown_;
    return true;
  }
  ++held_;
  last_held_at_ = now;
  last_.assign(text);
  return false;
}

std::optional<log_rate_limit::held_back> log_rate_limit::take_held(clock::time_point now,
                                                                   bool now_anyway) {
  if (held_ == 0 || (!now_anyway && now - since_ < interval_)) return std::nullopt;
  held_back out{held_, now - since_, now - last_held_at_, std::move(last_)};
  held_ = 0;
  last_.clear();
  since_ = now;
  shown_ = 1;  // the line that tells them
  return out;
}

std::optional<std::uint64_t> keyed_rate_limit::admit(const std::string& key,
                                                     log_rate_limit::clock::time_point now,
                                                     std::string_view text) {
  const std::lock_guard lock(mutex_);
  auto it = limits_.find(key);
  if (it == limits_.end()) {
    if (limits_.size() >= kMaxKeys) limits_.clear();
    it = limits_.emplace(key, log_rate_limit(interval_)).first;
  }
  // This line tells what was held back, if the interval has passed.
  if (auto held = it->second.take_held(now)) return held->count;
  if (!it->second.admit(now, text)) return std::nullopt;
  return 0;
}

}  // namespace sketchd
