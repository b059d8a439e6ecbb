// The JSON API: the answers rendered from the pipeline's status structs (their members, in
// their order, and their numbers as the API has always written them), and the routes that
// find the pipeline and the item of a request.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sketchd/http/api.h"
#include "sketchd/http/server.h"
#include "sketchd/util/json.h"

namespace sketchd {
namespace {

using namespace std::chrono_literals;

TEST(HttpApi, APipelineIsDescribedWithItsSettingsAndState) {
  pipeline_status s;
  s.name = "clicks";
  s.topics = {"events", "more"};
  s.item = item_config{.from = item_source::json, .path = "/user/id", .header = "unused"};
  s.clock = clock_kind::wall;
  s.shards = 1;
  s.items_total = 135;
  s.heavy_hitters = heavy_hitters_status{.window_ms = 10000,
                                         .buckets = 5,
                                         .epsilon = 0.001,
                                         .delta = 0.01,
                                         .top_k = 10,
                                         .threshold = 1.0,
                                         .window_items = 135,
                                         .error_bound = 0.125};
  s.dedup = dedup_status{.window_ms = 10000,
                         .capacity = 20000,
                         .generations = 2,
                         .first_seen_total = 9,
                         .duplicates_total = 126,
                         .target_fpr = 0.001,
                         .estimated_fpr = 3.6805509842864646e-12,
                         .estimated_items = 9.0,
                         .fill_ratio = {0.00048828125, 0},
                         .forwarded_total = 7,
                         .guaranteed_horizon_ms = 10002,
                         .effective_window_ms = 3000};
  // Integral numbers are written as integers ("threshold":1, "estimated_items":9).
  EXPECT_EQ(
      json::dump(http::to_json(s)),
      R"({"name":"clicks","topics":["events","more"],"item":{"from":"json","path":"/user/id"},)"
      R"("clock":"wall","scope":"instance","shards":1,"items_total":135,"heavy_hitters":{"window_ms":10000,"buckets":5,)"
      R"("epsilon":0.001,"delta":0.01,"top_k":10,"threshold":1,"window_items":135,)"
      R"("error_bound":0.125},"dedup":{"window_ms":10000,"capacity":20000,"generations":2,)"
      R"("first_seen_total":9,"duplicates_total":126,"target_fpr":0.001,)"
      R"("estimated_fpr":3.6805509842864646e-12,"estimated_items":9,)"
      R"("fill_ratio":[0.00048828125,0],"forwarded_total":7,"guaranteed_horizon_ms":10002,)"
      R"("effective_window_ms":3000}})");
  // The item's source says only what it has: a header's name, nothing for a key.
  s.item.from = item_source::header;
  s.heavy_hitters.reset();
  s.dedup.reset();
  EXPECT_EQ(
      json::dump(http::to_json(s)),
      R"({"name":"clicks","topics":["events","more"],"item":{"from":"header","name":"unused"},)"
      R"("clock":"wall","scope":"instance","shards":1,"items_total":135})");
  s.item.from = item_source::key;
  EXPECT_NE(json::dump(http::to_json(s)).find(R"("item":{"from":"key"},)"), std::string::npos);
}

// JSON strings hold text: an item that is not valid UTF-8 shows U+FFFD for each invalid
// byte, and its exact bytes follow in base64, which a script can send back.
TEST(HttpApi, AnItemThatIsNotUtf8ComesWithItsBytesInBase64) {
  const estimate_status e{.item = "bin\xff\xfe\"\\\nkey",
                          .estimate = 9,
                          .error_bound = 0.13496434234717583,
                          .window_items = 135};
  EXPECT_EQ(json::dump(http::to_json(e)),
            "{\"item\":\"bin\xef\xbf\xbd\xef\xbf\xbd\\\"\\\\\\nkey\",\"item_base64\":"
            "\"Ymlu//4iXAprZXk=\",\"estimate\":9,\"error_bound\":0.13496434234717583,"
            "\"window_items\":135}");
  const seen_status s{.item = "u1", .seen = true, .estimated_fpr = 0.25};
  EXPECT_EQ(json::dump(http::to_json(s)),
            R"({"item":"u1","seen":true,"estimated_fpr":0.25,"false_positive_ratio":0.25})");
}

TEST(HttpApi, TheTopKListsItsItemsInOrder) {
  topk_status t{.pipeline = "keys",
                .window_items = 135,
                .threshold = 0.02,
                .error_bound = 0.125,
                .items = {{"\xed\xa0\x80sur", 27, 0.2, true}, {"caf\xc3\xa9", 21, 0.5, false}}};
  EXPECT_EQ(json::dump(http::to_json(t)),
            "{\"pipeline\":\"keys\",\"window_items\":135,\"threshold\":0.02,\"error_bound\":0.125,"
            "\"items\":[{\"item\":\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdsur\",\"item_base64\":"
            "\"7aCAc3Vy\",\"estimate\":27,\"ratio\":0.2,\"heavy\":true},{\"item\":\"caf\xc3\xa9\","
            "\"estimate\":21,\"ratio\":0.5,\"heavy\":false}]}");
  t.items.clear();
  EXPECT_NE(json::dump(http::to_json(t)).find(R"("items":[])"), std::string::npos);
}

TEST(HttpApi, AnErrorIsOneJsonMember) {
  EXPECT_EQ(http::error_body("no pipeline named \"x\xff\""),
            "{\"error\":\"no pipeline named \\\"x\xef\xbf\xbd\\\"\"}\n");
}

pipeline_config keyed(std::string name, bool heavy_hitters) {
  pipeline_config c;
  c.name = std::move(name);
  c.topics = {"events"};
  c.item.from = item_source::key;
  c.clock = clock_kind::wall;
  if (heavy_hitters) {
    c.heavy_hitters = heavy_hitters_config{.window = 10s,
                                           .buckets = 5,
                                           .epsilon = 0.001,
                                           .delta = 0.01,
                                           .top_k = 10,
                                           .threshold = 0.02,
                                           .alerts_topic = {}};
  } else {
    c.dedup = dedup_config{
        .window = 10s, .capacity = 1000, .fpr = 0.001, .output_topic = {}, .duplicates_topic = {}};
  }
  return c;
}

// The routes over a live listener: the pipeline named in the path, the item in the query
// (percent-encoded bytes, '+' a space), and a JSON error for what cannot be answered.
TEST(HttpApi, TheRoutesFindThePipelineAndTheItem) {
  pipeline hh(keyed("hh", true));
  pipeline dd(keyed("dd", false));
  const std::int64_t wall = 1'790'000'000'000;
  for (pipeline* p : {&hh, &dd}) {
    p->begin_batch();
    for (const std::string key : {"a b", "bin\xff", "bin\xff", "bin\xff"}) {
      message_view m;
      m.has_key = true;
      m.key = key;
      (void)p->process(m, wall, wall);
    }
    (void)p->end_batch(wall);
  }
  metrics::registry registry;
  readiness ready;
  const http_config cfg{
      .listen = "127.0.0.1:0", .host = "127.0.0.1", .port = 0, .basic_auth_users = {}, .tls = {}};
  http_server server(cfg, registry, {&hh, &dd}, ready);
  httplib::Client client("127.0.0.1", server.start());
  client.set_url_encode(false);  // the paths are sent as they are written here
  const auto get = [&](const std::string& path) {
    auto res = client.Get(path);
    EXPECT_TRUE(res) << path;
    return res ? std::make_pair(res->status, res->body) : std::make_pair(0, std::string());
  };
  EXPECT_EQ(get("/api/v1/pipelines"),
            std::make_pair(200, "{\"pipelines\":[" + http::describe_json(hh) + "," +
                                    http::describe_json(dd) + "]}\n"));
  EXPECT_EQ(get("/api/v1/pipelines/h%68"), std::make_pair(200, http::describe_json(hh) + "\n"));
  EXPECT_EQ(get("/api/v1/pipelines/hh/topk"), std::make_pair(200, *http::topk_json(hh) + "\n"));
  EXPECT_EQ(get("/api/v1/pipelines/hh/estimate?item=bin%FF"),
            std::make_pair(200, *http::estimate_json(hh, "bin\xff") + "\n"));
  EXPECT_NE(get("/api/v1/pipelines/hh/estimate?item=bin%FF").second.find("\"estimate\":3,"),
            std::string::npos);
  EXPECT_EQ(get("/api/v1/pipelines/dd/seen?x=1&item=a+b"),
            std::make_pair(200, *http::seen_json(dd, "a b") + "\n"));
  EXPECT_EQ(get("/api/v1/pipelines/nope/topk"),
            std::make_pair(404, http::error_body("no pipeline named \"nope\"")));
  EXPECT_EQ(get("/api/v1/pipelines/dd/topk"),
            std::make_pair(404, http::error_body("pipeline \"dd\" has no heavy_hitters section")));
  EXPECT_EQ(get("/api/v1/pipelines/hh/seen?item=x"),
            std::make_pair(404, http::error_body("pipeline \"hh\" has no dedup section")));
  EXPECT_EQ(get("/api/v1/pipelines/hh/estimate"),
            std::make_pair(400, http::error_body("the query parameter \"item\" is required")));
  EXPECT_EQ(get("/api/v1/pipelines/hh/estimate?item="),
            std::make_pair(400, http::error_body("the query parameter \"item\" is empty (an empty "
                                                 "item is never counted)")));
  EXPECT_EQ(get("/api/v1/pipelines/hh/estimate?item=a&item=b"),
            std::make_pair(
                400, http::error_body("the query parameter \"item\" is given more than once")));
  server.stop();
}

}  // namespace
}  // namespace sketchd
