// HTTPS for the HTTP listener (http.tls), as Prometheus' web configuration has it
// (exporter-toolkit's tls_server_config): a certificate chain and its private key in PEM
// files, and optionally the CAs whose client certificates every connection must present
// (mutual TLS). TLS 1.2 and 1.3 only. OpenSSL (Debian's libssl) does the TLS; this file
// only loads the files, checks them, and reloads them when they change.
#pragma once

#include <sys/stat.h>

#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "sketchd/config/types.h"

using SSL = struct ssl_st;
using SSL_CTX = struct ssl_ctx_st;

namespace sketchd::http {

// Which file of http.tls a problem is about.
enum class tls_file { cert, key, client_ca };

// The key of http.tls that names the file: "cert_file", "key_file" or "client_ca_file".
[[nodiscard]] std::string_view tls_key(tls_file f);

struct tls_problem {
  tls_file file;
  std::string message;  // names the file and says why, never what the key holds
};

// Why http.tls's files cannot serve HTTPS, or nullopt: a file missing or unreadable, a
// certificate or key that is not PEM, an encrypted key (there is no one to ask for its
// passphrase), a key that is not the certificate's, a client CA file without a certificate.
[[nodiscard]] std::optional<tls_problem> tls_files_problem(const tls_config& config);

// The TLS side of the listener: an OpenSSL context made from the files, made again when one
// of them changes (looked at, at a new connection, at most once every kRecheck), so that
// a renewed certificate is served without a restart. A change that cannot be loaded (the
// key written before its certificate, a file half written) is logged, and the last good
// context kept. Thread-safe.
class tls_server_context {
 public:
  static constexpr std::chrono::seconds kRecheck{1};

  // Throws std::runtime_error with tls_files_problem()'s message when the files do not do.
  explicit tls_server_context(tls_config config);
  ~tls_server_context();
  tls_server_context(const tls_server_context&) = delete;
  tls_server_context& operator=(const tls_server_context&) = delete;

  // A new server-side TLS session for the connection on `sock` (the caller frees it with
  // SSL_free), or nullptr when OpenSSL cannot make one.
  [[nodiscard]] SSL* new_session(int sock);

 private:
  // What identifies a version of a file: device, inode, size and modification time.
  struct stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    std::int64_t mtime_ns = 0;
    bool operator==(const stamp&) const = default;
  };
  using stamps = std::array<stamp, 3>;
  [[nodiscard]] stamps stamps_now() const;
  void reload_if_changed();

  tls_config config_;
  std::mutex mutex_;
  std::shared_ptr<SSL_CTX> context_;
  stamps loaded_;  // the files' stamps when they were last looked at
  std::chrono::steady_clock::time_point checked_;
};

}  // namespace sketchd::http
