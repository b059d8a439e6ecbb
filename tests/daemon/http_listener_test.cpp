// The HTTP listener (http/listener.h): connections waiting for a request hold no thread
// and make room for new ones beyond http.max_connections; when every connection is being
// served, a new one is refused at once; a listening socket that fails is bound again,
// /readyz saying why meanwhile on the connections still open.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "sketchd/http/server.h"

namespace sketchd {
namespace {

using namespace std::chrono_literals;

struct served {
  explicit served(std::size_t max_connections) {
    cfg.max_connections = max_connections;
    server = std::make_unique<http_server>(cfg, registry, std::vector<const pipeline*>{}, ready);
    port = server->start();
  }
  metrics::registry registry;
  readiness ready;
  http_config cfg{
      .listen = "127.0.0.1:0", .host = "127.0.0.1", .port = 0, .basic_auth_users = {}, .tls = {}};
  std::unique_ptr<http_server> server;
  int port = 0;

  [[nodiscard]] httplib::Result get(const std::string& path) const {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5s);
    client.set_connection_timeout(5s);
    return client.Get(path);
  }
};

// A TCP connection to the server that sends `request` (nothing when empty).
int connect_to(int port, const std::string& request = {}) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  if (!request.empty()) {
    EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
  }
  return fd;
}

// What the server sends on `fd` within `wait`, until it closes.
std::string read_all(int fd, std::chrono::milliseconds wait) {
  std::string out;
  const auto until = std::chrono::steady_clock::now() + wait;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

std::size_t count_entries(const char* dir) {
  std::size_t n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

// 400 connections that send nothing, against a limit of 64: the server holds at most 64
// of them (the others closed as new ones come), with no thread for any; a request on a new
// connection is answered at once.
TEST(HttpListener, IdleConnectionsHoldNoThreadAndMakeRoomForNewOnes) {
  served s(64);
  ASSERT_TRUE(s.get("/healthz"));
  const std::size_t threads_before = count_entries("/proc/self/task");
  const std::size_t fds_before = count_entries("/proc/self/fd");
  std::vector<int> idle;
  for (int i = 0; i < 400; ++i) idle.push_back(connect_to(s.port));
  std::this_thread::sleep_for(300ms);  // accepted, and the oldest closed
  const auto start = std::chrono::steady_clock::now();
  const auto res = s.get("/healthz");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_LT(took, 5s);
  // This process holds both ends: the test's 400 and the server's, at most 64 (and one
  // for the request above while it lasts).
  const std::size_t fds = count_entries("/proc/self/fd");
  EXPECT_LE(fds, fds_before + 400 + 64 + 1) << "server-side connections beyond the limit";
  EXPECT_LE(count_entries("/proc/self/task"), threads_before + 2);
  // The ones closed to make room read an end, without an answer.
  std::size_t closed = 0;
  for (int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    char c = 0;
    if (::poll(&p, 1, 0) > 0 && ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0) ++closed;
  }
  EXPECT_GE(closed, 400u - 64u);
  for (int fd : idle) ::close(fd);
}

// Two connections, each in the middle of its request (a worker waiting for the rest), fill
// a limit of 2: a third is refused at once with a 503 that says why; once one finishes, a
// new connection is served.
TEST(HttpListener, WhenEveryConnectionIsBeingServedANewOneIsRefusedAtOnce) {
  served s(2);
  const int a = connect_to(s.port, "GET /healthz HTTP/1.1\r\n");
  const int b = connect_to(s.port, "GET /healthz HTTP/1.1\r\n");
  std::this_thread::sleep_for(300ms);
  const auto start = std::chrono::steady_clock::now();
  const int c = connect_to(s.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string refused = read_all(c, 3000ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << refused;
  EXPECT_NE(refused.find("too many connections"), std::string::npos) << refused;
  ::close(c);

  ASSERT_EQ(::send(a, "Host: x\r\nConnection: close\r\n\r\n", 31, MSG_NOSIGNAL), 31);
  const std::string answered = read_all(a, 3000ms);
  EXPECT_EQ(answered.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answered;
  ::close(a);
  std::this_thread::sleep_for(100ms);
  const auto res = s.get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  ::close(b);
}

// The listening socket of `port` in this process.
int listening_socket(int port) {
  for (int fd = 0; fd < 4096; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening == 0)
      continue;
    sockaddr_in a{};
    len = sizeof a;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 && a.sin_family == AF_INET &&
        ntohs(a.sin_port) == port)
      return fd;
  }
  return -1;
}

// A listening socket that stops accepting (shut down under it: accept() fails with EINVAL)
// is bound again on the same port; meanwhile /readyz, asked on a connection kept open,
// answers 503 with the reason.
TEST(HttpListener, AFailedListenerIsBoundAgainAndReadyzSaysSoMeanwhile) {
  served s(16);
  s.ready.set(true);
  httplib::Client kept("127.0.0.1", s.port);
  kept.set_keep_alive(true);
  kept.set_read_timeout(5s);
  auto res = kept.Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);

  const int fd = listening_socket(s.port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::shutdown(fd, SHUT_RD), 0);
  std::this_thread::sleep_for(200ms);
  res = kept.Get("/readyz");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("the HTTP listener on port"), std::string::npos) << res->body;

  const auto until = std::chrono::steady_clock::now() + 5s;
  int status = 0;
  while (std::chrono::steady_clock::now() < until && status != 200) {
    if (const auto fresh = s.get("/readyz")) status = fresh->status;
    if (status != 200) std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(status, 200) << "not listening again within 5 s";
}

}  // namespace
}  // namespace sketchd
