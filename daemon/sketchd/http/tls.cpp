#include "sketchd/http/tls.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "sketchd/util/logging.h"

namespace sketchd::http {

namespace {

// Certificates, chains and keys are a few KiB; a CA bundle a few hundred.
constexpr off_t kMaxFileBytes = 4 * 1024 * 1024;

// There is no one to type a passphrase: an encrypted key is refused, never prompted for on
// the terminal (OpenSSL's default).
int no_passphrase(char*, int, int, void*) { return 0; }

// OpenSSL's reason for the last error of this thread, and the queue cleared.
std::string openssl_reason() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  const char* reason = code == 0 ? nullptr : ERR_reason_error_string(code);
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

}  // namespace

std::string_view tls_key(tls_file f) {
  switch (f) {
    case tls_file::cert:
      return "cert_file";
    case tls_file::key:
      return "key_file";
    case tls_file::client_ca:
      return "client_ca_file";
  }
  return "";
}

namespace {

struct bio_deleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct x509_deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct pkey_deleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using bio_ptr = std::unique_ptr<BIO, bio_deleter>;
using x509_ptr = std::unique_ptr<X509, x509_deleter>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_deleter>;

// A context made from the files, or the problem that stopped it.
struct made {
  std::shared_ptr<SSL_CTX> context;
  std::optional<tls_problem> problem;
};

// The whole of the file at `path` into `out`, so that a file that cannot be read says why
// (errno) and the PEM parsers then read memory; or why not. Only a regular file of a sane
// size: a path to a FIFO or a device would never end.
std::optional<std::string> read_file(const std::string& path, std::string& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return fmt::format("cannot read {}: {}", path, std::system_category().message(errno));
  if (!S_ISREG(st.st_mode)) return fmt::format("{} is not a regular file", path);
  if (st.st_size > kMaxFileBytes) {
    return fmt::format("{} is larger than {} KiB: not a PEM certificate or key", path,
                       kMaxFileBytes / 1024);
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fmt::format("cannot read {}: {}", path,
                       errno != 0 ? std::system_category().message(errno) : "cannot open it");
  }
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return fmt::format("cannot read {}: a read error", path);
  return std::nullopt;
}

bio_ptr memory_bio(const std::string& text) {
  return bio_ptr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The server's certificate first, then the chain up to (not necessarily including) the
// root, from `path`'s text. Each loader returns why it could not, or nothing.
std::optional<std::string> use_certificate_chain(SSL_CTX* ctx, const std::string& path,
                                                 const std::string& text) {
  const bio_ptr in = memory_bio(text);
  const x509_ptr leaf(PEM_read_bio_X509_AUX(in.get(), nullptr, no_passphrase, nullptr));
  if (!leaf) {
    return fmt::format("{} holds no PEM certificate (-----BEGIN CERTIFICATE-----): {}", path,
                       openssl_reason());
  }
  if (SSL_CTX_use_certificate(ctx, leaf.get()) != 1)
    return fmt::format("cannot use the certificate of {}: {}", path, openssl_reason());
  while (X509* next = PEM_read_bio_X509(in.get(), nullptr, no_passphrase, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, next) != 1) {  // takes it when it succeeds
      X509_free(next);
      return fmt::format("cannot use the chain of {}: {}", path, openssl_reason());
    }
  }
  ERR_clear_error();  // the end of the file, read as "no start line"
  return std::nullopt;
}

// The private key of `config.key_file`'s text, which must be the certificate's.
std::optional<std::string> use_private_key(SSL_CTX* ctx, const tls_config& config,
                                           const std::string& text) {
  const bio_ptr in = memory_bio(text);
  const pkey_ptr key(PEM_read_bio_PrivateKey(in.get(), nullptr, no_passphrase, nullptr));
  if (!key) {
    ERR_clear_error();
    if (text.find("ENCRYPTED") != std::string::npos) {
      return fmt::format(
          "{} holds an encrypted private key, and there is no one to give its passphrase: write "
          "it unencrypted (openssl pkey -in FILE -out FILE) and restrict the file's permissions "
          "instead",
          config.key_file);
    }
    return fmt::format("{} holds no PEM private key (-----BEGIN PRIVATE KEY-----)",
                       config.key_file);
  }
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return fmt::format("the private key of {} is not the key of the certificate of {}",
                       config.key_file, config.cert_file);
  }
  return std::nullopt;
}

// The CAs of `path`'s text, whose client certificates every connection must then present
// (as exporter-toolkit's default with a client CA: RequireAndVerifyClientCert).
std::optional<std::string> require_client_certificates(SSL_CTX* ctx, const std::string& path,
                                                       const std::string& text) {
  const bio_ptr in = memory_bio(text);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int count = 0;
  while (X509* ca = PEM_read_bio_X509(in.get(), nullptr, no_passphrase, nullptr)) {
    const x509_ptr owned(ca);
    // The store and the list of names sent to clients each take their own reference.
    if (X509_STORE_add_cert(store, ca) != 1 || SSL_CTX_add_client_CA(ctx, ca) != 1)
      return fmt::format("cannot use a certificate of {}: {}", path, openssl_reason());
    ++count;
  }
  ERR_clear_error();
  if (count == 0)
    return fmt::format("{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return std::nullopt;
}

made make_context(const tls_config& config) {
  const auto fail = [](tls_file f, std::string message) {
    return made{nullptr, tls_problem{f, std::move(message)}};
  };
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return fail(tls_file::cert, "OpenSSL cannot make a TLS context: " + openssl_reason());
  // Prometheus' web configuration accepts TLS 1.2 and later by default.
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // A write may take part of a buffer and be retried with the rest (the answer's stream
  // writes what the socket takes).
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_default_passwd_cb(ctx.get(), no_passphrase);
  // Resumed sessions need an id context when clients present certificates.
  static constexpr unsigned char kSessionContext[] = "sketchd";
  SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof kSessionContext - 1);

  std::string text;
  std::optional<std::string> why = read_file(config.cert_file, text);
  if (!why) why = use_certificate_chain(ctx.get(), config.cert_file, text);
  if (why) return fail(tls_file::cert, *why);
  why = read_file(config.key_file, text);
  if (!why) why = use_private_key(ctx.get(), config, text);
  text.assign(text.size(), '\0');  // the key's text, not left in freed memory
  if (why) return fail(tls_file::key, *why);
  if (!config.client_ca_file.empty()) {
    why = read_file(config.client_ca_file, text);
    if (!why) why = require_client_certificates(ctx.get(), config.client_ca_file, text);
    if (why) return fail(tls_file::client_ca, *why);
  }
  return made{std::move(ctx), std::nullopt};
}

}  // namespace

