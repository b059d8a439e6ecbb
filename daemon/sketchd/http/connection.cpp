#include "sketchd/http/connection.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "sketchd/http/api.h"
#include "sketchd/http/tls.h"
#include "sketchd/util/logging.h"

namespace sketchd::http {

namespace {

// The workers' task queue, growing: a connection holds its worker while it is served (a
// request, its answer, a handshake), never while it waits for input (the listener waits
// for it). A connection that finds every worker busy gets a new one, up to kMaxWorkers
// (beyond that it waits for one: at most one job per connection, and the connections are
// bounded by http.max_connections); workers idle for kIdleExit beyond the first
// kKeptWorkers exit.
// Thread-safe: one mutex guards the queue and the worker counts.
class growing_pool final : public httplib::TaskQueue {
 public:
  static constexpr std::size_t kKeptWorkers = 4;
  static constexpr std::size_t kMaxWorkers = 64;
  static constexpr std::chrono::seconds kIdleExit{30};

  growing_pool() {
    const std::lock_guard lock(mutex_);
    while (workers_ < kKeptWorkers) start_worker();
  }
  ~growing_pool() override { shutdown(); }
  growing_pool(const growing_pool&) = delete;
  growing_pool& operator=(const growing_pool&) = delete;

  void enqueue(std::function<void()> fn) override {
    {
      const std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(fn));
      if (idle_ < jobs_.size() && workers_ < kMaxWorkers) {
        try {
          start_worker();
        } catch (const std::system_error&) {
          // No thread to be had (a pids limit): the connection waits for a worker.
        }
      }
    }
    work_.notify_one();
  }

  // Runs what is queued, then waits for every worker to end.
  void shutdown() override {
    std::unique_lock lock(mutex_);
    stopping_ = true;
    work_.notify_all();
    ended_.wait(lock, [this] { return workers_ == 0; });
  }

 private:
  // With mutex_ held (so the new thread counts itself out only after this counted it in).
  // The thread is detached: shutdown() waits for the count instead. Throws
  // std::system_error when no thread can be created.
  void start_worker() {
    std::thread([this] { run(); }).detach();
    ++workers_;
  }

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      const bool woken =
          work_.wait_for(lock, kIdleExit, [this] { return !jobs_.empty() || stopping_; });
      --idle_;
      if (jobs_.empty() && (stopping_ || (!woken && workers_ > kKeptWorkers))) break;
      if (jobs_.empty()) continue;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
    if (--workers_ == 0) ended_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable ended_;
  std::deque<std::function<void()>> jobs_;
  std::size_t workers_ = 0;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

// What a request may send, its line and headers (and a body, which no route reads), and
// how long it may take to send it. httplib 0.11 bounds the request line (8,192 bytes) but
// neither the headers nor their time: a client sending 256 MiB of headers had sketchd
// hold 3 GB, and one sending a byte a second held a worker for as long as it liked.
constexpr std::size_t kMaxRequestBytes = 64 * 1024;
constexpr std::chrono::seconds kRequestDeadline{10};
// How long a request's answer may take to write, from the request's first byte: a client
// that reads a large /metrics a few bytes at a time would hold its worker, and a stop, for
// as long as it liked (each write waits kWriteTimeout at most, but any progress restarts
// it). Far above any scrape timeout.
constexpr std::chrono::seconds kAnswerDeadline{60};

// Set by the connection's stream when the request went past those bounds, for the error
// handler's answer (the worker's thread handles one connection at a time).
enum class request_overrun { none, too_large, too_slow };
thread_local request_overrun overrun = request_overrun::none;

// The answer to a request past the bounds: status and message.
std::pair<int, std::string> answer_to(request_overrun why) {
  if (why == request_overrun::too_large) {
    return {431,
            fmt::format("the request's headers are larger than {} KiB", kMaxRequestBytes / 1024)};
  }
  return {408, fmt::format("the request took longer than {} s to send", kRequestDeadline.count())};
}

// Set by an answer after which its connection closes (httplib sends "Connection: close" as
// a header, but would read on); the worker's thread handles one connection at a time.
thread_local bool close_after_answer = false;

// A connection's socket, as httplib's own socket stream (a read buffer, since httplib reads
// the headers a byte at a time; waits bounded by the timeouts), each request within
// kMaxRequestBytes and kRequestDeadline from begin_request(). The buffer lasts the
// connection, so that requests sent one after the other without waiting (pipelined) are
// all answered; httplib's own stream, one per request, dropped those it had read ahead.
// Not thread-safe: one owner, the worker serving the connection.
class bounded_socket_stream final : public httplib::Stream {
 public:
  explicit bounded_socket_stream(socket_t sock) : sock_(sock) {}

