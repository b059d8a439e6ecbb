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
// which leaves room for a slow machine (a generator that cannot keep up skips more), and
// at most R·D = 15,000, what the outage owed in all. Once the broker is back the generator
// produces again: in the next 1.5 s, at least R/2 = 2,500 events more (about 8,500 are due:
// the second it still owes and its rate since).
TEST(Generator, AfterAStallOwesAtMostOneSecond) {
  kafka::mock_cluster cluster;
  cluster.create_topic("events", 2);
  generator g(config_at(5000), cluster.bootstrap_servers(),
              {{"queue.buffering.max.messages", "1000"}});
  g.start();
  std::this_thread::sleep_for(500ms);
  cluster.set_broker_down(-1);
  std::this_thread::sleep_for(3s);
  const std::uint64_t produced_before = g.produced();
  cluster.set_broker_up(-1);
  std::this_thread::sleep_for(1500ms);
  const std::uint64_t produced_after = g.produced();
  g.stop();
  EXPECT_GE(g.skipped(), 5000 * (3.0 - 0.2 - 1.0) / 2);
  EXPECT_LE(g.skipped(), 5000 * 3);
  EXPECT_GE(produced_after, produced_before + 5000 / 2);
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
