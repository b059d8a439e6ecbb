// The generator section: synthetic Zipf-distributed events.
#include <cstdint>
#include <limits>

#include "sketchd/config/sections.h"

namespace sketchd::config_detail {
namespace {

// The most distinct items of the generator: its Zipf table takes 8 bytes per item.
constexpr std::uint64_t kMaxGeneratorDistinct = 1'000'000'000;
// The generator's highest rate, events per second: far above what one producer sends, and
// far from overflowing its count of events due (elapsed seconds · rate).
constexpr std::uint64_t kMaxGeneratorRate = 100'000'000;

}  // namespace

generator_config read_generator(checker& c, const field& f) {
  generator_config g;
  const mapping m(c, f, {"topic", "rate", "distinct", "zipf", "key", "format"});
  if (!m.valid()) return g;
  if (m.read_required("topic", g.topic, topics(c)) && is_internal_topic(g.topic)) {
    refuse_internal_topic(c, *m.get("topic"), g.topic);
  }
  m.read("rate", g.rate, counts(c, 1, kMaxGeneratorRate));
  m.read("distinct", g.distinct, counts(c, 1, kMaxGeneratorDistinct));
  m.read("zipf", g.zipf, reals(c, {0, true, std::numeric_limits<double>::infinity(), false}));
  m.read("key", g.key, booleans(c));
  m.read("format", g.format, choices(c, {generator_format::json, generator_format::text}));
  return g;
}

}  // namespace sketchd::config_detail