  // The bytes read and written from then on are TLS's plain text (the handshake done).
  void use_tls(SSL* ssl) { ssl_ = ssl; }

  [[nodiscard]] bool has_read_ahead() const {
    return offset_ < filled_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0);
  }

  void begin_request() {
    const auto now = std::chrono::steady_clock::now();
    deadline_ = now + kRequestDeadline;
    answer_deadline_ = now + kAnswerDeadline;
    read_ = filled_ - offset_;  // read ahead from the socket: this request's
  }

  bool is_readable() const override { return has_read_ahead() || wait(POLLIN, kReadTimeout); }
  bool is_writable() const override { return wait(POLLOUT, kWriteTimeout); }

  ssize_t read(char* ptr, std::size_t size) override {
    if (offset_ < filled_) {
      const std::size_t n = std::min(size, filled_ - offset_);
      std::memcpy(ptr, buffer_.data() + offset_, n);
      offset_ += n;
      return static_cast<ssize_t>(n);
    }
    if (read_ >= kMaxRequestBytes) return refuse(request_overrun::too_large);
    const auto left = deadline_ - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero())
      return refuse(request_overrun::too_slow);
    const std::size_t room = std::min(buffer_.size(), kMaxRequestBytes - read_);
    ssize_t n = 0;
    if (ssl_ != nullptr) {
      n = tls_read(room);
      if (n == kTooSlow) return refuse(request_overrun::too_slow);
    } else {
      // A pause within the deadline is waited out: the request has until then.
      if (!wait(POLLIN, left)) return refuse(request_overrun::too_slow);
      do {
        n = ::recv(sock_, buffer_.data(), room, 0);
      } while (n < 0 && errno == EINTR);
    }
    if (n <= 0) return n;
    read_ += static_cast<std::size_t>(n);
    filled_ = static_cast<std::size_t>(n);
    offset_ = 0;
    return read(ptr, size);
  }

