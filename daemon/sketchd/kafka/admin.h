// Making sure a topic exists with the configuration sketchd needs, through librdkafka's
// Admin API: CreateTopics when it is missing, DescribeConfigs to check one that exists.
//
// How: a metadata request (the topic's partitions, the brokers), the controller's id,
// then DescribeConfigs of the topic; CreateTopics when the broker says it is unknown.
//
// Guarantees:
//   - a topic that does not exist is created with the partitions and the topic configs
//     asked for, and the broker's default replication factor (-1, KIP-464, brokers 2.4
//     and later; older brokers get min(3, brokers)); two instances racing to create it
//     both succeed (the loser sees "already exists" and checks it as existing);
//   - a topic that exists is used, never altered: its cleanup.policy is read and a
//     warning returned when it does not compact;
//   - a cluster whose Admin API cannot be used gets the topic as it is, with a warning:
//     librdkafka 2.0's mock cluster answers neither CreateTopics (ApiKey 19) nor
//     DescribeConfigs (32), and names broker 0, which it does not have, as controller, so
//     that librdkafka would wait for it until the deadline; the metadata request has
//     created the topic there (its default partition count, no compaction). On a real
//     broker the same path serves a topic that exists but may not be described (no
//     DescribeConfigs permission);
//   - nothing is logged here: what the caller should say is in ensure_result::warnings;
//   - every step shares one deadline: metadata or a creation it cuts short is a
//     kafka_error; a DescribeConfigs it cuts short leaves the topic used as it is, with
//     the reason in the warning.
//
// Thread safety: a free function with no shared state; callable from any thread.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/kafka/error.h"

namespace sketchd::kafka {

// What ensure_topic() asks for.
struct topic_request {
  std::string name;
  int partitions = 1;                          // used only when the topic is created
  std::map<std::string, std::string> configs;  // topic configs, e.g. cleanup.policy=compact
};

enum class topic_origin {
  created,     // this call created it
  existed,     // it was there (the broker said "already exists")
  used_as_is,  // the broker cannot create topics: found (or auto-created) by metadata
};

enum class compaction { yes, no, unknown };

struct ensure_result {
  topic_origin origin = topic_origin::used_as_is;
  compaction compacted = compaction::unknown;  // from cleanup.policy, when it could be read
  int partitions = 0;                          // the topic's partition count, as it is now
  std::vector<std::string> warnings;           // complete sentences for the caller's log
};

// Creates `request.name` when it is missing, or checks it (see the file comment).
// `bootstrap_servers` and `properties` (the user's librdkafka properties, security
// included; consumer-only ones are left out) configure a short-lived admin client.
// Throws kafka_error when the topic neither exists nor can be created (with the broker's
// reason: authorization, policy…), when the metadata cannot be read before `timeout`, or
// for a bad property; std::invalid_argument for partitions < 1.
[[nodiscard]] ensure_result ensure_topic(const std::string& bootstrap_servers,
                                         const std::map<std::string, std::string>& properties,
                                         const topic_request& request,
                                         std::chrono::milliseconds timeout);

// "created", "existed", "used as it is"; "yes", "no", "unknown": for the caller's log.
[[nodiscard]] std::string_view to_string(topic_origin origin) noexcept;
[[nodiscard]] std::string_view to_string(compaction compacted) noexcept;

// Whether a cleanup.policy value ("compact", "delete", "compact,delete") compacts.
[[nodiscard]] bool is_compacting_policy(std::string_view cleanup_policy) noexcept;

}  // namespace sketchd::kafka
