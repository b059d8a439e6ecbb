// The baseline of bench/kafka_throughput.sh: a bare librdkafka client that does nothing per
// message, with exactly the consumer settings of sketchd's source (sketchd/kafka/source.cpp:
// cooperative-sticky, fetch.wait.max.ms 100, queued.min.messages 1000000, offsets stored by
// the application once per batch and partition with rd_kafka_offsets_store(), batches of up
// to --batch messages polled like source::poll_batch).
//
//   kafka_bare consume --brokers B --topic T --group G --count N [--batch 5000]
//       reads N messages and prints "rate: R msg/s" (first message to the Nth) and the CPU
//       time per message of its threads over the same interval ("cpu ns per message: …",
//       from /proc: app, the polling thread; librdkafka, its threads), its page faults, and
//       the shares of the machine's CPU time left idle and taken by a virtual machine's host
//       (steal)
//   kafka_bare pipe --brokers B --topic T --group G --count N --output O [--batch 5000]
//       the same, producing each message (key, value, headers, timestamp) to O with an
//       idempotent producer and storing an input offset only after its delivery report —
//       the bare equivalent of sketchd's forward path, every message forwarded
#include <fmt/format.h>
#include <librdkafka/rdkafka.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/source.h"

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
  std::string brokers;
  std::string topic;
  std::string group;
  std::string output;
  std::uint64_t count = 0;
  std::uint32_t batch = 5000;
};

// CPU seconds of this process's threads: the application's (the main thread) and
// librdkafka's (threads named rdk:…), from /proc/self/task (Linux; zero elsewhere).
struct thread_cpu {
  double app = 0;
  double librdkafka = 0;
  double machine_idle = 0;   // idle + iowait of every CPU of the machine, from /proc/stat
  double machine_steal = 0;  // time a virtual machine's CPUs waited for the host's
  long minor_faults = 0;     // this process's page faults (getrusage)
  long major_faults = 0;
};

thread_cpu read_thread_cpu() {
  thread_cpu cpu;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  const std::string self = std::to_string(getpid());
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm_file(task.path() / "comm");
    std::ifstream stat_file(task.path() / "stat");
    std::string comm;
    std::string stat;
    std::getline(comm_file, comm);
    std::getline(stat_file, stat);
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 1));
    std::string field;
    double ticks = 0;
    for (int i = 0; i < 13 && fields >> field; ++i) {
      if (i == 11 || i == 12) ticks += std::stod(field);  // utime, stime
    }
    if (task.path().filename() == self) {
      cpu.app += ticks / tick;
    } else if (comm.starts_with("rdk:")) {
      cpu.librdkafka += ticks / tick;
    }
  }
  std::ifstream proc_stat("/proc/stat");
  std::string cpu_label;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (proc_stat >> cpu_label >> user >> nice >> system >> idle >> iowait) {
    cpu.machine_idle = (idle + iowait) / tick;
    if (proc_stat >> irq >> softirq >> steal) cpu.machine_steal = steal / tick;
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    cpu.minor_faults = usage.ru_minflt;
    cpu.major_faults = usage.ru_majflt;
  }
  return cpu;
}

