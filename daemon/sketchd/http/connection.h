// How the HTTP listener serves a connection: httplib's server with each connection read
// and written within bounds (a request's line and headers at most 64 KiB and 10 s to send,
// an answer 60 s to write, pipelined requests answered in turn), a worker per connection,
// a closing connection that loses no answer, and with http.tls each connection's TLS
// handshake (within the 10 s of a request) before its first request. http_server
// (server.h) is built on it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace httplib {
class Server;
class TaskQueue;
}  // namespace httplib

namespace sketchd {

namespace http {
class tls_server_context;
}

// The server http_server serves with (httplib's, each connection served within the bounds
// above, up to keep_alive_max_count requests per connection).
[[nodiscard]] std::unique_ptr<httplib::Server> make_bounded_server();
// Serves the connection on `sock` as the listener serves each one, with `server`'s routes,
// then closes it. `server` comes from make_bounded_server() (std::logic_error otherwise).
// For the HTTP connection fuzz target, which serves one end of a socket pair without a
// listener. Returns whether the last request was answered.
bool serve_connection(httplib::Server& server, int sock);
// Has `server` (from make_bounded_server(), std::logic_error otherwise) serve every
// connection over TLS, with `tls`'s certificate; before it listens. The process must ignore
// SIGPIPE (OpenSSL writes to the socket without MSG_NOSIGNAL): `sketchd run` does.
void serve_over_tls(httplib::Server& server, std::shared_ptr<http::tls_server_context> tls);

namespace http {

// The timeouts of a connection (http_server gives httplib the same, for its own use).
inline constexpr std::chrono::seconds kReadTimeout{5};
inline constexpr std::chrono::seconds kWriteTimeout{5};
inline constexpr std::chrono::seconds kKeepAliveTimeout{1};

// A new task queue for httplib's new_task_queue (httplib owns it): a worker per connection,
// as many as there are connections up to 512, idle ones beyond 4 ending after 30 s.
// Thread-safe.
[[nodiscard]] httplib::TaskQueue* new_growing_pool();

// The two below are about the request the calling thread is answering (a worker serves
// one connection at a time); they are for the routes and error handlers of a server from
// make_bounded_server().

// Closes the connection once this answer is written (httplib sends "Connection: close" as a
// header, but would read on).
void close_connection_after_answer() noexcept;
// When the request went past the bounds (its headers too large, or too slow to come): the
// status and the message to answer it with; nullopt otherwise.
[[nodiscard]] std::optional<std::pair<int, std::string>> overrun_answer();

}  // namespace http
}  // namespace sketchd
