#include "sketchd/kafka/error.h"

#include <librdkafka/rdkafka.h>

#include <utility>

namespace sketchd::kafka {
namespace {

// error_code holds librdkafka's values unchanged, so conversions are casts.
#define SKETCHD_SAME_CODE(ours, theirs) \
  static_assert(static_cast<int>(error_code::ours) == RD_KAFKA_RESP_ERR_##theirs)
SKETCHD_SAME_CODE(destroy, _DESTROY);
SKETCHD_SAME_CODE(fail, _FAIL);
SKETCHD_SAME_CODE(transport, _TRANSPORT);
SKETCHD_SAME_CODE(msg_timed_out, _MSG_TIMED_OUT);
SKETCHD_SAME_CODE(partition_eof, _PARTITION_EOF);
SKETCHD_SAME_CODE(unknown_partition, _UNKNOWN_PARTITION);
SKETCHD_SAME_CODE(unknown_topic, _UNKNOWN_TOPIC);
SKETCHD_SAME_CODE(all_brokers_down, _ALL_BROKERS_DOWN);
SKETCHD_SAME_CODE(invalid_arg, _INVALID_ARG);
SKETCHD_SAME_CODE(timed_out, _TIMED_OUT);
SKETCHD_SAME_CODE(queue_full, _QUEUE_FULL);
SKETCHD_SAME_CODE(state, _STATE);
SKETCHD_SAME_CODE(purge_queue, _PURGE_QUEUE);
SKETCHD_SAME_CODE(purge_inflight, _PURGE_INFLIGHT);
SKETCHD_SAME_CODE(fatal, _FATAL);
SKETCHD_SAME_CODE(unknown_broker, _UNKNOWN_BROKER);
SKETCHD_SAME_CODE(unknown, UNKNOWN);
SKETCHD_SAME_CODE(no_error, NO_ERROR);
SKETCHD_SAME_CODE(offset_out_of_range, OFFSET_OUT_OF_RANGE);
SKETCHD_SAME_CODE(unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PART);
SKETCHD_SAME_CODE(leader_not_available, LEADER_NOT_AVAILABLE);
SKETCHD_SAME_CODE(not_leader_for_partition, NOT_LEADER_FOR_PARTITION);
SKETCHD_SAME_CODE(request_timed_out, REQUEST_TIMED_OUT);
SKETCHD_SAME_CODE(broker_not_available, BROKER_NOT_AVAILABLE);
SKETCHD_SAME_CODE(msg_size_too_large, MSG_SIZE_TOO_LARGE);
SKETCHD_SAME_CODE(network_exception, NETWORK_EXCEPTION);
SKETCHD_SAME_CODE(coordinator_load_in_progress, COORDINATOR_LOAD_IN_PROGRESS);
SKETCHD_SAME_CODE(coordinator_not_available, COORDINATOR_NOT_AVAILABLE);
SKETCHD_SAME_CODE(not_coordinator, NOT_COORDINATOR);
SKETCHD_SAME_CODE(not_enough_replicas, NOT_ENOUGH_REPLICAS);
SKETCHD_SAME_CODE(not_enough_replicas_after_append, NOT_ENOUGH_REPLICAS_AFTER_APPEND);
SKETCHD_SAME_CODE(illegal_generation, ILLEGAL_GENERATION);
SKETCHD_SAME_CODE(unknown_member_id, UNKNOWN_MEMBER_ID);
SKETCHD_SAME_CODE(rebalance_in_progress, REBALANCE_IN_PROGRESS);
SKETCHD_SAME_CODE(topic_authorization_failed, TOPIC_AUTHORIZATION_FAILED);
SKETCHD_SAME_CODE(group_authorization_failed, GROUP_AUTHORIZATION_FAILED);
SKETCHD_SAME_CODE(topic_already_exists, TOPIC_ALREADY_EXISTS);
SKETCHD_SAME_CODE(invalid_partitions, INVALID_PARTITIONS);
SKETCHD_SAME_CODE(invalid_replication_factor, INVALID_REPLICATION_FACTOR);
SKETCHD_SAME_CODE(out_of_order_sequence_number, OUT_OF_ORDER_SEQUENCE_NUMBER);
SKETCHD_SAME_CODE(duplicate_sequence_number, DUPLICATE_SEQUENCE_NUMBER);
SKETCHD_SAME_CODE(invalid_producer_epoch, INVALID_PRODUCER_EPOCH);
#undef SKETCHD_SAME_CODE

std::string make_message(std::string_view operation, error_code code, const error_context& context,
                         std::string_view description) {
  const std::string where = fmt::format("{}", context);
  return fmt::format("{}{}{}{}: {} ({})", operation, where.empty() ? "" : " [", where,
                     where.empty() ? "" : "]", description.empty() ? describe(code) : description,
                     code);
}

}  // namespace

std::string_view to_string(error_code code) noexcept {
  return rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(code));
}

std::string_view describe(error_code code) noexcept {
  return rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(code));
}

kafka_error::kafka_error(std::string_view operation, error_code code, error_context context,
                         std::string_view description)
    : std::runtime_error(make_message(operation, code, context, description)),
      code_(code),
      context_(std::move(context)) {}

}  // namespace sketchd::kafka