sketchd::kafka::handle_ptr make_consumer(const options& o) {
  sketchd::kafka::client_config conf;
  conf.set("partition.assignment.strategy", "cooperative-sticky");
  conf.set("statistics.interval.ms", "5000");
  conf.set("fetch.wait.max.ms", "100");
  conf.set("queued.min.messages", "1000000");
  conf.set("auto.offset.reset", "earliest");
  conf.set("session.timeout.ms", "6000");
  conf.set("bootstrap.servers", o.brokers);
  conf.set("group.id", o.group);
  conf.set("enable.auto.offset.store", "false");
  conf.set("enable.partition.eof", "false");
  auto consumer = std::move(conf).create(RD_KAFKA_CONSUMER);
  rd_kafka_poll_set_consumer(consumer.get());
  sketchd::kafka::topic_partition_list_ptr topics(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(topics.get(), o.topic.c_str(), RD_KAFKA_PARTITION_UA);
  sketchd::kafka::throw_if_error(rd_kafka_subscribe(consumer.get(), topics.get()), "subscribe");
  return consumer;
}

// Delivered input positions waiting to be stored, per partition (pipe mode).
struct pipe_state {
  std::uint64_t delivered = 0;
  std::uint64_t failed = 0;
  std::map<std::int32_t, std::int64_t> next;  // partition → offset + 1 of the last delivered
};

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* state = static_cast<pipe_state*>(opaque);
  if (m->err) {
    ++state->failed;
    return;
  }
  ++state->delivered;
  // Input partition and offset travel in the message opaque: partition << 40 | offset.
  const auto packed = reinterpret_cast<std::uintptr_t>(m->_private);
  const auto partition = static_cast<std::int32_t>(packed >> 40);
  const auto offset = static_cast<std::int64_t>(packed & ((std::uintptr_t{1} << 40) - 1));
  auto& next = state->next[partition];
  next = std::max(next, offset + 1);
}

