#include "sketchd/http/server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "sketchd/http/api.h"
#include "sketchd/http/tls.h"
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

using http::kJson;

// The body of /healthz and /readyz: {"status":STATUS} with the reason when there is one.
std::string status_body(std::string_view status, std::optional<std::string> reason = {}) {
  nlohmann::ordered_json o;
  o["status"] = std::string(status);
  if (reason) o["reason"] = std::move(*reason);
  return json::dump(o) + "\n";
}

// The answer to any other method than GET and HEAD: the API is read-only. The connection
// closes, since an unread body cannot be told from the next request.
void refuse_method(httplib::Response& res) {
  res.set_header("Allow", "GET, HEAD");
  res.set_header("Connection", "close");
  http::close_connection_after_answer();
  http::json_error(res, 405, "the API is read-only: GET (or HEAD) only");
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

// Before routing. Read-only: every other method is refused, on every path, before any body
// is read (a POST without a body would otherwise be a 400 for its missing Content-Length).
httplib::Server::HandlerResponse before_routing(const httplib::Request& req,
                                                httplib::Response& res) {
  if (req.method == "GET" || req.method == "HEAD") {
    // httplib reads no body of a GET or HEAD: one sent all the same would be read as the
    // next request (a request smuggled in it answered). The answer closes the connection.
    if (req.has_header("Transfer-Encoding") ||
        (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0")) {
      res.set_header("Connection", "close");
      http::close_connection_after_answer();
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
}

// The answer to what no route answered, or to what httplib refused before routing.
void answer_unrouted(const httplib::Request& req, httplib::Response& res) {
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
  if (const auto overrun = http::overrun_answer()) {
    res.set_header("Connection", "close");
    return http::json_error(res, overrun->first, overrun->second);
  }
  // After a request it could not parse, httplib cannot tell where the next one begins.
  if (res.status == 400 || res.status == 414) {
    res.set_header("Connection", "close");
    http::close_connection_after_answer();
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
    http::json_error(res, res.status, message);
  }
}

}  // namespace

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
  if (config_.tls)
    serve_over_tls(*server_, std::make_shared<http::tls_server_context>(*config_.tls));
}

http_server::~http_server() { stop(); }

void http_server::routes() {
  auto& s = *server_;
  s.set_read_timeout(http::kReadTimeout);
  s.set_write_timeout(http::kWriteTimeout);
  s.set_keep_alive_max_count(http::kRequestsPerConnection);
  // The listener (http/listener.h) accepts and waits for the connections; httplib's own
  // loop is not used.

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.scrape(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    if (const auto stalled = ready_.stalled()) {
      res.status = 503;
      res.set_content(
          status_body(
              "stalled",
              fmt::format("the processing thread has not come round its loop for {} s (limit {} s)",
                          stalled->count() / 1000, ready_.stall_limit().count() / 1000)),
          kJson);
      return;
    }
    res.set_content(status_body("ok"), kJson);
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    // A listener that does not accept connections: only the connections already open (a
    // scraper's kept-alive one) can be told.
    if (auto problem = listener_ ? listener_->problem() : std::nullopt) {
      res.status = 503;
      res.set_content(status_body("not ready", std::move(problem)), kJson);
    } else if (ready_.ready()) {
      res.set_content(status_body("ready"), kJson);
    } else {
      res.status = 503;
      res.set_content(status_body("not ready", ready_.reason()), kJson);
    }
  });
  http::add_api_routes(s, pipelines_);
  if (config_.basic_auth_users.empty()) {
    s.set_pre_routing_handler(before_routing);
  } else {
    // Every endpoint but /healthz asks for a user: the liveness answer says nothing about
    // the data, and a probe that restarts sketchd should not need its credentials.
    auth_ = std::make_unique<http::basic_auth>(config_.basic_auth_users);
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (before_routing(req, res) == httplib::Server::HandlerResponse::Handled)
        return httplib::Server::HandlerResponse::Handled;
      if (req.path == "/healthz" || auth_->allows(req.get_header_value("Authorization")))
        return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("WWW-Authenticate", std::string(http::basic_auth::kChallenge));
      http::json_error(res, 401, "authentication required: a user of http.basic_auth_users");
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  s.set_error_handler(
      [](const httplib::Request& req, httplib::Response& res) { answer_unrouted(req, res); });
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
  listener_ = std::make_unique<http::listener>(
      *server_, http::listener::options{.host = config_.host,
                                        .port = config_.port,
                                        .max_connections = config_.max_connections,
                                        .tls = config_.tls.has_value()});
  try {
    return listener_->start();
  } catch (const std::exception& e) {
    listener_.reset();
    throw std::runtime_error(cannot_listen(config_).value_or(
        fmt::format("http: cannot listen on {}: {}", config_.listen, e.what())));
  }
}

void http_server::stop() {
  if (listener_) listener_->stop();
}

}  // namespace sketchd
