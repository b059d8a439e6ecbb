#include "sketchd/http/server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
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

#include "sketchd/util/json.h"

namespace sketchd {

namespace {

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

readiness::readiness(std::chrono::milliseconds stall_limit)
    : stall_limit_(stall_limit), last_beat_ns_(steady_ns()) {}

void readiness::beat() noexcept { last_beat_ns_.store(steady_ns(), std::memory_order_relaxed); }

std::chrono::nanoseconds readiness::since_beat() const noexcept {
  return std::chrono::nanoseconds(steady_ns() - last_beat_ns_.load(std::memory_order_relaxed));
}

std::optional<std::chrono::milliseconds> readiness::stalled() const noexcept {
  const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(since_beat());
  if (since > stall_limit()) return since;
  return std::nullopt;
}

void readiness::set(bool ready, std::string reason) {
  std::lock_guard lock(mutex_);
  ready_ = ready;
  reason_ = std::move(reason);
}

bool readiness::ready() const {
  std::lock_guard lock(mutex_);
  return ready_;
}

std::string readiness::reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

namespace {

constexpr const char* kJson = "application/json";

void json_error(httplib::Response& res, int status, std::string_view message) {
  res.status = status;
  res.set_content("{\"error\":" + json::quote(message) + "}\n", kJson);
}

// Percent-decoding as URLs have it (RFC 3986): %HH is the byte HH, and with plus_is_space
// (a query, as forms write it) '+' is a space; a '%' without two hex digits after it stays
// as it is. httplib's decoder also reads "%uXXXX", which is no part of a URL: "%u0070k"
// must name the pipeline "%u0070k", not "pk".
std::string percent_decode(std::string_view s, bool plus_is_space) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += plus_is_space && s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

// Set by an answer after which its connection closes (httplib sends "Connection: close" as
// a header, but would read on); the worker's thread handles one connection at a time.
thread_local bool close_after_answer = false;

// The answer to any other method than GET and HEAD: the API is read-only. The connection
// closes, since an unread body cannot be told from the next request.
void refuse_method(httplib::Response& res) {
  res.set_header("Allow", "GET, HEAD");
  res.set_header("Connection", "close");
  close_after_answer = true;
  json_error(res, 405, "the API is read-only: GET (or HEAD) only");
}

// An Accept-Encoding value without the codings it refuses ("gzip;q=0"), nor brotli. httplib
// compresses with gzip or br whenever the header's text contains the coding's name,
// whatever its weight, and prefers br; its brotli runs at the slowest quality (11), which
// took 10-17 s of a core for a 6 MB /metrics (gzip: 0.12 s). A member that contains "br" is
// dropped, since httplib looks for those two letters anywhere.
std::string accepted_codings(std::string_view header) {
  const auto trim = [](std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
  };
  std::string out;
  while (!header.empty()) {
    const std::size_t comma = header.find(',');
    const std::string_view member = trim(header.substr(0, comma));
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    bool refused = false;
    for (std::string_view params = member; !params.empty();) {
      const std::size_t semicolon = params.find(';');
      if (semicolon == std::string_view::npos) break;
      params = params.substr(semicolon + 1);
      const std::string_view param = trim(params.substr(0, params.find(';')));
      if (param.size() > 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
        // A weight is 0 to 1 with at most three decimals: "0", "0.", "0.000" refuse.
        const std::string_view weight = param.substr(2);
        refused = weight[0] == '0' && weight.find_first_not_of("0.", 1) == std::string_view::npos;
      }
    }
    if (member.empty() || refused || member.find("br") != std::string_view::npos) continue;
    if (!out.empty()) out += ", ";
    out += member;
  }
  return out;
}

// The query parameter NAME of the request: its value percent-decoded ('+' is a space, as
// in forms), everything after the parameter's first '=' (httplib's own parsing keeps only
// what follows the last one: "item=dXNlcg==" would ask for "dXNlcg"). An error message
// when the parameter is missing, empty or repeated.
struct query_param {
  std::string value;
  std::string error;
};
query_param find_query_param(const httplib::Request& req, std::string_view name) {
  query_param result;
  const std::string_view target = req.target;
  const std::size_t question = target.find('?');
  std::string_view query =
      question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
  if (const std::size_t hash = query.find('#'); hash != std::string_view::npos)
    query = query.substr(0, hash);
  int found = 0;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    const std::string key = percent_decode(pair.substr(0, eq), true);
    if (key != name) continue;
    if (++found > 1) {
      result.error = fmt::format("the query parameter \"{}\" is given more than once", name);
      return result;
    }
    if (eq != std::string_view::npos) {
      result.value = percent_decode(pair.substr(eq + 1), true);
    }
  }
  if (found == 0) {
    result.error = fmt::format("the query parameter \"{}\" is required", name);
  } else if (result.value.empty()) {
    result.error =
        fmt::format("the query parameter \"{}\" is empty (an empty item is never counted)", name);
  }
  return result;
}

// httplib's task queue, growing: a connection holds its worker until it closes or idles
// for the keep-alive timeout (5 s), and httplib's fixed pool queues new connections behind
// busy ones, so that 17 idle clients held /healthz up for 5 s and 200 for a minute. Here a
// connection that finds every worker busy gets a new one, up to kMaxWorkers (beyond that
// it waits for one); workers idle for kIdleExit beyond the first kKeptWorkers exit.
// Thread-safe: one mutex guards the queue and the worker counts.
class growing_pool final : public httplib::TaskQueue {
 public:
  static constexpr std::size_t kKeptWorkers = 4;
  static constexpr std::size_t kMaxWorkers = 512;
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

// The timeouts of a connection (routes() gives httplib the same, for its own use).
constexpr std::chrono::seconds kReadTimeout{5};
constexpr std::chrono::seconds kWriteTimeout{5};
constexpr std::chrono::seconds kKeepAliveTimeout{1};
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
std::pair<int, std::string> overrun_answer(request_overrun why) {
  if (why == request_overrun::too_large) {
    return {431,
            fmt::format("the request's headers are larger than {} KiB", kMaxRequestBytes / 1024)};
  }
  return {408, fmt::format("the request took longer than {} s to send", kRequestDeadline.count())};
}

// A connection's socket, as httplib's own socket stream (a read buffer, since httplib reads
// the headers a byte at a time; waits bounded by the timeouts), each request within
// kMaxRequestBytes and kRequestDeadline from begin_request(). The buffer lasts the
// connection, so that requests sent one after the other without waiting (pipelined) are
// all answered; httplib's own stream, one per request, dropped those it had read ahead.
// Not thread-safe: one owner, the worker serving the connection.
class bounded_socket_stream final : public httplib::Stream {
 public:
  explicit bounded_socket_stream(socket_t sock) : sock_(sock) {}