  ssize_t write(const char* ptr, std::size_t size) override {
    if (std::chrono::steady_clock::now() >= answer_deadline_) return -1;
    if (ssl_ != nullptr) return tls_write(ptr, size);
    if (!is_writable()) return -1;
    ssize_t n = 0;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  ssize_t refuse(request_overrun why) {
    overrun = why;
    return -1;
  }

  static constexpr ssize_t kTooSlow = -2;

  // Up to `room` bytes of plain text into the buffer: their count, 0 when the client
  // closed, -1 on an error, kTooSlow past the request's deadline.
  ssize_t tls_read(std::size_t room) {
    for (;;) {
      ERR_clear_error();
      const int n = SSL_read(ssl_, buffer_.data(), static_cast<int>(room));
      if (n > 0) return n;
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_ZERO_RETURN) return 0;
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return -1;
      const auto left = deadline_ - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero() ||
          !wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, left))
        return kTooSlow;
    }
  }

  // Some of `size` bytes as TLS records: how many, or -1.
  ssize_t tls_write(const char* ptr, std::size_t size) {
    for (;;) {
      ERR_clear_error();
      const int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<std::size_t>(size, 1 << 30)));
      if (n > 0) return n;
      const int error = SSL_get_error(ssl_, n);
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return -1;
      if (std::chrono::steady_clock::now() >= answer_deadline_ ||
          !wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, kWriteTimeout))
        return -1;
    }
  }

  bool wait(short events, std::chrono::steady_clock::duration timeout) const {
    pollfd p{sock_, events, 0};
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
    int rc = 0;
    do {
      rc = ::poll(&p, 1, static_cast<int>(ms));
    } while (rc < 0 && errno == EINTR);
    return rc > 0;
  }

  template <typename Get>
  void address(Get get, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (get(sock_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char host[NI_MAXHOST];
    char service[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, service,
                      sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
      return;
    ip = host;
    port = std::atoi(service);
  }

  socket_t sock_;
  SSL* ssl_ = nullptr;
  std::chrono::steady_clock::time_point deadline_{};
  std::chrono::steady_clock::time_point answer_deadline_{};
  std::array<char, 4096> buffer_{};
  std::size_t offset_ = 0;
  std::size_t filled_ = 0;
  std::size_t read_ = 0;  // bytes of this request read from the socket
};

// How a closing connection lingers (linger_close).
constexpr std::chrono::seconds kLinger{1};
constexpr std::size_t kLingerBytes = 1024 * 1024;

class bounded_server;

}  // namespace

// A connection between its requests: its socket, its TLS session, its stream (with what it
// read ahead) and how many requests it may still send. Owned by the listener while it waits
// for input, by a worker while it is served. Not thread-safe: one owner at a time.
class connection {
 public:
  connection(bounded_server& server, socket_t sock);
  ~connection() { close_now(); }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Closes the socket without lingering (a connection idle, past its deadline, or at a stop).
  void close_now() noexcept {
    if (sock_ == INVALID_SOCKET) return;
    ssl_.reset();
    ::close(sock_);
    sock_ = INVALID_SOCKET;
  }

  bounded_server& server_;
  socket_t sock_;
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl_{nullptr, SSL_free};
  bounded_socket_stream stream_;
  enum class phase { first_byte, handshake, requests } phase_ = phase::requests;
  std::size_t requests_left_;
  std::chrono::steady_clock::time_point deadline_;  // of the wait for input
  bool idle_ = false;  // waiting between requests (not for a request's or a handshake's bytes)
  bool ok_ = false;    // the last request was answered
};

namespace {

// httplib's server, each connection served through bounded_socket_stream; otherwise as
// httplib serves it (up to keep_alive_max_count requests). httplib's own loop, which this
// replaces, is a private virtual function; the listener (listener.h) accepts the
// connections, waits for their input, and hands them to serve_ready() on a worker.
// Thread-safe as httplib's server is: serve_ready() runs on many workers at once, each with
// its own connection, and what it keeps per request is thread_local.
class bounded_server final : public httplib::Server {
 public:
  // Every connection served over TLS from then on (before the listener starts).
  void use_tls(std::shared_ptr<tls_server_context> tls) { tls_ = std::move(tls); }
  [[nodiscard]] bool tls() const { return tls_ != nullptr; }
  void begin_stop() noexcept { stopping_ = true; }
  [[nodiscard]] std::size_t keep_alive_max_count() const { return keep_alive_max_count_; }

  // Serves what `c`'s socket has: the first byte and the handshake of a TLS connection,
  // then its requests, as long as their bytes are there. Returns whether the connection
  // waits for more input (until c.deadline_); otherwise it is closed.
  bool serve_ready(connection& c) {
    if (stopping_) return false;
    if (c.phase_ == connection::phase::first_byte) {
      if (!first_byte(c)) return false;
      if (c.phase_ == connection::phase::first_byte) return true;  // no byte yet after all
    }
    if (c.phase_ == connection::phase::handshake) {
      const handshake h = shake(c);
      if (h == handshake::failed) {
        linger_close(c);
        return false;
      }
      if (h == handshake::wants_input) return true;
    }
    while (c.requests_left_ > 0 && !stopping_) {
      if (!c.stream_.has_read_ahead() && !readable_now(c.sock_)) {
        c.idle_ = true;
        c.deadline_ = std::chrono::steady_clock::now() + kIdleTimeout;
        return true;
      }
      c.idle_ = false;
      c.stream_.begin_request();
      overrun = request_overrun::none;
      close_after_answer = false;
      bool closed = false;
      --c.requests_left_;
      c.ok_ =
          process_request(c.stream_, /*close_connection=*/c.requests_left_ == 0, closed, nullptr);
      if (!c.ok_ && overrun != request_overrun::none) {
        // Past the bounds in the request line itself: httplib answers nothing then.
        const auto [status, message] = answer_to(overrun);
        const std::string body = error_body(message);
        const std::string answer = fmt::format(
            "HTTP/1.1 {} {}\r\nConnection: close\r\nContent-Type: {}\r\nContent-Length: "
            "{}\r\n\r\n{}",
            status, status == 431 ? "Request Header Fields Too Large" : "Request Timeout", kJson,
            body.size(), body);
        if (c.stream_.is_writable()) (void)c.stream_.write(answer.data(), answer.size());
      }
      // Past the bounds, the rest of what the client sends is not a request.
      const bool end = !c.ok_ || closed || overrun != request_overrun::none || close_after_answer;
      overrun = request_overrun::none;
      close_after_answer = false;
      if (end) break;
    }
    linger_close(c);
    return false;
  }

  // Serves the connection on `sock` to its end, on this thread (serve_connection()).
  bool serve(socket_t sock) {
    connection c(*this, sock);
    while (serve_ready(c)) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          c.deadline_ - std::chrono::steady_clock::now());
      pollfd p{sock, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    }
    return c.ok_;
  }

 private:
  // Whether `sock` has input (or an end) right now.
  static bool readable_now(socket_t sock) {
    pollfd p{sock, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

  // A TLS connection begins with a handshake record (content type 22). A client that speaks
  // plain HTTP to the HTTPS port is told so in a plain 400, as Go's servers (Prometheus'
  // own) do. False when the connection is closed.
  bool first_byte(connection& c) {
    unsigned char first = 0;
    ssize_t peeked = 0;
    do {
      peeked = ::recv(c.sock_, &first, 1, MSG_PEEK | MSG_DONTWAIT);
    } while (peeked < 0 && errno == EINTR);
    if (peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;  // not yet
    if (peeked != 1) {
      linger_close(c);
      return false;
    }
    if (first != 22) {
      if (first >= 'A' && first <= 'Z') {
        const std::string body = error_body(
            "this port speaks HTTPS (http.tls is set): ask for https:// instead of http://");
        const std::string answer = fmt::format(
            "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: {}\r\n"
            "Content-Length: {}\r\n\r\n{}",
            kJson, body.size(), body);
        if (c.stream_.is_writable())
          (void)::send(c.sock_, answer.data(), answer.size(), MSG_NOSIGNAL);
      }
      linger_close(c);
      return false;
    }
    // The socket is non-blocking from then on: the session's reads and writes wait with
    // poll, within their bounds.
    const int flags = ::fcntl(c.sock_, F_GETFL);
    if (flags < 0 || ::fcntl(c.sock_, F_SETFL, flags | O_NONBLOCK) < 0) {
      linger_close(c);
      return false;
    }
    c.ssl_.reset(tls_->new_session(c.sock_));
    if (!c.ssl_) {
      linger_close(c);
      return false;
    }
    c.stream_.use_tls(c.ssl_.get());
    c.phase_ = connection::phase::handshake;
    return true;
  }

  enum class handshake { done, wants_input, failed };

  // The TLS handshake, as far as the client's bytes go; within kRequestDeadline of the
  // connection's start (c.deadline_ is left as it is while the handshake waits).
  handshake shake(connection& c) {
    for (;;) {
      ERR_clear_error();
      const int rc = SSL_accept(c.ssl_.get());
      if (rc == 1) {
        c.phase_ = connection::phase::requests;
        return handshake::done;
      }
      const int error = SSL_get_error(c.ssl_.get(), rc);
      if (error == SSL_ERROR_WANT_READ) return handshake::wants_input;
      if (error == SSL_ERROR_WANT_WRITE) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
            c.deadline_ - std::chrono::steady_clock::now());
        pollfd p{c.sock_, POLLOUT, 0};
        if (left.count() > 0 && ::poll(&p, 1, static_cast<int>(left.count())) > 0) continue;
      }
      // A scanner, a client that does not trust the certificate, one without a client
      // certificate under mutual TLS: at debug level, since anyone may cause it.
      const unsigned long code = ERR_peek_last_error();
      const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
      module_logger("http")->debug(
          "a TLS handshake failed: {}",
          reason != nullptr ? reason
                            : (error == SSL_ERROR_WANT_WRITE ? "not done within 10 s"
                                                             : "the client closed the connection"));
      ERR_clear_error();
      return handshake::failed;
    }
  }

  // Closes a connection without losing the answers written to it. Linux answers the close
  // of a socket with unread input by a reset (RST), and a client still sending then sees
  // its send fail, or its connection reset, before it reads the answer: a body refused
  // with a 405, headers past 64 KiB, requests beyond the last answered. So the writing side
  // is shut first (after TLS's own close_notify), and what the client still sends is read
  // and dropped until it closes, for at most kLinger and kLingerBytes, and no longer once a
  // stop has begun (a stop waits for no client).
  void linger_close(connection& c) const {
    const socket_t sock = c.sock_;
    if (c.ssl_ && SSL_is_init_finished(c.ssl_.get())) {
      ERR_clear_error();
      (void)SSL_shutdown(c.ssl_.get());
      ERR_clear_error();
    }
    ::shutdown(sock, SHUT_WR);
    const auto until = std::chrono::steady_clock::now() + kLinger;
    std::array<char, 4096> sink;
    for (std::size_t dropped = 0; dropped < kLingerBytes && !stopping_;) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{sock, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 100)));
      if (ready == 0 || (ready < 0 && errno == EINTR)) continue;  // a slice: stopping_?
      if (ready < 0) break;
      const ssize_t n = ::recv(sock, sink.data(), sink.size(), 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;  // the client closed, or is gone
      dropped += static_cast<std::size_t>(n);
    }
    c.close_now();
  }

  // httplib's own loop is not used: the listener serves each connection.
  bool process_and_close_socket(socket_t sock) override { return serve(sock); }

  std::shared_ptr<tls_server_context> tls_;  // set before the listener starts
  std::atomic<bool> stopping_{false};
};

}  // namespace

