// Shared by the HTTP fuzz targets (http_fuzz.cpp, http_connection_fuzz.cpp): the daemon's
// routes over three pipelines fed a few items, and the parsing of an answer.
#pragma once

#include <httplib.h>
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz.h"
#include "sketchd/config/config.h"
#include "sketchd/http/api.h"
#include "sketchd/http/server.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"

namespace http_fuzz {

inline constexpr std::string_view kConfig = R"(kafka: { brokers: "localhost:9092", group_id: g }
pipelines:
  - name: both
    topics: [a]
    item: { from: value }
    clock: wall
    heavy_hitters: { window: 1m, buckets: 6, epsilon: 0.001, delta: 0.01, top_k: 5 }
    dedup: { window: 5m, capacity: 10k, fpr: 0.01 }
  - name: hh
    topics: [b]
    item: { from: value }
    heavy_hitters: { window: 1m, buckets: 6, epsilon: 0.001, delta: 0.01, top_k: 5 }
  - name: dd
    topics: [c]
    item: { from: value }
    dedup: { window: 5m, capacity: 10k, fpr: 0.01 }
)";

// Items fed to every pipeline, and how many times.
inline const std::vector<std::pair<std::string, int>> kFed = {
    {"u0", 100}, {"u1", 10}, {"u2", 1}, {"é \"quoted\" / & = + %", 3}, {std::string("a\0b", 3), 2}};

struct fixture {
  std::vector<std::unique_ptr<sketchd::pipeline>> pipelines;
  sketchd::metrics::registry registry;
  sketchd::readiness ready;
  httplib::Server* server = nullptr;  // the routes' server, owned by http
  std::unique_ptr<sketchd::http_server> http;
  std::vector<std::string> state;  // what must not change

  explicit fixture(std::unique_ptr<httplib::Server> s) {
    auto loaded = sketchd::load_config_string(kConfig, "fuzz.yaml", fuzz_env);
    FUZZ_CHECK(loaded.value.has_value());
    const std::int64_t wall_ms = 1'700'000'000'000;
    std::vector<const sketchd::pipeline*> readers;
    for (const auto& pc : loaded.value->pipelines) {
      auto& p = pipelines.emplace_back(std::make_unique<sketchd::pipeline>(pc));
      p->begin_batch();
      for (const auto& [item, times] : kFed) {
        sketchd::message_view m;
        m.value = item;
        for (int i = 0; i < times; ++i) (void)p->process(m, wall_ms, wall_ms);
      }
      (void)p->end_batch(wall_ms);
      p->register_metrics(registry);
      readers.push_back(p.get());
    }
    ready.set(true);
    server = s.get();
    http = std::make_unique<sketchd::http_server>(loaded.value->http, registry, readers, ready,
                                                  std::move(s));
    state = snapshot();
  }

  [[nodiscard]] std::vector<std::string> snapshot() const {
    std::vector<std::string> out;
    for (const auto& p : pipelines) {
      out.push_back(sketchd::http::describe_json(*p));
      out.push_back(sketchd::http::topk_json(*p).value_or(""));
    }
    out.push_back(registry.scrape());
    return out;
  }
};

struct response {
  int status = 0;
  std::string content_type;
  std::string body;
};

// Parses what the server wrote; a violation of HTTP/1.1's framing fails the check.
inline response parse(const std::string& raw) {
  response r;
  FUZZ_CHECK(raw.size() >= 17 && raw.compare(0, 9, "HTTP/1.1 ") == 0);
  r.status = std::stoi(raw.substr(9, 3));
  const std::size_t end = raw.find("\r\n\r\n");
  FUZZ_CHECK(end != std::string::npos);
  const std::string_view head(raw.data(), end);
  for (std::size_t line = head.find("\r\n"); line != std::string_view::npos;) {
    const std::size_t next = head.find("\r\n", line + 2);
    const std::string_view h = head.substr(
        line + 2, next == std::string_view::npos ? std::string_view::npos : next - line - 2);
    if (h.rfind("Content-Type: ", 0) == 0) r.content_type = std::string(h.substr(14));
    line = next;
  }
  r.body = raw.substr(end + 4);
  return r;
}

inline simdjson::dom::parser& json_parser() {
  static simdjson::dom::parser parser;
  return parser;
}

}  // namespace http_fuzz
