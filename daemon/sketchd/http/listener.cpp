#include "sketchd/http/listener.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "sketchd/http/api.h"
#include "sketchd/util/logging.h"

namespace sketchd::http {

namespace {

using clock = std::chrono::steady_clock;

// How long accepting pauses when the process is out of file descriptors or memory, and how
// often a broken listening socket is bound again.
constexpr std::chrono::milliseconds kAcceptPause{100};
constexpr std::chrono::seconds kRelisten{1};
// How often refusals and resource errors are logged, at most.
constexpr std::chrono::seconds kWarnEvery{10};

// A listening socket on host:port, non-blocking. Throws as listener::start() says.
int bind_listening_socket(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw std::runtime_error(fmt::format("cannot resolve {}: {}", host, ::gai_strerror(rc)));
  }
  int error = EADDRNOTAVAIL;
  int fd = -1;
  for (const addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    const int sock =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (sock < 0) {
      error = errno;
      continue;
    }
    // SO_REUSEADDR only: a port in TIME_WAIT is free; SO_REUSEPORT would let a second
    // sketchd on the same address start, and the kernel split the scrapes between the two.
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(sock, a->ai_addr, a->ai_addrlen) == 0 && ::listen(sock, SOMAXCONN) == 0) {
      fd = sock;
    } else {
      error = errno;
      ::close(sock);
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw std::system_error(error, std::system_category(), "bind");
  return fd;
}

// Whether a connection waiting for input, polled with `revents`, has ended without sending
// anything more: closed by its client (nothing to read, nothing to answer), or broken. Such a
// connection is closed by the listener itself; a flood of connections closing at once would
// otherwise take a worker each, for nothing.
bool client_closed(int sock, short revents) {
  if ((revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return true;
  char byte = 0;
  ssize_t n = 0;
  do {
    n = ::recv(sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

int bound_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return -1;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

}  // namespace

listener::listener(httplib::Server& server, options o) : server_(server), options_(std::move(o)) {}

listener::~listener() { stop(); }

int listener::start() {
  listen_fd_ = bind_listening_socket(options_.host, options_.port);
  const int port = bound_port(listen_fd_);
  options_.port = static_cast<std::uint16_t>(port);  // a new socket after a failure: the same
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    const int error = errno;
    ::close(listen_fd_);
    listen_fd_ = -1;
    throw std::system_error(error, std::system_category(), "eventfd");
  }
  workers_.reset(new_growing_pool());
  thread_ = std::thread([this] { run(); });
  return port;
}

void listener::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  begin_stop(server_);
  wake();
  thread_.join();
  // The workers end what they serve (no further request is read), and drop what they
  // would have handed back.
  workers_->shutdown();
  {
    const std::lock_guard lock(mutex_);
    for (connection* c : returned_) connection_deleter{}(c);
    returned_.clear();
  }
  waiting_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  ::close(wake_fd_);
  wake_fd_ = -1;
}

std::optional<std::string> listener::problem() const {
  const std::lock_guard lock(mutex_);
  return problem_;
}

std::size_t listener::open_connections() const {
  const std::lock_guard lock(mutex_);
  return waiting_count_ + served_;
}

void listener::wake() const {
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void listener::dispatch(connection_ptr c) {
  {
    const std::lock_guard lock(mutex_);
    ++served_;
  }
  connection* raw = c.release();  // the job owns it (std::function needs a copyable target)
  workers_->enqueue([this, raw]() mutable {
    const bool waits = !stopping_ && serve_ready(*raw);
    {
      const std::lock_guard lock(mutex_);
      --served_;
      if (waits && !stopping_) {
        returned_.push_back(raw);
        raw = nullptr;
      }
    }
    if (raw == nullptr) {
      wake();
    } else {
      connection_deleter{}(raw);
    }
  });
}

bool listener::close_longest_waiting() {
  if (waiting_.empty()) return false;
  waiting_.pop_front();
  return true;
}

void listener::refuse(int sock) {
  // Over plain HTTP, a client is told why; a TLS client, before its handshake, can only be
  // closed on. A request already sent is not read: the close may reach the client as a
  // reset, which is still a refusal at once.
  if (!options_.tls) {
    const std::string body = error_body(fmt::format(
        "too many connections: {} are open (http.max_connections), none of them idle; try "
        "again",
        options_.max_connections));
    const std::string answer = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n"
        "Content-Type: {}\r\nContent-Length: {}\r\n\r\n{}",
        kJson, body.size(), body);
    (void)::send(sock, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  ::close(sock);
  ++refused_since_warning_;
}

void listener::listener_failed(int error, clock::time_point now) {
  const std::string why =
      fmt::format("the HTTP listener on port {} failed (accept: {}); binding it again every {} s",
                  options_.port, std::system_category().message(error), kRelisten.count());
  module_logger("http")->error("{}", why);
  ::close(listen_fd_);
  listen_fd_ = -1;
  relisten_at_ = now + kRelisten;
  const std::lock_guard lock(mutex_);
  problem_ = why;
}

void listener::accept_all(clock::time_point now) {
  for (;;) {
    const int sock = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (sock < 0) {
      const int error = errno;
      switch (error) {
        case EINTR:
          continue;
        case EAGAIN:
#if EAGAIN != EWOULDBLOCK
        case EWOULDBLOCK:
#endif
          return;
        // The connection's own errors (accept(2): to be treated as EAGAIN).
        case ECONNABORTED:
        case EPROTO:
        case ENOPROTOOPT:
        case EHOSTDOWN:
        case ENONET:
        case EHOSTUNREACH:
        case EOPNOTSUPP:
        case ENETUNREACH:
        case ENETDOWN:
        case EPERM:  // a firewall rule
          continue;
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM:
          // Out of descriptors or memory: a waiting connection closed makes room for the one
          // in the queue; without one, accepting pauses (the listening socket would stay
          // readable, and the loop spin).
          if (close_longest_waiting()) continue;
          accept_paused_until_ = now + kAcceptPause;
          if (now - warned_at_ >= kWarnEvery) {
            warned_at_ = now;
            module_logger("http")->warn(
                "cannot accept HTTP connections: {} ({} open); pausing {} ms",
                std::system_category().message(error), waiting_.size(), kAcceptPause.count());
          }
          return;
        default:
          listener_failed(error, now);
          return;
      }
    }
    const int yes = 1;  // the second answer on a kept-alive connection waited 40 ms without it
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    std::size_t served = 0;
    {
      const std::lock_guard lock(mutex_);
      served = served_ + returned_.size();
    }
    if (waiting_.size() + served >= options_.max_connections && !close_longest_waiting()) {
      refuse(sock);
      continue;
    }
    waiting_.push_back(open_connection(server_, sock));
  }
}

void listener::run() {
  std::vector<pollfd> fds;
  for (;;) {
    {
      const std::lock_guard lock(mutex_);
      for (connection* c : returned_) waiting_.emplace_back(c);
      returned_.clear();
      waiting_count_ = waiting_.size();
    }
    if (stopping_) return;
    auto now = clock::now();
    if (listen_fd_ < 0 && now >= relisten_at_) {
      try {
        listen_fd_ = bind_listening_socket(options_.host, options_.port);
        module_logger("http")->info("the HTTP listener on port {} accepts connections again",
                                    options_.port);
        const std::lock_guard lock(mutex_);
        problem_.reset();
      } catch (const std::exception& e) {
        relisten_at_ = now + kRelisten;
        const std::lock_guard lock(mutex_);
        problem_ = fmt::format(
            "the HTTP listener on port {} failed, and cannot be bound again: {}; trying every {} s",
            options_.port, e.what(), kRelisten.count());
      }
    }
    if (refused_since_warning_ > 0 && now - warned_at_ >= kWarnEvery) {
      warned_at_ = now;
      module_logger("http")->warn(
          "refused {} HTTP connection(s): {} open (http.max_connections), none idle",
          refused_since_warning_, options_.max_connections);
      refused_since_warning_ = 0;
    }

    fds.clear();
    fds.push_back(pollfd{wake_fd_, POLLIN, 0});
    const bool accepting = listen_fd_ >= 0 && now >= accept_paused_until_;
    fds.push_back(pollfd{accepting ? listen_fd_ : -1, POLLIN, 0});
    auto until = clock::time_point::max();
    if (listen_fd_ < 0) until = relisten_at_;
    if (listen_fd_ >= 0 && !accepting) until = std::min(until, accept_paused_until_);
    for (const connection_ptr& c : waiting_) {
      fds.push_back(pollfd{socket_of(*c), POLLIN, 0});
      until = std::min(until, input_deadline(*c));
    }
    int timeout = -1;
    if (until != clock::time_point::max()) {
      timeout = static_cast<int>(std::clamp<std::int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(until - now).count(), 0, 60'000));
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      module_logger("http")->error("the HTTP listener's poll failed: {}",
                                   std::system_category().message(errno));
      std::this_thread::sleep_for(kAcceptPause);
      continue;
    }
    if (fds[0].revents != 0) {
      std::uint64_t count = 0;
      (void)!::read(wake_fd_, &count, sizeof count);
    }
    now = clock::now();
    // Connections with input go to a worker; those the client closed, or past their
    // deadline, close here.
    std::deque<connection_ptr> still;
    for (std::size_t i = 0; i < waiting_.size(); ++i) {
      connection_ptr& c = waiting_[i];
      if (fds[i + 2].revents != 0) {
        if (client_closed(socket_of(*c), fds[i + 2].revents)) {
          c.reset();
        } else {
          dispatch(std::move(c));
        }
      } else if (now >= input_deadline(*c)) {
        c.reset();
      } else {
        still.push_back(std::move(c));
      }
    }
    waiting_ = std::move(still);
    if (accepting && fds[1].revents != 0) accept_all(now);
  }
}

}  // namespace sketchd::http