connection::connection(bounded_server& server, socket_t sock)
    : server_(server),
      sock_(sock),
      stream_(sock),
      phase_(server.tls() ? phase::first_byte : phase::requests),
      requests_left_(server.keep_alive_max_count()),
      deadline_(std::chrono::steady_clock::now() + kRequestDeadline) {}

void connection_deleter::operator()(connection* c) const noexcept { delete c; }

namespace {
bounded_server& bounded(httplib::Server& server, std::string_view what) {
  auto* b = dynamic_cast<bounded_server*>(&server);
  if (b == nullptr)
    throw std::logic_error(fmt::format("{}: the server is not one of make_bounded_server()", what));
  return *b;
}
}  // namespace

connection_ptr open_connection(httplib::Server& server, int sock) {
  return connection_ptr(new connection(bounded(server, "open_connection"), sock));
}

bool serve_ready(connection& c) { return c.server_.serve_ready(c); }

std::chrono::steady_clock::time_point input_deadline(const connection& c) { return c.deadline_; }

bool is_idle(const connection& c) { return c.idle_; }

int socket_of(const connection& c) { return c.sock_; }

void begin_stop(httplib::Server& server) { bounded(server, "begin_stop").begin_stop(); }

httplib::TaskQueue* new_growing_pool() { return new growing_pool; }

void close_connection_after_answer() noexcept { close_after_answer = true; }

std::optional<std::pair<int, std::string>> overrun_answer() {
  if (overrun == request_overrun::none) return std::nullopt;
  return answer_to(overrun);
}

}  // namespace sketchd::http

namespace sketchd {

std::unique_ptr<httplib::Server> make_bounded_server() {
  return std::make_unique<http::bounded_server>();
}

void serve_over_tls(httplib::Server& server, std::shared_ptr<http::tls_server_context> tls) {
  http::bounded(server, "serve_over_tls").use_tls(std::move(tls));
}

bool serve_connection(httplib::Server& server, int sock) {
  return http::bounded(server, "serve_connection").serve(sock);
}

}  // namespace sketchd