  [[nodiscard]] bool has_read_ahead() const { return offset_ < filled_; }

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
    // A pause within the deadline is waited out: the request has until then.
    if (!wait(POLLIN, left)) return refuse(request_overrun::too_slow);
    const std::size_t room = std::min(buffer_.size(), kMaxRequestBytes - read_);
    ssize_t n = 0;
    do {
      n = ::recv(sock_, buffer_.data(), room, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    read_ += static_cast<std::size_t>(n);
    filled_ = static_cast<std::size_t>(n);
    offset_ = 0;
    return read(ptr, size);
  }

  ssize_t write(const char* ptr, std::size_t size) override {
    if (std::chrono::steady_clock::now() >= answer_deadline_ || !is_writable()) return -1;
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
  std::chrono::steady_clock::time_point deadline_{};
  std::chrono::steady_clock::time_point answer_deadline_{};
  std::array<char, 4096> buffer_{};
  std::size_t offset_ = 0;
  std::size_t filled_ = 0;
  std::size_t read_ = 0;  // bytes of this request read from the socket
};

// How a closing connection lingers (bounded_server::linger_close).
constexpr std::chrono::seconds kLinger{1};
constexpr std::size_t kLingerBytes = 1024 * 1024;

// httplib's server, each connection served through bounded_socket_stream; otherwise as
// httplib serves it (up to keep_alive_max_count requests, each awaited for the keep-alive
// timeout). httplib's own loop, which this replaces, is a private virtual function.
// Thread-safe as httplib's server is: serve() runs on many workers at once, each with its
// own connection and stream, and what it keeps per request is thread_local.
class bounded_server final : public httplib::Server {
 public:
  bool serve(socket_t sock) {
    bool ok = false;
    bounded_socket_stream stream(sock);
    for (std::size_t left = keep_alive_max_count_; left > 0 && !stopping(); --left) {
      pollfd p{sock, POLLIN, 0};
      if (!stream.has_read_ahead() &&
          ::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kKeepAliveTimeout).count())) <=
              0)
        break;
      if (stopping()) break;
      stream.begin_request();
      overrun = request_overrun::none;
      close_after_answer = false;
      bool closed = false;
      ok = process_request(stream, /*close_connection=*/left == 1, closed, nullptr);
      if (!ok && overrun != request_overrun::none) {
        // Past the bounds in the request line itself: httplib answers nothing then.
        const auto [status, message] = overrun_answer(overrun);
        const std::string body = "{\"error\":" + json::quote(message) + "}\n";
        const std::string answer = fmt::format(
            "HTTP/1.1 {} {}\r\nConnection: close\r\nContent-Type: {}\r\nContent-Length: "
            "{}\r\n\r\n{}",
            status, status == 431 ? "Request Header Fields Too Large" : "Request Timeout", kJson,
            body.size(), body);
        if (stream.is_writable()) (void)stream.write(answer.data(), answer.size());
      }
      // Past the bounds, the rest of what the client sends is not a request.
      if (!ok || closed || overrun != request_overrun::none || close_after_answer) break;
    }
    overrun = request_overrun::none;
    close_after_answer = false;
    linger_close(sock);
    return ok;
  }

