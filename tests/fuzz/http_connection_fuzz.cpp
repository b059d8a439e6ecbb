// The HTTP listener's connections: the bytes of one connection, cut into packets, served
// by the daemon's own connection loop (make_bounded_server(), serve_connection()) on one
// end of a socket pair. Whatever the bytes and however they are cut:
// - the answers are the same as when the same bytes come in one packet (requests sent one
//   after the other without waiting, and requests split across reads, are each answered
//   as a whole, in turn, and nothing read ahead is lost or read twice);
// - what is answered begins as an HTTP/1.1 response (after any interim 100 Continue),
//   never a 500 (a handler that threw);
// - the API is read-only: the pipelines' state and counters are what they were.
//
// Input: byte 0 sets the largest packet (1 to 128 bytes, or 32 to 4,096 in steps of 32),
// byte 1 seeds the packets' lengths, the rest (at most 4,096 bytes) is the connection's
// bytes, in at most 64 packets. The packets are SOCK_SEQPACKET's, so that each read of
// the server takes exactly one of them, whatever the timing.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz.h"
#include "http_fixture.h"
#include "sketchd/http/connection.h"

namespace {

constexpr std::size_t kMaxBytes = 4096;  // the server's read buffer: one packet always fits
constexpr std::size_t kMaxPackets = 64;  // well within a socket's send buffer

// Serves `packets` as one connection and returns every byte answered.
std::string converse(httplib::Server& server, const std::vector<std::string_view>& packets) {
  int ends[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) == 0);
  const int client = ends[0];
  for (const std::string_view packet : packets) {
    // Sent whole before the server runs; never blocks, as kMaxPackets small packets fit.
    const ssize_t n = ::send(client, packet.data(), packet.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    FUZZ_CHECK(n == static_cast<ssize_t>(packet.size()));
  }
  ::shutdown(client, SHUT_WR);
  (void)sketchd::serve_connection(server, ends[1]);  // closes ends[1]
  std::string answered;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answered.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(client);
  return answered;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static http_fuzz::fixture f(sketchd::make_bounded_server());
  if (size < 3 || size - 2 > kMaxBytes) return 0;
  const std::size_t largest = data[0] < 128 ? data[0] + 1u : (data[0] - 127u) * 32u;
  std::uint32_t state = data[1] * 2654435761u + 1u;  // xorshift32, never 0
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::vector<std::string_view> packets;
  for (std::size_t at = 0; at < bytes.size();) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    std::size_t n = 1 + state % largest;
    if (packets.size() + 1 == kMaxPackets) n = bytes.size() - at;
    n = std::min(n, bytes.size() - at);
    packets.push_back(bytes.substr(at, n));
    at += n;
  }

  f.ready.beat();  // /healthz answers "ok" in both conversations
  const std::string answered = converse(*f.server, packets);
  f.ready.beat();
  FUZZ_CHECK(answered == converse(*f.server, {bytes}));
  // Interim answers first (a request with "Expect: 100-continue"), then the final one.
  std::string_view rest = answered;
  while (rest.starts_with("HTTP/1.1 100 ")) {
    const std::size_t end = rest.find("\r\n\r\n");
    FUZZ_CHECK(end != std::string_view::npos);
    rest.remove_prefix(end + 4);
  }
  if (!rest.empty()) {
    const http_fuzz::response first = http_fuzz::parse(std::string(rest));
    FUZZ_CHECK(first.status >= 200 && first.status < 600 && first.status != 500);
  }
  FUZZ_CHECK(f.snapshot() == f.state);
  return 0;
}