std::optional<tls_problem> tls_files_problem(const tls_config& config) {
  return make_context(config).problem;
}

tls_server_context::tls_server_context(tls_config config) : config_(std::move(config)) {
  loaded_ = stamps_now();
  made m = make_context(config_);
  if (m.problem) {
    throw std::runtime_error(
        fmt::format("http.tls.{}: {}", tls_key(m.problem->file), m.problem->message));
  }
  context_ = std::move(m.context);
  checked_ = std::chrono::steady_clock::now();
}

tls_server_context::~tls_server_context() = default;

tls_server_context::stamps tls_server_context::stamps_now() const {
  stamps out{};
  const std::string* paths[] = {&config_.cert_file, &config_.key_file, &config_.client_ca_file};
  for (std::size_t i = 0; i < out.size(); ++i) {
    struct stat st {};
    if (paths[i]->empty() || ::stat(paths[i]->c_str(), &st) != 0) continue;  // stays {}
    out[i] =
        stamp{st.st_dev, st.st_ino, st.st_size,
              static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  }
  return out;
}

void tls_server_context::reload_if_changed() {
  const auto now = std::chrono::steady_clock::now();
  if (now - checked_ < kRecheck) return;
  checked_ = now;
  const stamps current = stamps_now();
  if (current == loaded_) return;
  loaded_ = current;  // a change that fails is logged once, and tried again at the next change
  made m = make_context(config_);
  const auto log = module_logger("http");
  if (m.problem) {
    log->error("http.tls.{}: {}; still serving the certificate loaded before",
               tls_key(m.problem->file), m.problem->message);
    return;
  }
  context_ = std::move(m.context);
  log->info("http.tls: the certificate files changed: loaded again ({})", config_.cert_file);
}

SSL* tls_server_context::new_session(int sock) {
  std::shared_ptr<SSL_CTX> ctx;
  {
    const std::lock_guard lock(mutex_);
    reload_if_changed();
    ctx = context_;
  }
  // The session holds its own reference to the context: a reload frees the old one only
  // once its last session has ended.
  SSL* ssl = SSL_new(ctx.get());
  if (ssl == nullptr) return nullptr;
  if (SSL_set_fd(ssl, sock) != 1) {
    SSL_free(ssl);
    return nullptr;
  }
  return ssl;
}

}  // namespace sketchd::http
