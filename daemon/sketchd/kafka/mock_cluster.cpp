#include "sketchd/kafka/mock_cluster.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "sketchd/config/config.h"
#include "sketchd/kafka/client.h"

namespace sketchd::kafka {
namespace {

using namespace std::chrono_literals;

// Opens and closes a connection to 127.0.0.1:port; failures do not matter.
void touch(std::uint16_t port) noexcept {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  static_cast<void>(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address));
  ::close(fd);
}

// librdkafka 2.0 hands the mock cluster's control requests (broker down, up and rtt,
// partition leader, destroy) to the cluster's thread through a queue whose wake-up is
// written once and not re-armed by that thread, so a request often waits for the
// thread's 1 s poll timeout. An incoming connection wakes the thread too: while a request
// runs, this helper thread opens and closes a connection every 2 ms, cycling through the
// brokers since one that is down does not listen. Not thread-safe; one owner.
class wakeup_pulse {
 public:
  explicit wakeup_pulse(const std::vector<std::uint16_t>& ports)
      : thread_([&ports](const std::stop_token& stop) {
          for (std::size_t next = 0; !stop.stop_requested(); ++next) {
            touch(ports[next % ports.size()]);
            std::this_thread::sleep_for(2ms);
          }
        }) {}

 private:
  std::jthread thread_;  // stopped and joined on destruction
};

// The ports of "127.0.0.1:PORT[,127.0.0.1:PORT…]".
std::vector<std::uint16_t> ports_of(std::string_view bootstrap_servers) {
  std::vector<std::uint16_t> ports;
  while (!bootstrap_servers.empty()) {
    const std::size_t comma = bootstrap_servers.find(',');
    const std::string_view address = bootstrap_servers.substr(0, comma);
    bootstrap_servers =
        comma == std::string_view::npos ? std::string_view() : bootstrap_servers.substr(comma + 1);
    const std::string_view port = address.substr(address.rfind(':') + 1);
    std::uint16_t value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec == std::errc() && end == port.data() + port.size()) ports.push_back(value);
  }
  return ports;
}

}  // namespace

template <typename Call>
void mock_cluster::with_wakeups(Call&& call) {
  std::optional<wakeup_pulse> pulse;
  if (!ports_.empty()) {
    try {
      pulse.emplace(ports_);
    } catch (const std::system_error&) {  // no thread: the request is only slower
    }
  }
  std::forward<Call>(call)();
}

void mock_cluster::handle_deleter::operator()(rd_kafka_s* handle) const noexcept {
  rd_kafka_destroy(handle);
}

void mock_cluster::cluster_deleter::operator()(rd_kafka_mock_cluster_s* cluster) const noexcept {
  rd_kafka_mock_cluster_destroy(cluster);
}

mock_cluster::mock_cluster(int brokers) : broker_count_(brokers) {
  if (brokers < 1 || brokers > kMaxBrokers) {
    throw std::invalid_argument(
        fmt::format("mock cluster brokers must be in 1..{}, not {}", kMaxBrokers, brokers));
  }
  // The cluster needs a client handle for its bookkeeping; this producer never connects
  // anywhere. It has no bootstrap.servers, which librdkafka notes at level 5: keep
  // warnings and errors only.
  client_config config;
  config.set("client.id", "sketchd-mock-cluster");
  config.set("log_level", "4");
  handle_.reset(std::move(config).create(RD_KAFKA_PRODUCER).release());

  cluster_.reset(rd_kafka_mock_cluster_new(handle_.get(), brokers));
  if (!cluster_) {
    // librdkafka has logged why (typically a socket that could not be bound).
    throw kafka_error("start mock cluster", error_code::fail, {},
                      "librdkafka could not start the mock brokers; see its log");
  }
  bootstrap_servers_ = rd_kafka_mock_cluster_bootstraps(cluster_.get());
  ports_ = ports_of(bootstrap_servers_);
}

