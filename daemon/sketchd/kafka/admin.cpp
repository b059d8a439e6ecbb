#include "sketchd/kafka/admin.h"

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/sink.h"

namespace sketchd::kafka {
namespace {

using clock = std::chrono::steady_clock;

struct admin_options_deleter {
  void operator()(rd_kafka_AdminOptions_t* o) const noexcept { rd_kafka_AdminOptions_destroy(o); }
};
struct new_topic_deleter {
  void operator()(rd_kafka_NewTopic_t* t) const noexcept { rd_kafka_NewTopic_destroy(t); }
};
struct config_resource_deleter {
  void operator()(rd_kafka_ConfigResource_t* r) const noexcept {
    rd_kafka_ConfigResource_destroy(r);
  }
};
struct topic_deleter {
  void operator()(rd_kafka_topic_t* t) const noexcept { rd_kafka_topic_destroy(t); }
};
struct metadata_deleter {
  void operator()(const rd_kafka_metadata_t* m) const noexcept { rd_kafka_metadata_destroy(m); }
};

// The milliseconds left before `deadline`, at least 1 (librdkafka reads 0 as "do not wait").
int left_ms(clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(left.count(), 1, INT32_MAX));
}

// The outcome of one admin call: an error code and librdkafka's or the broker's text.
struct outcome {
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string text;
};

handle_ptr admin_client(const std::string& bootstrap_servers, const property_map& properties) {
  client_config config(producer_properties(properties));
  config.set("bootstrap.servers", bootstrap_servers);
  // A metadata request must not create the topic with the broker's defaults (no
  // compaction) before CreateTopics could set them.
  config.set_own("allow.auto.create.topics", "false");
  return std::move(config).create(RD_KAFKA_PRODUCER);
}

using admin_options_ptr = std::unique_ptr<rd_kafka_AdminOptions_t, admin_options_deleter>;

admin_options_ptr admin_options(rd_kafka_t* rk, rd_kafka_admin_op_t op,
                                clock::time_point deadline) {
  admin_options_ptr options(rd_kafka_AdminOptions_new(rk, op));
  std::array<char, 256> errstr{};
  throw_if_error(rd_kafka_AdminOptions_set_request_timeout(options.get(), left_ms(deadline),
                                                           errstr.data(), errstr.size()),
                 "set admin request timeout");
  return options;
}

// Waits for the result event of an admin call on `queue`; nullptr when the deadline passed.
event_ptr wait_result(rd_kafka_queue_t* queue, clock::time_point deadline) {
  return event_ptr(rd_kafka_queue_poll(queue, left_ms(deadline)));
}

// One CreateTopics call for `request` with `replication_factor`.
outcome create_topic(rd_kafka_t* rk, const topic_request& request, int replication_factor,
                     clock::time_point deadline) {
  std::array<char, 512> errstr{};
  const std::unique_ptr<rd_kafka_NewTopic_t, new_topic_deleter> topic(rd_kafka_NewTopic_new(
      request.name.c_str(), request.partitions, replication_factor, errstr.data(), errstr.size()));
  if (!topic) return {RD_KAFKA_RESP_ERR__INVALID_ARG, errstr.data()};
  for (const auto& [name, value] : request.configs) {
    throw_if_error(rd_kafka_NewTopic_set_config(topic.get(), name.c_str(), value.c_str()),
                   fmt::format("set topic config \"{}\"", name), error_context(request.name));
  }
  const admin_options_ptr options = admin_options(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS, deadline);
  rd_kafka_AdminOptions_set_operation_timeout(options.get(), left_ms(deadline), errstr.data(),
                                              errstr.size());
  const queue_ptr queue(rd_kafka_queue_new(rk));
  rd_kafka_NewTopic_t* topics[] = {topic.get()};
  rd_kafka_CreateTopics(rk, topics, 1, options.get(), queue.get());
  const event_ptr event = wait_result(queue.get(), deadline);
  if (!event) return {RD_KAFKA_RESP_ERR__TIMED_OUT, "no answer before the deadline"};
  if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return {rd_kafka_event_error(event.get()), rd_kafka_event_error_string(event.get())};
  std::size_t count = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event.get()), &count);
  if (count != 1) return {RD_KAFKA_RESP_ERR__BAD_MSG, "no result for the topic"};
  const char* text = rd_kafka_topic_result_error_string(results[0]);
  return {rd_kafka_topic_result_error(results[0]), text ? text : ""};
}