int run(const options& o, bool pipe) {
  auto consumer = make_consumer(o);
  pipe_state state;
  sketchd::kafka::handle_ptr producer;
  rd_kafka_topic_t* output = nullptr;
  if (pipe) {
    sketchd::kafka::client_config conf;
    conf.set("bootstrap.servers", o.brokers);
    conf.set("enable.idempotence", "true");
    conf.set("partitioner", "murmur2_random");
    conf.set("linger.ms", "5");
    rd_kafka_conf_set_dr_msg_cb(conf.get(), on_delivery);
    rd_kafka_conf_set_opaque(conf.get(), &state);
    producer = std::move(conf).create(RD_KAFKA_PRODUCER);
    output = rd_kafka_topic_new(producer.get(), o.output.c_str(), nullptr);
  }
  std::vector<rd_kafka_message_t*> batch;
  batch.reserve(o.batch);
  // Consume mode: offset + 1 of the batch's last message per partition (-1: none), and the
  // partitions the batch touched.
  std::vector<std::int64_t> batch_next;
  std::vector<std::int32_t> touched;
  std::uint64_t consumed = 0;
  clock_type::time_point first{};
  thread_cpu cpu_first;
  while (consumed < o.count || (pipe && state.delivered + state.failed < o.count)) {
    int timeout = 100;
    std::size_t bytes = 0;  // and, as sketchd's source, up to its bytes bound
    while (batch.size() < o.batch && bytes < sketchd::kafka::source_options::kDefaultBatchBytes) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer.get(), timeout);
      if (m == nullptr) break;
      timeout = 0;
      if (m->err) {
        rd_kafka_message_destroy(m);
        continue;
      }
      batch.push_back(m);
      bytes += m->len + m->key_len;
    }
    if (!batch.empty() && consumed == 0) {
      first = clock_type::now();
      cpu_first = read_thread_cpu();
    }
    for (rd_kafka_message_t* m : batch) {
      if (pipe) {
        rd_kafka_headers_t* headers = nullptr;
        rd_kafka_headers_t* copy = nullptr;
        if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR && headers) {
          copy = rd_kafka_headers_copy(headers);
        }
        rd_kafka_timestamp_type_t type;
        const std::int64_t ts = rd_kafka_message_timestamp(m, &type);
        const auto packed = (static_cast<std::uintptr_t>(m->partition) << 40) |
                            static_cast<std::uintptr_t>(m->offset);
        for (;;) {
          const rd_kafka_resp_err_t err = rd_kafka_producev(
              producer.get(), RD_KAFKA_V_RKT(output), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
              RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len),
              RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0), RD_KAFKA_V_HEADERS(copy),
              RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(packed)), RD_KAFKA_V_END);
          if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) break;
          rd_kafka_poll(producer.get(), 10);
        }
      } else {
        // Nothing per message but noting its position, to store the batch's offsets as
        // sketchd does: once per batch and partition.
        const auto p = static_cast<std::size_t>(m->partition);
        if (p >= batch_next.size()) batch_next.resize(p + 1, -1);
        if (batch_next[p] < 0) touched.push_back(m->partition);
        batch_next[p] = std::max(batch_next[p], m->offset + 1);
      }
      rd_kafka_message_destroy(m);
    }
    consumed += batch.size();
    batch.clear();
    if (!touched.empty()) {
      sketchd::kafka::topic_partition_list_ptr list(
          rd_kafka_topic_partition_list_new(static_cast<int>(touched.size())));
      for (const std::int32_t p : touched) {
        auto& next = batch_next[static_cast<std::size_t>(p)];
        rd_kafka_topic_partition_list_add(list.get(), o.topic.c_str(), p)->offset = next;
        next = -1;
      }
      rd_kafka_offsets_store(consumer.get(), list.get());
      touched.clear();
    }
    if (pipe) {
      rd_kafka_poll(producer.get(), 0);
      if (!state.next.empty()) {
        sketchd::kafka::topic_partition_list_ptr list(
            rd_kafka_topic_partition_list_new(static_cast<int>(state.next.size())));
        for (const auto& [p, next] : state.next) {
          rd_kafka_topic_partition_list_add(list.get(), o.topic.c_str(), p)->offset = next;
        }
        rd_kafka_offsets_store(consumer.get(), list.get());
        state.next.clear();
      }
    }
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - first).count();
  const thread_cpu cpu_last = read_thread_cpu();
  fmt::print("consumed: {}\n", consumed);
  if (pipe) fmt::print("delivered: {}\nfailed: {}\n", state.delivered, state.failed);
  fmt::print("seconds: {:.3f}\nrate: {:.0f} msg/s\n", seconds,
             static_cast<double>(o.count) / seconds);
  const double per_message = 1e9 / static_cast<double>(o.count);
  const auto cpus = static_cast<double>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  fmt::print(
      "cpu ns per message: app={:.0f} librdkafka={:.0f}; page faults {} minor, {} major; machine "
      "idle {:.0f}%, steal {:.0f}%\n",
      (cpu_last.app - cpu_first.app) * per_message,
      (cpu_last.librdkafka - cpu_first.librdkafka) * per_message,
      cpu_last.minor_faults - cpu_first.minor_faults,
      cpu_last.major_faults - cpu_first.major_faults,
      100 * (cpu_last.machine_idle - cpu_first.machine_idle) / (seconds * cpus),
      100 * (cpu_last.machine_steal - cpu_first.machine_steal) / (seconds * cpus));
  if (output) rd_kafka_topic_destroy(output);
  rd_kafka_consumer_close(consumer.get());
  return state.failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "A bare librdkafka consumer (and consume-produce pipe): the baseline of "
      "bench/kafka_throughput.sh");
  app.require_subcommand(1);
  options o;
  const auto common = [&o](CLI::App* c) {
    c->add_option("--brokers", o.brokers, "Bootstrap servers")->required();
    c->add_option("--topic", o.topic, "Input topic")->required();
    c->add_option("--group", o.group, "Consumer group (use a fresh one per run)")->required();
    c->add_option("--count", o.count, "Messages to read")->required()->check(CLI::PositiveNumber);
    c->add_option("--batch", o.batch, "Messages per poll batch, as sketchd's kafka.batch_size")
        ->capture_default_str();
  };
  CLI::App* consume =
      app.add_subcommand("consume", "Read COUNT messages, doing nothing per message");
  common(consume);
  CLI::App* pipe = app.add_subcommand("pipe", "Read COUNT messages and produce each to --output");
  common(pipe);
  pipe->add_option("--output", o.output, "Output topic")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o, pipe->parsed());
  } catch (const std::exception& e) {
    fmt::print(stderr, "kafka_bare: {}\n", e.what());
    return 1;
  }
}
