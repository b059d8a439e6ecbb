// /healthz and /readyz over a real socket: /readyz follows readiness::set(), /healthz turns
// 503 "stalled" once the processing thread has not beaten for longer than the stall limit,
// and 200 again at its next beat. The limit here is 200 ms instead of a minute; the test
// sleeps well past it, so the outcome does not depend on the machine's speed.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <string>
#include <thread>

#include "sketchd/http/server.h"

namespace sketchd {
namespace {

using namespace std::chrono_literals;

struct served {
  metrics::registry registry;
  readiness ready{200ms};
  http_config cfg{.listen = "127.0.0.1:0", .host = "127.0.0.1", .port = 0};
  http_server server{cfg, registry, {}, ready};
  int port = server.start();

  httplib::Result get(const std::string& path) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5s);
    return client.Get(path);
  }
};

TEST(HttpHealth, ReadyzFollowsTheReadinessAndItsReason) {
  served s;
  auto res = s.get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->body, "{\"status\":\"not ready\",\"reason\":\"starting\"}\n");
  s.ready.set(true);
  res = s.get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "{\"status\":\"ready\"}\n");
}

TEST(HttpHealth, HealthzSaysStalledWhenTheLoopStopsBeatingAndOkAtTheNextBeat) {
  served s;
  s.ready.beat();
  auto res = s.get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "{\"status\":\"ok\"}\n");

  std::this_thread::sleep_for(600ms);  // three times the limit
  ASSERT_TRUE(s.ready.stalled().has_value());
  EXPECT_GE(*s.ready.stalled(), 600ms);
  res = s.get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("\"status\":\"stalled\""), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("has not come round its loop"), std::string::npos) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");

  s.ready.beat();
  EXPECT_FALSE(s.ready.stalled().has_value());
  res = s.get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

// A long step (a snapshot, a rebalance's flush, the start and the stop) allows its own
// limit, and the stall limit is back once it ends (a nested one restores the outer one's).
TEST(HttpHealth, ALongStepAllowsMoreTime) {
  readiness ready{200ms};
  {
    const readiness::long_step step(ready, 5000ms);
    EXPECT_EQ(ready.stall_limit(), 5000ms);
    {
      const readiness::long_step inner(ready, 3000ms);
      EXPECT_EQ(ready.stall_limit(), 3000ms);
    }
    EXPECT_EQ(ready.stall_limit(), 5000ms);
    std::this_thread::sleep_for(600ms);  // three times the stall limit, within the step's
    EXPECT_FALSE(ready.stalled().has_value());
  }
  EXPECT_EQ(ready.stall_limit(), 200ms);
  EXPECT_FALSE(ready.stalled().has_value());  // the step's end beats
  std::this_thread::sleep_for(600ms);
  EXPECT_TRUE(ready.stalled().has_value());
}

TEST(HttpHealth, TheDefaultLimitIsAMinute) {
  const readiness ready;
  EXPECT_EQ(ready.stall_limit(), std::chrono::milliseconds(60'000));
  EXPECT_FALSE(ready.stalled().has_value());  // counted from construction
}

}  // namespace
}  // namespace sketchd