// The topic's cleanup.policy through DescribeConfigs, or the outcome that prevented it.
std::pair<outcome, std::optional<std::string>> cleanup_policy(rd_kafka_t* rk,
                                                              const std::string& topic,
                                                              clock::time_point deadline) {
  const std::unique_ptr<rd_kafka_ConfigResource_t, config_resource_deleter> resource(
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str()));
  const admin_options_ptr options = admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, deadline);
  const queue_ptr queue(rd_kafka_queue_new(rk));
  rd_kafka_ConfigResource_t* resources[] = {resource.get()};
  rd_kafka_DescribeConfigs(rk, resources, 1, options.get(), queue.get());
  const event_ptr event = wait_result(queue.get(), deadline);
  if (!event) return {{RD_KAFKA_RESP_ERR__TIMED_OUT, "no answer before the deadline"}, {}};
  if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return {{rd_kafka_event_error(event.get()), rd_kafka_event_error_string(event.get())}, {}};
  std::size_t count = 0;
  const rd_kafka_ConfigResource_t** described = rd_kafka_DescribeConfigs_result_resources(
      rd_kafka_event_DescribeConfigs_result(event.get()), &count);
  if (count != 1) return {{RD_KAFKA_RESP_ERR__BAD_MSG, "no result for the topic"}, {}};
  if (const auto err = rd_kafka_ConfigResource_error(described[0]))
    return {{err, rd_kafka_ConfigResource_error_string(described[0])}, {}};
  std::size_t entries = 0;
  const rd_kafka_ConfigEntry_t** configs = rd_kafka_ConfigResource_configs(described[0], &entries);
  for (std::size_t i = 0; i < entries; ++i) {
    if (std::string_view(rd_kafka_ConfigEntry_name(configs[i])) == "cleanup.policy") {
      const char* value = rd_kafka_ConfigEntry_value(configs[i]);
      return {{}, std::string(value ? value : "")};
    }
  }
  return {{RD_KAFKA_RESP_ERR__NOENT, "the broker did not list cleanup.policy"}, {}};
}

// What a metadata request says of the topic and the cluster.
struct topology {
  int partitions = 0;  // 0: the topic does not exist
  std::vector<std::int32_t> brokers;
};

