// /healthz and /readyz over a real socket: /readyz follows readiness::set(), /healthz turns
// 503 "stalled" once the processing thread has not beaten for longer than the stall limit,
// and 200 again at its next beat. The limit here is 1 s instead of a minute; the test sleeps
// 2.5 times as long to see a stall, and checks the other way within well under a second of a
// beat, so the outcome does not depend on the machine's speed.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "sketchd/http/server.h"

namespace sketchd {
namespace {

using namespace std::chrono_literals;

struct served {
  metrics::registry registry;
  readiness ready{1000ms};
  http_config cfg{
      .listen = "127.0.0.1:0", .host = "127.0.0.1", .port = 0, .basic_auth_users = {}, .tls = {}};
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

  std::this_thread::sleep_for(2500ms);  // 2.5 times the limit
  ASSERT_TRUE(s.ready.stalled().has_value());
  EXPECT_GE(*s.ready.stalled(), 2500ms);
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
  readiness ready{1000ms};
  {
    const readiness::long_step step(ready, 5000ms);
    EXPECT_EQ(ready.stall_limit(), 5000ms);
    {
      const readiness::long_step inner(ready, 3000ms);
      EXPECT_EQ(ready.stall_limit(), 3000ms);
    }
    EXPECT_EQ(ready.stall_limit(), 5000ms);
    std::this_thread::sleep_for(2500ms);  // 2.5 times the stall limit, within the step's
    EXPECT_FALSE(ready.stalled().has_value());
  }
  EXPECT_EQ(ready.stall_limit(), 1000ms);
  EXPECT_FALSE(ready.stalled().has_value());  // the step's end beats
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(ready.stalled().has_value());
}

TEST(HttpHealth, TheDefaultLimitIsAMinute) {
  const readiness ready;
  EXPECT_EQ(ready.stall_limit(), std::chrono::milliseconds(60'000));
  EXPECT_FALSE(ready.stalled().has_value());  // counted from construction
}

// What a connection answers to `requests`, sent whole, or a byte every `pace` when it is not
// zero, read until the server closes the connection or goes quiet for 3 s.
std::string converse(int port, const std::string& requests, std::chrono::milliseconds pace = 0ms) {
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(sock, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  if (pace == 0ms) {
    EXPECT_EQ(::send(sock, requests.data(), requests.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(requests.size()));
  } else {
    for (const char c : requests) {
      if (::send(sock, &c, 1, MSG_NOSIGNAL) != 1) break;  // the server gave up on us
      std::this_thread::sleep_for(pace);
    }
  }
  const timeval quiet{3, 0};
  ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &quiet, sizeof quiet);
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(sock, buffer, sizeof buffer, 0)) > 0;) answer.append(buffer, n);
  ::close(sock);
  return answer;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Headers of up to 64 KiB in all are read; beyond, a 431 and the connection closed, however
// many lines they come in (httplib bounds each line, 8,192 bytes, but not their number).
TEST(HttpLimits, RequestHeadersAreBoundedInAll) {
  served s;
  std::string headers;
  for (int i = 0; i < 60; ++i)
    headers += "X-" + std::to_string(i) + ": " + std::string(1000, 'c') + "\r\n";
  std::string answer = converse(
      s.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + "\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer.substr(0, 200);
  for (int i = 60; i < 300; ++i)
    headers += "X-" + std::to_string(i) + ": " + std::string(1000, 'c') + "\r\n";
  // Two requests: the second is never read, the connection closes after the first answer.
  answer = converse(s.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n" +
                                "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0), 0u)
      << answer.substr(0, 200);
  EXPECT_NE(answer.find("{\"error\":\"the request's headers are larger than 64 KiB\"}"),
            std::string::npos);
  EXPECT_EQ(count(answer, "HTTP/1.1 "), 1u);
}

// A request that takes longer than 10 s to arrive (a byte every 0.4 s, as a slow-loris
// client sends it) is answered 408 and its connection closed, at about 10 s; here the
// deadline falls in the request line, which httplib itself would leave unanswered.
TEST(HttpLimits, ARequestMustArriveWithinTenSeconds) {
  served s;
  const auto start = std::chrono::steady_clock::now();
  const std::string answer = converse(
      s.port, "GET /healthz?pad=" + std::string(30, 'z') + " HTTP/1.1\r\nHost: x\r\n\r\n", 400ms);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(answer.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << answer.substr(0, 200);
  EXPECT_NE(answer.find("the request took longer than 10 s to send"), std::string::npos);
  // 10 s after the first byte. Without the deadline the request would take 25 s to send,
  // and this side would wait 3 s more for a quiet socket: under 20 s tells the two apart.
  EXPECT_GE(took, 10s);
  EXPECT_LT(took, 20s);
}

// Kept alive: kRequestsPerConnection (100) requests on one connection are answered, the last
// with "Connection: close"; pipelined ones too.
TEST(HttpLimits, AConnectionServesAHundredRequests) {
  served s;
  std::string all;
  for (std::size_t i = 0; i < http::kRequestsPerConnection; ++i)
    all += "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string answer = converse(s.port, all + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(count(answer, "HTTP/1.1 200 OK\r\n"), http::kRequestsPerConnection);
  EXPECT_EQ(count(answer, "Connection: close\r\n"), 1u);
}

// A refused method's body is never read, so its connection closes after the 405: what
// follows the headers (here a request smuggled in the body) is not taken for a request.
TEST(HttpLimits, ARefusedMethodClosesItsConnection) {
  served s;
  const std::string smuggled = "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string answer = converse(
      s.port,
      "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(smuggled.size()) +
          "\r\n\r\n" + smuggled + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << answer;
  EXPECT_EQ(count(answer, "HTTP/1.1 "), 1u) << answer;
}

// httplib reads no body of a GET: one sent all the same (here a request smuggled in it) is
// not taken for a request, the answer closing the connection; nor is what follows a request
// it could not parse (a 400).
TEST(HttpLimits, AGetWithABodyAndAMalformedRequestCloseTheirConnection) {
  served s;
  const std::string smuggled = "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string answer =
      converse(s.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                           std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_EQ(count(answer, "HTTP/1.1 "), 1u) << answer;
  EXPECT_EQ(count(answer, "Connection: close\r\n"), 1u) << answer;
  answer =
      converse(s.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                           fmt::format("{:x}\r\n", smuggled.size()) + smuggled + "\r\n0\r\n\r\n");
  EXPECT_EQ(count(answer, "HTTP/1.1 "), 1u) << answer;
  answer = converse(s.port, "not a request\r\n\r\n" + smuggled);
  EXPECT_EQ(answer.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << answer;
  EXPECT_EQ(count(answer, "HTTP/1.1 "), 1u) << answer;
}

// A closing connection reads and drops what the client still sends, for a second, before
// it closes: a client that sends a body after its headers (as curl does) sends it whole and
// reads its answer and an orderly end. A socket closed at once has the kernel answer the
// rest of the body with a reset, and the client's sends fail before it reads anything.
TEST(HttpLimits, AClosingConnectionEndsWithoutAReset) {
  served s;
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(s.port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(sock, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string body(256 * 1024, 'b');
  const std::string headers = "POST /api/v1/pipelines HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n";
  ASSERT_EQ(::send(sock, headers.data(), headers.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(headers.size()));
  std::this_thread::sleep_for(100ms);  // the 405 is written meanwhile
  std::size_t sent = 0;
  while (sent < body.size()) {
    const ssize_t n = ::send(sock, body.data() + sent,
                             std::min<std::size_t>(16384, body.size() - sent), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(sent, body.size()) << std::strerror(errno);
  const timeval quiet{3, 0};
  ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &quiet, sizeof quiet);
  std::string answer;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::recv(sock, buffer, sizeof buffer, 0)) > 0) answer.append(buffer, n);
  const int error = n < 0 ? errno : 0;
  ::close(sock);
  EXPECT_EQ(answer.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << answer;
  EXPECT_EQ(n, 0) << "the connection ended with " << std::strerror(error);
}

}  // namespace
}  // namespace sketchd
