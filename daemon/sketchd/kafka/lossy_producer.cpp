#include "sketchd/kafka/lossy_producer.h"

#include "sketchd/kafka/client.h"

namespace sketchd::kafka {

struct lossy_producer::handle {
  handle_ptr client;
};

struct lossy_producer::callbacks {
  static void delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    if (!m->err) return;
    // Dropped by close(), on purpose.
    if (m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
      return;
    auto* self = static_cast<lossy_producer*>(opaque);
    ++self->undelivered_;
    self->last_error_ = rd_kafka_err2str(m->err);
  }
};

lossy_producer::lossy_producer(const std::map<std::string, std::string>& properties,
                               std::string_view bootstrap_servers) {
  client_config conf(properties);
  conf.set("bootstrap.servers", bootstrap_servers);
  rd_kafka_conf_set_dr_msg_cb(conf.get(), callbacks::delivery);
  rd_kafka_conf_set_opaque(conf.get(), this);
  handle_ = std::make_unique<handle>(handle{std::move(conf).create(RD_KAFKA_PRODUCER)});
}

lossy_producer::~lossy_producer() { close(); }

lossy_producer::produce_result lossy_producer::produce(const std::string& topic,
                                                       std::optional<std::string_view> key,
                                                       std::string_view value) {
  const void* const key_data = key ? key->data() : nullptr;
  const std::size_t key_size = key ? key->size() : 0;
  // RD_KAFKA_MSG_F_COPY: librdkafka copies the value and does not write to it.
  void* const value_data = const_cast<char*>(value.data());
  const rd_kafka_resp_err_t err = rd_kafka_producev(
      handle_->client.get(), RD_KAFKA_V_TOPIC(topic.c_str()),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key_data, key_size),
      RD_KAFKA_V_VALUE(value_data, value.size()), RD_KAFKA_V_END);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return produce_result::queued;
  if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) return produce_result::queue_full;
  ++refused_;
  last_error_ = rd_kafka_err2str(err);
  return produce_result::refused;
}

void lossy_producer::poll(std::chrono::milliseconds timeout) {
  rd_kafka_poll(handle_->client.get(), static_cast<int>(timeout.count()));
}

void lossy_producer::close() {
  if (!handle_ || !handle_->client) return;
  rd_kafka_purge(handle_->client.get(), RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  rd_kafka_flush(handle_->client.get(), 1000);
  handle_->client.reset();
}

}  // namespace sketchd::kafka