 private:
  // Closes a connection without losing the answers written to it. Linux answers the close
  // of a socket with unread input by a reset (RST), and a client still sending then sees
  // its send fail, or its connection reset, before it reads the answer: a body refused
  // with a 405, headers past 64 KiB, requests beyond the last answered. So the writing side
  // is shut first, and what the client still sends is read and dropped until it closes,
  // for at most kLinger and kLingerBytes, and no longer once a stop has begun (a stop waits
  // for no client).
  void linger_close(socket_t sock) const {
    ::shutdown(sock, SHUT_WR);
    const auto until = std::chrono::steady_clock::now() + kLinger;
    std::array<char, 4096> sink;
    for (std::size_t dropped = 0; dropped < kLingerBytes && !stopping();) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{sock, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 100)));
      if (ready == 0 || (ready < 0 && errno == EINTR)) continue;  // a slice: stopping()?
      if (ready < 0) break;
      const ssize_t n = ::recv(sock, sink.data(), sink.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the client closed, or is gone
      dropped += static_cast<std::size_t>(n);
    }
    ::close(sock);
  }

  bool process_and_close_socket(socket_t sock) override { return serve(sock); }

  // svr_sock_ is invalid once stop() has begun, and is_running() stays true until every
  // worker has returned: no further request is read then. (Without a listener, as in
  // serve_connection(), neither holds.)
  [[nodiscard]] bool stopping() const { return is_running() && svr_sock_ == INVALID_SOCKET; }
};

}  // namespace

std::unique_ptr<httplib::Server> make_bounded_server() {
  return std::make_unique<bounded_server>();
}

bool serve_connection(httplib::Server& server, int sock) {
  auto* bounded = dynamic_cast<bounded_server*>(&server);
  if (bounded == nullptr)
    throw std::logic_error("serve_connection: the server is not one of make_bounded_server()");
  return bounded->serve(sock);
}

http_server::http_server(const http_config& config, const metrics::registry& registry,
                         std::vector<const pipeline*> pipelines, const readiness& ready)
    : http_server(config, registry, std::move(pipelines), ready, make_bounded_server()) {}

http_server::http_server(const http_config& config, const metrics::registry& registry,
                         std::vector<const pipeline*> pipelines, const readiness& ready,
                         std::unique_ptr<httplib::Server> server)
    : config_(config),
      registry_(registry),
      pipelines_(std::move(pipelines)),
      ready_(ready),
      server_(std::move(server)) {
  routes();
}

http_server::~http_server() { stop(); }

