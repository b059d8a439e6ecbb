// How the HTTP listener serves a connection: httplib's server with each connection read
// and written within bounds (a request's line and headers at most 64 KiB and 10 s to send,
// an answer 60 s to write, pipelined requests answered in turn), a worker while the
// connection is served and none while it waits for input (listener.h waits), a closing
// connection that loses no answer, and with http.tls each connection's TLS handshake
// (within 10 s of its start) before its first request. http_server (server.h) is built on
// it.
#pragma once

#include <chrono>
#include <cstddef>
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

// The timeouts of a connection (http_server gives httplib the same, for its own use): a
// request's bytes may pause for kReadTimeout, an answer's writes for kWriteTimeout, and a
// connection may wait kIdleTimeout for its next request (without a worker: the listener
// waits for it).
inline constexpr std::chrono::seconds kReadTimeout{5};
inline constexpr std::chrono::seconds kWriteTimeout{5};
inline constexpr std::chrono::seconds kIdleTimeout{30};
// Requests served on one connection before it closes.
inline constexpr std::size_t kRequestsPerConnection = 100;

// A new task queue for the connections' workers (the caller owns it): a worker per
// connection being served, as many as there are up to 64 (beyond them connections wait
// for one), idle ones beyond 4 ending after 30 s. Thread-safe.
[[nodiscard]] httplib::TaskQueue* new_growing_pool();

// A connection between its requests (connection.cpp): its socket, TLS session and what it
// read ahead. One owner at a time: the listener while it waits for input, a worker while
// serve_ready() serves it. Destroying it closes its socket at once.
class connection;
struct connection_deleter {
  void operator()(connection* c) const noexcept;
};
using connection_ptr = std::unique_ptr<connection, connection_deleter>;

// A connection on the accepted socket `sock` (it takes it), served with `server`'s routes;
// `server` from make_bounded_server() (std::logic_error otherwise), outliving it. Its first
// input is awaited for kRequestDeadline.
[[nodiscard]] connection_ptr open_connection(httplib::Server& server, int sock);
// On a worker, once the connection's socket has input (or has ended, or its deadline
// passed): serves what it can without waiting for more input — a TLS handshake, requests
// whose bytes are there. Returns true when the connection waits for input again (until
// input_deadline()), false when it is closed (the answers written, lingering for the client
// to read them).
bool serve_ready(connection& c);
// Until when the listener waits for the connection's input before closing it.
[[nodiscard]] std::chrono::steady_clock::time_point input_deadline(const connection& c);
// Whether the connection waits between requests, as opposed to within a request or a
// handshake: what the listener closes first when it needs room.
[[nodiscard]] bool is_idle(const connection& c);
[[nodiscard]] int socket_of(const connection& c);
// From now on, no request is read and a closing connection does not linger.
void begin_stop(httplib::Server& server);

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