// The mock cluster creates the topic here (whatever allow.auto.create.topics says).
topology read_topology(rd_kafka_t* rk, const std::string& name, clock::time_point deadline) {
  const std::unique_ptr<rd_kafka_topic_t, topic_deleter> topic(
      rd_kafka_topic_new(rk, name.c_str(), nullptr));
  const rd_kafka_metadata_t* raw = nullptr;
  throw_if_error(rd_kafka_metadata(rk, 0, topic.get(), &raw, left_ms(deadline)), "read metadata",
                 error_context(name));
  const std::unique_ptr<const rd_kafka_metadata_t, metadata_deleter> metadata(raw);
  topology out;
  for (int i = 0; i < metadata->broker_cnt; ++i) out.brokers.push_back(metadata->brokers[i].id);
  if (metadata->topic_cnt != 1) return out;
  const rd_kafka_metadata_topic_t& t = metadata->topics[0];
  if (t.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || t.err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
    return out;
  throw_if_error(t.err, "read metadata", error_context(name));
  out.partitions = t.partition_cnt;
  return out;
}

// The partition count of a topic that exists: a topic another client has just created may
// take a moment to reach the metadata of every broker. kafka_error (timed_out) when it does
// not before the deadline.
int partitions_once_known(rd_kafka_t* rk, const std::string& topic, clock::time_point deadline) {
  for (;;) {
    const int partitions = read_topology(rk, topic, deadline).partitions;
    if (partitions > 0) return partitions;
    if (clock::now() + std::chrono::milliseconds(100) >= deadline) {
      throw kafka_error("read metadata", error_code::timed_out, error_context(topic),
                        "the topic exists but no broker listed its partitions before the deadline");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string describe_outcome(const outcome& o) {
  return fmt::format("{} ({})", o.text.empty() ? rd_kafka_err2str(o.err) : o.text,
                     rd_kafka_err2name(o.err));
}

// CreateTopics with the broker's default replication factor, then, where the broker
// predates KIP-464 (_UNSUPPORTED_FEATURE for -1), with min(3, brokers).
outcome create_with_default_replication(rd_kafka_t* rk, const topic_request& request,
                                        clock::time_point deadline) {
  outcome first = create_topic(rk, request, -1, deadline);
  if (first.err != RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE) return first;
  const auto brokers = static_cast<int>(read_topology(rk, request.name, deadline).brokers.size());
  outcome second = create_topic(rk, request, std::clamp(brokers, 1, 3), deadline);
  return second.err == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE ? first : second;
}

// The result for a topic that exists with `policy` (its cleanup.policy), with a warning
// when it does not compact.
ensure_result existing(rd_kafka_t* rk, const std::string& topic, const std::string& policy,
                       clock::time_point deadline) {
  ensure_result result;
  result.origin = topic_origin::existed;
  result.partitions = partitions_once_known(rk, topic, deadline);
  result.compacted = is_compacting_policy(policy) ? compaction::yes : compaction::no;
  if (result.compacted == compaction::no) {
    result.warnings.push_back(fmt::format(
        "topic {} has cleanup.policy={}, not compact: retention may delete the latest record of "
        "a key, and the topic is not bounded by its keys; set cleanup.policy=compact "
        "(kafka-configs --alter --entity-type topics --entity-name {} --add-config "
        "cleanup.policy=compact)",
        topic, policy, topic));
  }
  return result;
}

ensure_result created(const topic_request& request) {
  const auto policy = request.configs.find("cleanup.policy");
  const bool compacts = policy != request.configs.end() && is_compacting_policy(policy->second);
  return {
      topic_origin::created, compacts ? compaction::yes : compaction::no, request.partitions, {}};
}

// Creates the topic; when another client created it first, checks it as existing.
ensure_result create(rd_kafka_t* rk, const topic_request& request, clock::time_point deadline) {
  const outcome o = create_with_default_replication(rk, request, deadline);
  if (o.err == RD_KAFKA_RESP_ERR_NO_ERROR) return created(request);
  if (o.err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
    const auto [described, policy] = cleanup_policy(rk, request.name, deadline);
    if (policy) return existing(rk, request.name, *policy, deadline);
  }
  throw kafka_error(
      "create topic", to_error_code(o.err), error_context(request.name),
      fmt::format("the topic does not exist and cannot be created: {}", describe_outcome(o)));
}

// The topic as a metadata request finds it (`partitions`), with a warning saying `why` the
// Admin API was not used.
ensure_result as_it_is(const topic_request& request, int partitions, const std::string& why) {
  if (partitions == 0) {
    throw kafka_error("create topic", error_code::unknown_topic_or_partition,
                      error_context(request.name),
                      fmt::format("the topic does not exist and cannot be created: {}", why));
  }
  ensure_result result{topic_origin::used_as_is, compaction::unknown, partitions, {}};
  result.warnings.push_back(fmt::format(
      "{}; using topic {} as it is, with {} partition(s): make sure its cleanup.policy is "
      "compact, or it grows without bound",
      why, request.name, partitions));
  return result;
}

// The cluster's controller, when it is one of its brokers: the Admin API's calls wait for
// it. librdkafka's mock cluster names broker 0, which it does not have.
std::optional<std::int32_t> controller(rd_kafka_t* rk, const topology& t,
                                       clock::time_point deadline) {
  const std::int32_t id = rd_kafka_controllerid(rk, left_ms(deadline));
  if (std::find(t.brokers.begin(), t.brokers.end(), id) == t.brokers.end()) return std::nullopt;
  return id;
}

}  // namespace

std::string_view to_string(topic_origin origin) noexcept {
  switch (origin) {
    case topic_origin::created:
      return "created";
    case topic_origin::existed:
      return "existed";
    case topic_origin::used_as_is:
      return "used as it is";
  }
  return "?";
}

std::string_view to_string(compaction compacted) noexcept {
  switch (compacted) {
    case compaction::yes:
      return "yes";
    case compaction::no:
      return "no";
    case compaction::unknown:
      return "unknown";
  }
  return "?";
}

bool is_compacting_policy(std::string_view cleanup_policy) noexcept {
  while (!cleanup_policy.empty()) {
    const std::size_t comma = cleanup_policy.find(',');
    std::string_view part = cleanup_policy.substr(0, comma);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (part == "compact") return true;
    if (comma == std::string_view::npos) break;
    cleanup_policy.remove_prefix(comma + 1);
  }
  return false;
}

ensure_result ensure_topic(const std::string& bootstrap_servers, const property_map& properties,
                           const topic_request& request, std::chrono::milliseconds timeout) {
  if (request.partitions < 1) {
    throw std::invalid_argument(fmt::format("topic {}: partitions must be at least 1, not {}",
                                            request.name, request.partitions));
  }
  const clock::time_point deadline = clock::now() + timeout;
  const handle_ptr rk = admin_client(bootstrap_servers, properties);
  const topology found = read_topology(rk.get(), request.name, deadline);
  if (!controller(rk.get(), found, deadline)) {
    return as_it_is(request, found.partitions,
                    "the cluster names no controller among its brokers, so its Admin API "
                    "(CreateTopics, DescribeConfigs) cannot be used (librdkafka's mock cluster "
                    "has none)");
  }
  const auto [described, policy] = cleanup_policy(rk.get(), request.name, deadline);
  if (policy) return existing(rk.get(), request.name, *policy, deadline);
  if (described.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || found.partitions == 0)
    return create(rk.get(), request, deadline);
  return as_it_is(request, found.partitions,
                  fmt::format("cannot read the configuration of topic {} (DescribeConfigs): {}",
                              request.name, describe_outcome(described)));
}

}  // namespace sketchd::kafka