void http_server::routes() {
  auto& s = *server_;
  s.set_read_timeout(kReadTimeout);
  s.set_write_timeout(kWriteTimeout);
  // An idle kept-alive connection holds its worker, and stop() waits for every worker: one
  // second bounds how long a scraper's idle connection delays a stop. (Prometheus scrapes
  // every 15 s or so, and never reuses a connection kept open for less.)
  s.set_keep_alive_timeout(kKeepAliveTimeout.count());
  // A worker per connection, as many as there are connections (growing_pool above). Every
  // worker may take a pipeline lock for one batch at most.
  s.new_task_queue = [] { return new growing_pool; };  // owned by httplib
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second
  // sketchd on the same address starts and the kernel splits the scrapes between the two.
  // TCP_NODELAY on every connection: without it, the second answer
  // on a kept-alive connection waited about 40 ms for the client's delayed ACK (Nagle).
  s.set_tcp_nodelay(true);
  s.set_socket_options([this](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_socket_ = sock;
  });

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.scrape(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    if (const auto stalled = ready_.stalled()) {
      res.status = 503;
      res.set_content(
          "{\"status\":\"stalled\",\"reason\":" +
              json::quote(fmt::format(
                  "the processing thread has not come round its loop for {} s (limit {} s)",
                  stalled->count() / 1000, ready_.stall_limit().count() / 1000)) +
              "}\n",
          kJson);
      return;
    }
    res.set_content("{\"status\":\"ok\"}\n", kJson);
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    if (ready_.ready()) {
      res.set_content("{\"status\":\"ready\"}\n", kJson);
    } else {
      res.status = 503;
      res.set_content(
          "{\"status\":\"not ready\",\"reason\":" + json::quote(ready_.reason()) + "}\n", kJson);
    }
  });
  s.Get("/api/v1/pipelines", [this](const httplib::Request&, httplib::Response& res) {
    std::string body = "{\"pipelines\":[";
    for (std::size_t i = 0; i < pipelines_.size(); ++i) {
      if (i) body += ',';
      body += pipelines_[i]->describe_json();
    }
    body += "]}\n";
    res.set_content(body, kJson);
  });

  // The pipeline the path names, or nullptr after answering 404. The name is the path's
  // fourth segment as sent, percent-decoded here: the route matched the path httplib
  // decoded, where an encoded '/' ("a%2Ftopk") has become a separator.
  const auto find = [this](const httplib::Request& req, httplib::Response& res) -> const pipeline* {
    std::string_view path = req.target;
    path = path.substr(0, path.find_first_of("?#"));
    for (int skip = 0; skip < 4; ++skip) {  // "", "api", "v1", "pipelines"
      const std::size_t slash = path.find('/');
      path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    }
    const std::string name = percent_decode(path.substr(0, path.find('/')), false);
    for (const auto* p : pipelines_) {
      if (p->name() == name) return p;
    }
    json_error(res, 404, fmt::format("no pipeline named \"{}\"", name));
    return nullptr;
  };
  s.Get(R"(/api/v1/pipelines/([^/]+))",
        [find](const httplib::Request& req, httplib::Response& res) {
          const pipeline* p = find(req, res);
          if (!p) return;
          res.set_content(p->describe_json() + "\n", kJson);
        });
  s.Get(R"(/api/v1/pipelines/([^/]+)/topk)",
        [find](const httplib::Request& req, httplib::Response& res) {
          const pipeline* p = find(req, res);
          if (!p) return;
          const auto body = p->topk_json();
          if (!body)
            return json_error(
                res, 404, fmt::format("pipeline \"{}\" has no heavy_hitters section", p->name()));
          res.set_content(*body + "\n", kJson);
        });
  s.Get(R"(/api/v1/pipelines/([^/]+)/(estimate|seen))",
        [find](const httplib::Request& req, httplib::Response& res) {
          const pipeline* p = find(req, res);
          if (!p) return;
          const bool estimate = req.matches[2] == "estimate";
          // The path first (404), then the query (400).
          if (estimate ? !p->config().heavy_hitters : !p->config().dedup) {
            return json_error(res, 404,
                              fmt::format("pipeline \"{}\" has no {} section", p->name(),
                                          estimate ? "heavy_hitters" : "dedup"));
          }
          const query_param param = find_query_param(req, "item");
          if (!param.error.empty()) return json_error(res, 400, param.error);
          const std::string& item = param.value;
          const auto body = estimate ? p->estimate_json(item) : p->seen_json(item);
          if (!body) return json_error(res, 500, "the pipeline lost its section");
          res.set_content(*body + "\n", kJson);
        });
  // Read-only: every other method is refused, on every path, before any body is read (a
  // POST without a body would otherwise be a 400 for its missing Content-Length).
  s.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" || req.method == "HEAD") {
      // httplib reads no body of a GET or HEAD: one sent all the same would be read as the
      // next request (a request smuggled in it answered). The answer closes the connection.
      if (req.has_header("Transfer-Encoding") ||
          (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0")) {
        res.set_header("Connection", "close");
        close_after_answer = true;
      }
      // Every answer is whole: httplib would serve byte ranges of any of them (206, or a 416
      // without a JSON body), which no client of this API asks for, and it would announce
      // them to HEAD requests. The request is httplib's own, not const, object; it hands it
      // out as const.
      auto& request = const_cast<httplib::Request&>(req);
      request.ranges.clear();
      res.set_header("Accept-Ranges", "none");
      // Answers are compressed (gzip) for a client that accepts it, and only then.
      const auto [first, last] = request.headers.equal_range("Accept-Encoding");
      for (auto it = first; it != last; ++it) it->second = accepted_codings(it->second);
      res.set_header("Vary", "Accept-Encoding");
      return httplib::Server::HandlerResponse::Unhandled;
    }
    refuse_method(res);
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    // A method httplib does not know (FOO, a lowercase get) is refused by its parser with a
    // 400 before routing: it is a method other than GET and HEAD all the same.
    const bool token =
        !req.method.empty() && std::all_of(req.method.begin(), req.method.end(), [](char c) {
          return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '-' || c == '_';
        });
    if (res.status == 400 && token && req.method != "GET" && req.method != "HEAD" &&
        (req.version == "HTTP/1.1" || req.version == "HTTP/1.0")) {
      return refuse_method(res);
    }
    if (overrun != request_overrun::none) {
      res.set_header("Connection", "close");
      const auto [status, message] = overrun_answer(overrun);
      return json_error(res, status, message);
    }
    // After a request it could not parse, httplib cannot tell where the next one begins.
    if (res.status == 400 || res.status == 414) {
      res.set_header("Connection", "close");
      close_after_answer = true;
    }
    if (res.body.empty()) {
      // httplib's own refusals (no route, a request it cannot parse, a request line longer
      // than its 8,192 bytes) say what was wrong.
      std::string message;
      switch (res.status) {
        case 404:
          message =
              "no such path: the paths are /metrics, /healthz, /readyz, /api/v1/pipelines, "
              "/api/v1/pipelines/NAME and /api/v1/pipelines/NAME/{topk,estimate,seen}";
          break;
        case 414:
          message =
              "the request line is longer than 8192 bytes (an item of more than about 8000 "
              "bytes, or 2700 percent-encoded binary bytes, cannot be asked about)";
          break;
        case 400:
          message = "malformed HTTP request, or a header line longer than 8192 bytes";
          break;
        default:
          message = fmt::format("HTTP {}", res.status);
      }
      json_error(res, res.status, message);
    }
  });
}

