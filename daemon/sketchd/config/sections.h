// The readers of the configuration's sections, one file each (kafka.cpp, http.cpp,
// state.cpp, pipelines.cpp, generator.cpp, log.cpp), and the checks that span sections.
// Each reads its section's field into its type, reporting every problem to the checker;
// what it returns holds defaults where the file is wrong. Internal to the configuration
// loader; load.cpp calls them in the file's order of sections.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/config/checker.h"
#include "sketchd/config/types.h"

namespace sketchd::config_detail {

// The longest window, a year: far from any overflow of the sketches' millisecond arithmetic
// (rolling_bloom refuses a window whose G slices overflow int64, as 106751991166d does).
inline constexpr std::chrono::milliseconds kMaxWindow = std::chrono::days(365);
// The longest snapshot and summary intervals.
inline constexpr std::chrono::milliseconds kMaxInterval = std::chrono::days(1);

// ---------------------------------------------------------------------------------------
// kafka (kafka.cpp)

// Where kafka.properties and each of its entries are, for the checks of the properties as
// a whole once the pipelines are known (check_kafka_properties).
struct property_positions {
  bool all_accepted = true;  // librdkafka accepted every property on its own
  std::optional<field> section;
  std::map<std::string, field, std::less<>> entries;
};

// kafka.brokers: HOST[:PORT] entries separated by commas, each optionally prefixed with a
// protocol (SSL://host:9093), the host a name, an IPv4 address or an IPv6 address in
// brackets, the port in [1, 65535]. What is wrong with the first bad entry, or nullopt.
[[nodiscard]] std::optional<std::string> broker_list_problem(std::string_view list);

[[nodiscard]] kafka_config read_kafka(checker& c, const field& f, property_positions& where);

// librdkafka's checks of kafka.properties as a whole, on top of sketchd's own settings, for
// the consumer and, when some pipeline writes to a topic (`produces`), the producer.
void check_kafka_properties(checker& c, const property_positions& where, const kafka_config& k,
                            bool produces);

// ---------------------------------------------------------------------------------------
// http (http.cpp), state (state.cpp), generator (generator.cpp), log (log.cpp)

[[nodiscard]] http_config read_http(checker& c, const field& f);
[[nodiscard]] state_config read_state(checker& c, const field& f);
[[nodiscard]] generator_config read_generator(checker& c, const field& f);
[[nodiscard]] log_config read_log(checker& c, const field& f);

// ---------------------------------------------------------------------------------------
// pipelines (pipelines.cpp, sketch_sizes.cpp)

// The pipelines of the list `elements` (the entries of pipelines), one per entry, and the
// checks between them: pipelines that feed each other in a loop. With a `state_topic`,
// every pipeline's scope is partition (scope: instance is an error).
[[nodiscard]] std::vector<pipeline_config> read_pipelines(checker& c,
                                                          const std::vector<field>& elements,
                                                          bool state_topic);

// The state topic is none of the topics the pipelines read or write, nor the generator's.
void check_state_topic(checker& c, const field& state,
                       const std::vector<pipeline_config>& pipelines,
                       const std::optional<generator_config>& generator);

// A topic sketchd writes to holds one kind of event, whichever pipelines write it, and
// there are at most kMaxOutputs outputs: checked over the pipelines of `elements` and the
// generator (its section's field, if given).
void check_output_kinds(checker& c, const std::vector<field>& elements,
                        const std::vector<pipeline_config>& pipelines, const field* generator_field,
                        const std::optional<generator_config>& generator);

// The rolling Count-Min sketch of `hh` within the sketch library's limits, reported in the
// heavy_hitters mapping `m`; each flag says whether that value was read without error.
void check_count_min_size(checker& c, const mapping& m, const heavy_hitters_config& hh,
                          bool epsilon_ok, bool delta_ok, bool buckets_ok);

// The rolling Bloom filter of `d` within the sketch library's limits, reported in the dedup
// mapping `m`.
void check_bloom_size(checker& c, const mapping& m, const dedup_config& d);

}  // namespace sketchd::config_detail
