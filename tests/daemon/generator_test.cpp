// The `generator:` section's producer, against the embedded cluster: what it does when the
// broker goes away, and how it stops.
#include "sketchd/generator/generator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "sketchd/kafka/mock_cluster.h"

namespace sketchd {
namespace {

using namespace std::chrono_literals;

generator_config config_at(std::uint64_t rate) {
  generator_config c;
  c.topic = "events";
  c.rate = rate;
  c.distinct = 1000;
  return c;
}

// With the broker away, events queue in the producer (here at most 1,000 of them) and the
// generator falls behind its rate. When it comes back, at most one second of events is
// owed: the rest is skipped, instead of a burst of everything missed that would swamp
// the windows. R = 5,000/s and the broker away for D = 3 s: the queue fills in 0.2 s, so
// about R·(D − 0.2 − 1) = 9,000 events are skipped; at least half of that is required,
// which leaves room for a slow machine (a generator that cannot keep up skips more). Once
// the broker is back the generator produces again: R/2 = 2,500 events more within 20 s
// (the producer reconnects after its backoff, up to reconnect.backoff.max.ms, 10 s). And it
// never skips more than what came due while it could not produce: R per second from the
// broker's going away to the resumption, plus one second for a slow machine.
TEST(Generator, AfterAStallOwesAtMostOneSecond) {
  constexpr int kRate = 5000;
  kafka::mock_cluster cluster;
  cluster.create_topic("events", 2);
  generator g(config_at(kRate), cluster.bootstrap_servers(),
              {{"queue.buffering.max.messages", "1000"}});
  g.start();
  std::this_thread::sleep_for(500ms);
  const auto down = std::chrono::steady_clock::now();
  cluster.set_broker_down(-1);
  std::this_thread::sleep_for(3s);
  const std::uint64_t produced_before = g.produced();
  cluster.set_broker_up(-1);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (g.produced() < produced_before + kRate / 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  const auto resumed = std::chrono::steady_clock::now();
  const std::uint64_t skipped = g.skipped();
  EXPECT_GE(g.produced(), produced_before + kRate / 2)
      << "no production since the broker came back";
  g.stop();
  EXPECT_GE(skipped, kRate * (3.0 - 0.2 - 1.0) / 2);
  EXPECT_LE(static_cast<double>(skipped),
            kRate * (std::chrono::duration<double>(resumed - down).count() + 1.0));
  EXPECT_FALSE(g.fatal_error());
}

// The events are synthetic: a stop does not wait for a broker that is away (a flush of
// what is queued would wait 5 s, adding to the daemon's shutdown). 3 s bounds the purge
// and the delivery reports it serves (1 s at most) with room for a slow machine; three times
// that under a sanitizer, which slows everything down several times.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kSlow = 3;
#else
constexpr int kSlow = 1;
#endif
TEST(Generator, StopsPromptlyWithTheBrokerAway) {
  kafka::mock_cluster cluster;
  cluster.create_topic("events", 2);
  generator g(config_at(20000), cluster.bootstrap_servers(), {});
  g.start();
  std::this_thread::sleep_for(300ms);
  cluster.set_broker_down(-1);
  std::this_thread::sleep_for(500ms);
  const auto start = std::chrono::steady_clock::now();
  g.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kSlow * 3s);
  EXPECT_GT(g.produced(), 0u);
}

}  // namespace
}  // namespace sketchd