std::optional<std::string> cannot_listen(const http_config& config) {
  if (config.port == 0) return std::nullopt;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(config.port);
  if (const int rc = ::getaddrinfo(config.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return fmt::format("http: cannot listen on {}: cannot resolve {}: {}", config.listen,
                       config.host, ::gai_strerror(rc));
  }
  int error = 0;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int sock = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (sock < 0) {
      error = errno;
      continue;
    }
    const int yes = 1;  // as the server's own socket: a port in TIME_WAIT is not in use
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    const int rc = ::bind(sock, a->ai_addr, a->ai_addrlen);
    error = rc == 0 ? 0 : errno;
    ::close(sock);
    if (rc == 0) break;
  }
  ::freeaddrinfo(found);
  if (error == 0) return std::nullopt;
  std::string why = std::system_category().message(error);
  if (error == EADDRINUSE) {
    why += " (another process listens there: stop it, or set http.listen to another port)";
  } else if (error == EADDRNOTAVAIL) {
    why +=
        " (no network interface of this machine has that address: use one it has, "
        "127.0.0.1 or 0.0.0.0)";
  } else if (error == EACCES) {
    why += " (ports below 1024 need privileges: use a higher port)";
  }
  return fmt::format("http: cannot listen on {}: {}", config.listen, why);
}

int http_server::start() {
  int port = config_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(config_.host);
    if (port < 0)
      throw std::runtime_error(fmt::format("http: cannot listen on {}:0", config_.host));
  } else if (!server_->bind_to_port(config_.host, port)) {
    throw std::runtime_error(cannot_listen(config_).value_or(fmt::format(
        "http: cannot listen on {} (address in use or not available)", config_.listen)));
  }
  // Debian's httplib is a compiled library that listens with a backlog of 5: connections
  // beyond that while the acceptor is busy (a burst of scrapers and API clients) would see
  // their first SYN dropped and wait a second for the retry. Listening again sets the
  // backlog (Linux).
  if (listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_ = true;
  });
  // httplib's stop() does nothing until the listening thread has entered its accept loop
  // (is_running() is set there): a stop() before that, when the start fails right after
  // this, would leave the thread in accept() and the destructor's join waiting forever.
  while (!server_->is_running() && !listen_returned_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void http_server::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sketchd
