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

#include "fuzz.h"
#include "http_fixture.h"

namespace {

using http_fuzz::json_parser;
using http_fuzz::kFed;
using http_fuzz::parse;
using http_fuzz::response;

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
  static http_fuzz::fixture f(std::make_unique<fuzz_server>());
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

  const std::string raw = static_cast<fuzz_server*>(f.server)->answer(request);
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
