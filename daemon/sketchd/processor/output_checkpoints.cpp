#include "sketchd/processor/output_checkpoints.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace sketchd {

namespace {

// Kafka's legal topic name characters.
bool topic_name(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

template <class T>
bool parse_number(std::string_view s, T& out) noexcept {
  if (s.empty() || s.front() == '-' || s.front() == '+') return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Splits `s` at `sep`, calling f(part) for each; false as soon as f returns false.
template <class F>
bool split(std::string_view s, char sep, F&& f) {
  for (;;) {
    const auto at = s.find(sep);
    if (!f(s.substr(0, at))) return false;
    if (at == std::string_view::npos) return true;
    s.remove_prefix(at + 1);
  }
}

}  // namespace

std::string encode_output_ends(const std::vector<output_end>& ends, std::size_t max_bytes) {
  if (ends.empty()) return {};
  std::vector<output_end> sorted = ends;
  std::sort(sorted.begin(), sorted.end(), [](const output_end& a, const output_end& b) {
    return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition);
  });
  std::string text(output_checkpoints::kPrefix);
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const output_end& e = sorted[i];
    if (i == 0 || e.topic != sorted[i - 1].topic) {
      if (i > 0) text += ';';
      text += e.topic;
      text += '=';
    } else {
      text += ',';
    }
    fmt::format_to(std::back_inserter(text), "{}:{}", e.partition, e.offset);
    if (text.size() > max_bytes) return {};
  }
  return text;
}

std::optional<std::vector<output_end>> parse_output_ends(std::string_view text) {
  if (!text.starts_with(output_checkpoints::kPrefix)) return std::nullopt;
  text.remove_prefix(output_checkpoints::kPrefix.size());
  std::vector<output_end> ends;
  const bool ok = split(text, ';', [&](std::string_view topic_part) {
    const auto eq = topic_part.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string_view topic = topic_part.substr(0, eq);
    if (!topic_name(topic)) return false;
    return split(topic_part.substr(eq + 1), ',', [&](std::string_view pair) {
      const auto colon = pair.find(':');
      output_end e{std::string(topic), 0, 0};
      return colon != std::string_view::npos && parse_number(pair.substr(0, colon), e.partition) &&
             parse_number(pair.substr(colon + 1), e.offset) && (ends.push_back(e), true);
    });
  });
  if (!ok || ends.empty()) return std::nullopt;
  return ends;
}

void output_checkpoints::started(std::size_t topic_index, std::int32_t partition) {
  if (!kept_.empty()) kept_.back().next[{topic_index, partition}] = 0;
}

void output_checkpoints::take(
    const std::vector<std::tuple<std::size_t, std::int32_t, std::int64_t>>& next,
    const std::vector<output_end>& ends) {
  checkpoint c;
  for (const auto& [topic, partition, offset] : next) c.next[{topic, partition}] = offset;
  c.text = encode_output_ends(ends, kMaxMetadataBytes);
  if (c.text.empty() && !ends.empty()) ++too_long_;
  if (kept_.size() == kMaxKept) kept_.pop_front();
  kept_.push_back(std::move(c));
}

std::string output_checkpoints::metadata(std::size_t topic_index, std::int32_t partition,
                                         std::int64_t offset) const {
  for (auto it = kept_.rbegin(); it != kept_.rend(); ++it) {
    const auto n = it->next.find({topic_index, partition});
    if (n != it->next.end() && n->second <= offset) return it->text;
  }
  return {};
}

}  // namespace sketchd
