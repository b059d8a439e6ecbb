#include "sketchd/http/server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "sketchd/util/json.h"

namespace sketchd {

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
    const std::string key = httplib::detail::decode_url(std::string(pair.substr(0, eq)), true);
    if (key != name) continue;
    if (++found > 1) {
      result.error = fmt::format("the query parameter \"{}\" is given more than once", name);
      return result;
    }
    if (eq != std::string_view::npos) {
      result.value = httplib::detail::decode_url(std::string(pair.substr(eq + 1)), true);
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

}  // namespace

http_server::http_server(const http_config& config, const metrics::registry& registry,
                         std::vector<const pipeline*> pipelines, const readiness& ready)
    : config_(config),
      registry_(registry),
      pipelines_(std::move(pipelines)),
      ready_(ready),
      server_(std::make_unique<httplib::Server>()) {
  routes();
}

http_server::~http_server() { stop(); }

void http_server::routes() {
  auto& s = *server_;
  s.set_read_timeout(std::chrono::seconds(5));
  s.set_write_timeout(std::chrono::seconds(5));
  // Every worker of httplib's pool may take a pipeline lock for one batch at most. A worker
  // serves one connection at a time, and an idle keep-alive connection holds its worker
  // for up to 5 s: 16, so that a few idle clients (scrapers, health checks, dashboards) do
  // not hold up /healthz.
  s.new_task_queue = [] { return new httplib::ThreadPool(16); };  // owned by httplib
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second
  // sketchd on the same address starts and the kernel splits the scrapes between the two.
  s.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.scrape(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
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

  const auto find = [this](const std::string& name) -> const pipeline* {
    for (const auto* p : pipelines_) {
      if (p->name() == name) return p;
    }
    return nullptr;
  };
  s.Get(R"(/api/v1/pipelines/([^/]+))",
        [find](const httplib::Request& req, httplib::Response& res) {
          const pipeline* p = find(req.matches[1]);
          if (!p)
            return json_error(res, 404,
                              fmt::format("no pipeline named \"{}\"", std::string(req.matches[1])));
          res.set_content(p->describe_json() + "\n", kJson);
        });
  s.Get(R"(/api/v1/pipelines/([^/]+)/topk)",
        [find](const httplib::Request& req, httplib::Response& res) {
          const pipeline* p = find(req.matches[1]);
          if (!p)
            return json_error(res, 404,
                              fmt::format("no pipeline named \"{}\"", std::string(req.matches[1])));
          const auto body = p->topk_json();
          if (!body)
            return json_error(
                res, 404, fmt::format("pipeline \"{}\" has no heavy_hitters section", p->name()));
          res.set_content(*body + "\n", kJson);
        });
  s.Get(R"(/api/v1/pipelines/([^/]+)/(estimate|seen))",
        [find](const httplib::Request& req, httplib::Response& res) {
          const pipeline* p = find(req.matches[1]);
          if (!p) {
            return json_error(res, 404,
                              fmt::format("no pipeline named \"{}\"", std::string(req.matches[1])));
          }
          const query_param param = find_query_param(req, "item");
          if (!param.error.empty()) return json_error(res, 400, param.error);
          const std::string& item = param.value;
          const bool estimate = req.matches[2] == "estimate";
          const auto body = estimate ? p->estimate_json(item) : p->seen_json(item);
          if (!body) {
            return json_error(res, 404,
                              fmt::format("pipeline \"{}\" has no {} section", p->name(),
                                          estimate ? "heavy_hitters" : "dedup"));
          }
          res.set_content(*body + "\n", kJson);
        });
  // Read-only: every other method is refused, on every path, before any body is read (a
  // POST without a body would otherwise be a 400 for its missing Content-Length). The
  // connection closes, since an unread body cannot be told from the next request.
  s.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" || req.method == "HEAD")
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("Allow", "GET, HEAD");
    res.set_header("Connection", "close");
    json_error(res, 405, "the API is read-only: GET (or HEAD) only");
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      res.set_content(fmt::format("{{\"error\":\"HTTP {}\"}}\n", res.status), kJson);
    }
  });
}

int http_server::start() {
  int port = config_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(config_.host);
    if (port < 0)
      throw std::runtime_error(fmt::format("http: cannot listen on {}:0", config_.host));
  } else if (!server_->bind_to_port(config_.host, port)) {
    // A name that does not resolve is not an address in use: say which it is.
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int resolved = ::getaddrinfo(config_.host.c_str(), nullptr, &hints, &found);
    if (found) ::freeaddrinfo(found);
    if (resolved != 0) {
      throw std::runtime_error(fmt::format("http: cannot listen on {}: cannot resolve {}: {}",
                                           config_.listen, config_.host, ::gai_strerror(resolved)));
    }
    throw std::runtime_error(
        fmt::format("http: cannot listen on {} (address in use or not available)", config_.listen));
  }
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