mock_cluster::~mock_cluster() {
  if (cluster_) with_wakeups([this] { cluster_.reset(); });
}

mock_cluster::mock_cluster(mock_cluster&&) noexcept = default;

void mock_cluster::create_topic(std::string_view name, int partitions, int replication_factor) {
  if (!is_valid_topic_name(name)) {
    throw std::invalid_argument(fmt::format(
        "topic name \"{}\" is not a legal Kafka topic name (1..249 of A-Z a-z 0-9 . _ -, not "
        "\".\" or \"..\")",
        name));
  }
  if (partitions < 1 || partitions > kMaxPartitions) {
    throw std::invalid_argument(fmt::format("topic \"{}\": partitions must be in 1..{}, not {}",
                                            name, kMaxPartitions, partitions));
  }
  if (replication_factor < 1 || replication_factor > broker_count_) {
    throw std::invalid_argument(
        fmt::format("topic \"{}\": replication factor must be in 1..{} (the broker count), not {}",
                    name, broker_count_, replication_factor));
  }
  const std::string topic(name);
  throw_if_error(
      rd_kafka_mock_topic_create(cluster_.get(), topic.c_str(), partitions, replication_factor),
      "create topic", error_context(topic));
}

void mock_cluster::set_broker_down(std::int32_t broker_id) {
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  with_wakeups([&] { err = rd_kafka_mock_broker_set_down(cluster_.get(), broker_id); });
  throw_if_error(err, fmt::format("set mock broker {} down", broker_id));
}

void mock_cluster::set_broker_up(std::int32_t broker_id) {
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  with_wakeups([&] { err = rd_kafka_mock_broker_set_up(cluster_.get(), broker_id); });
  throw_if_error(err, fmt::format("set mock broker {} up", broker_id));
}

void mock_cluster::set_broker_rtt(std::int32_t broker_id, std::chrono::milliseconds rtt) {
  if (rtt.count() < 0 || rtt.count() > std::numeric_limits<int>::max()) {
    throw std::invalid_argument(fmt::format("mock broker rtt must be 0..{} ms, not {} ms",
                                            std::numeric_limits<int>::max(), rtt.count()));
  }
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  with_wakeups([&] {
    err = rd_kafka_mock_broker_set_rtt(cluster_.get(), broker_id, static_cast<int>(rtt.count()));
  });
  throw_if_error(err, fmt::format("set mock broker {} rtt", broker_id));
}

void mock_cluster::set_partition_leader(std::string_view topic, std::int32_t partition,
                                        std::int32_t broker_id) {
  const std::string name(topic);
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  with_wakeups([&] {
    err = rd_kafka_mock_partition_set_leader(cluster_.get(), name.c_str(), partition, broker_id);
  });
  throw_if_error(err, fmt::format("set partition leader to mock broker {}", broker_id),
                 error_context(name, partition));
}

void mock_cluster::set_coordinator(std::string_view kind, std::string_view key,
                                   std::int32_t broker_id) {
  const std::string k(kind);
  const std::string name(key);
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  with_wakeups([&] {
    err = rd_kafka_mock_coordinator_set(cluster_.get(), k.c_str(), name.c_str(), broker_id);
  });
  throw_if_error(err,
                 fmt::format("set the {} coordinator of {} to mock broker {}", k, name, broker_id));
}

void mock_cluster::push_request_errors(api_key key, std::span<const error_code> errors) {
  std::vector<rd_kafka_resp_err_t> codes;
  codes.reserve(errors.size());
  for (const error_code code : errors) codes.push_back(to_rd_kafka(code));
  rd_kafka_mock_push_request_errors_array(cluster_.get(), static_cast<std::int16_t>(key),
                                          codes.size(), codes.data());
}

void mock_cluster::clear_request_errors(api_key key) {
  rd_kafka_mock_clear_request_errors(cluster_.get(), static_cast<std::int16_t>(key));
}

}  // namespace sketchd::kafka
