// Built and run in ThreadSanitizer builds only (see CMakeLists.txt beside this file): a
// deliberate data race between librdkafka's log callback, called on its own threads, and
// the main thread. The test passes when ThreadSanitizer reports it, which shows that the
// sanitizer sees librdkafka's threads (daemon/tsan_c11_threads.cpp) and that its options
// do not hide races in our callbacks; a build where either is lost would pass every other
// test with nothing checked.
#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace {

int unguarded = 0;               // written by both threads without synchronization
std::atomic<int> log_calls = 0;  // lets the main thread wait for the callback

void on_log(const rd_kafka_t*, int, const char*, const char*) {
  ++unguarded;
  log_calls.fetch_add(1);
}

}  // namespace

int main() {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // Nothing listens on port 1: the client keeps trying to connect, and logs every try.
  if (rd_kafka_conf_set(conf, "bootstrap.servers", "127.0.0.1:1", error, sizeof error) !=
          RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf, "debug", "broker", error, sizeof error) != RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "configuration: %s\n", error);
    return 1;
  }
  rd_kafka_conf_set_log_cb(conf, on_log);
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  if (producer == nullptr) {
    std::fprintf(stderr, "cannot create a producer: %s\n", error);
    return 1;
  }
  // Write while the callback runs, until it has run 5 more times (at most 10 s).
  const int start = log_calls.load();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (log_calls.load() < start + 5 && std::chrono::steady_clock::now() < deadline) {
    ++unguarded;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  rd_kafka_destroy(producer);
  std::printf("no race reported (%d writes)\n", unguarded);
  return 0;
}
