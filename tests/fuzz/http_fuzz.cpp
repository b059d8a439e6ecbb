// The HTTP API: the daemon's routes on httplib's request parser, fed the bytes of one
// connection without a socket. Whatever the request:
// - the answer is a whole HTTP/1.1 response (or none, when the bytes hold no request line),
//   never a 500 (a handler that threw);
// - a JSON body (every answer but /metrics) parses as JSON;
// - the API is read-only: the pipelines' state and counters are what they were;
// - an item given in the query, percent-encoded byte by byte, reaches the pipeline whole:
//   the answer names it (when it is valid UTF-8; other bytes are answered as U+FFFD), an
//   item fed N times is estimated at N or more, an item fed once is seen, and an empty
//   item is a 400.
//
// Input: byte 0 picks the mode.
//   0: the rest is the connection's bytes as they are.
//   1: GET, HEAD or another method (byte 1) of /api/v1/pipelines/NAME/ENDPOINT?QUERY, NAME
//      and ENDPOINT picked by byte 2, QUERY the rest as it is.
//   2: /api/v1/pipelines/both/estimate (byte 1 even) or /seen (odd) with item=ITEM, ITEM
//      the rest percent-encoded whole.
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
#include "sketchd/http/server.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"

namespace {

// The bytes of one connection: reads take the request, writes collect the answer.
class memory_stream final : public httplib::Stream {
 public:
  explicit memory_stream(std::string_view in) : in_(in) {}

  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, std::size_t size) override {
    const std::size_t n = std::min(size, in_.size());
    std::copy_n(in_.data(), n, ptr);
    in_.remove_prefix(n);
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, std::size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 9464;
  }
  socket_t socket() const override { return INVALID_SOCKET; }

  [[nodiscard]] const std::string& written() const { return out_; }

 private:
  std::string_view in_;
  std::string out_;
};

// httplib's server with its request processing, which is protected, made callable.
class fuzz_server final : public httplib::Server {
 public:
  std::string answer(std::string_view request) {
    memory_stream stream(request);
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, [](httplib::Request&) {});
    return stream.written();
  }
};

constexpr std::string_view kConfig = R"(kafka: { brokers: "localhost:9092", group_id: g }
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
const std::vector<std::pair<std::string, int>> kFed = {
    {"u0", 100}, {"u1", 10}, {"u2", 1}, {"é \"quoted\" / & = + %", 3}, {std::string("a\0b", 3), 2}};

struct fixture {
  std::vector<std::unique_ptr<sketchd::pipeline>> pipelines;
  sketchd::metrics::registry registry;
  sketchd::readiness ready;
  fuzz_server* server = nullptr;
  std::unique_ptr<sketchd::http_server> http;
  std::vector<std::string> state;  // what must not change

  fixture() {
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
      registry.add(
          [q = p.get()](std::vector<sketchd::metrics::metric_family>& out) { q->collect(out); });
      readers.push_back(p.get());
    }
    ready.set(true);
    auto s = std::make_unique<fuzz_server>();
    server = s.get();
    http = std::make_unique<sketchd::http_server>(loaded.value->http, registry, readers, ready,
                                                  std::move(s));
    state = snapshot();
  }

  [[nodiscard]] std::vector<std::string> snapshot() const {
    std::vector<std::string> out;
    for (const auto& p : pipelines) {
      out.push_back(p->describe_json());
      out.push_back(p->topk_json().value_or(""));
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
response parse(const std::string& raw) {
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

simdjson::dom::parser& json_parser() {
  static simdjson::dom::parser parser;
  return parser;
}

bool valid_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

std::string percent_encode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : bytes) {
    out += '%';
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fixture f;
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int mode = data[0] % 3;

  std::string request;
  bool head = false;
  std::string item;  // mode 2
  bool estimate = false;
  if (mode == 0) {
    request = std::string(rest);
  } else if (mode == 1) {
    if (rest.size() < 2) return 0;
    constexpr std::string_view kMethods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"};
    constexpr std::string_view kNames[] = {"both", "hh", "dd", "none", "", "b%6Fth"};
    constexpr std::string_view kEndpoints[] = {"", "/topk", "/estimate", "/seen", "/x", "/"};
    const std::string_view method = kMethods[static_cast<std::uint8_t>(rest[0]) % 6];
    head = method == "HEAD";
    const auto pick = static_cast<std::uint8_t>(rest[1]);
    request = std::string(method) + " /api/v1/pipelines/" + std::string(kNames[pick % 6]) +
              std::string(kEndpoints[pick / 6 % 6]) + "?" + std::string(rest.substr(2)) +
              " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  } else {
    if (rest.empty()) return 0;
    estimate = rest[0] % 2 == 0;
    item = std::string(rest.substr(1));
    request = std::string("GET /api/v1/pipelines/both/") + (estimate ? "estimate" : "seen") +
              "?item=" + percent_encode(item) + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  }

  const std::string raw = f.server->answer(request);
  if (raw.empty()) {
    // Nothing is answered only when no request line could be read.
    FUZZ_CHECK(mode == 0);
    return 0;
  }
  const response r = parse(raw);
  FUZZ_CHECK(r.status >= 200 && r.status < 600 && r.status != 500);
  if (r.content_type == "application/json" && !head) {
    simdjson::dom::element doc;
    FUZZ_CHECK(json_parser().parse(r.body).get(doc) == simdjson::SUCCESS);
  }
  FUZZ_CHECK(f.snapshot() == f.state);

  if (mode == 2) {
    if (item.empty()) {
      FUZZ_CHECK(r.status == 400);
      return 0;
    }
    FUZZ_CHECK(r.status == 200);
    simdjson::dom::element doc;
    FUZZ_CHECK(json_parser().parse(r.body).get(doc) == simdjson::SUCCESS);
    std::string_view answered;
    FUZZ_CHECK(doc["item"].get(answered) == simdjson::SUCCESS);
    if (valid_utf8(item)) FUZZ_CHECK(answered == item);
    for (const auto& [fed, times] : kFed) {
      if (fed != item) continue;
      if (estimate) {
        std::uint64_t n = 0;
        FUZZ_CHECK(doc["estimate"].get(n) == simdjson::SUCCESS);
        FUZZ_CHECK(n >= static_cast<std::uint64_t>(times));
      } else {
        bool seen = false;
        FUZZ_CHECK(doc["seen"].get(seen) == simdjson::SUCCESS);
        FUZZ_CHECK(seen);
      }
    }
  }
  return 0;
}
