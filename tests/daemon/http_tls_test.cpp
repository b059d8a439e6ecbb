// HTTPS (http.tls, http/tls.h): the files the configuration takes and refuses, at their
// key's line and column; the server answering over TLS to a client that verifies it, and a
// plain-HTTP client told to use https; client certificates required with client_ca_file;
// a renewed certificate served without a restart. The certificates are made here with
// OpenSSL (a CA, and a server and a client certificate it signs), in a fresh directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "config_test_support.h"
#include "sketchd/http/server.h"
#include "sketchd/http/tls.h"

namespace sketchd {
namespace {

using namespace std::chrono_literals;
using test_support::errors_of;
using test_support::kMinimal;
using test_support::load;
namespace fs = std::filesystem;

struct key_deleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct cert_deleter {
  void operator()(X509* x) const { X509_free(x); }
};
using key_ptr = std::unique_ptr<EVP_PKEY, key_deleter>;
using cert_ptr = std::unique_ptr<X509, cert_deleter>;

// A P-256 key and a certificate for `cn`, valid for a day, signed by `issuer` (itself when
// null, a CA then). `san`: its subjectAltName, such as "IP:127.0.0.1".
struct identity {
  key_ptr key;
  cert_ptr cert;
};

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(ext, nullptr) << value;
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

identity make_identity(const std::string& cn, const identity* issuer, const char* san = nullptr) {
  static long serial = 1;
  identity id{key_ptr(EVP_EC_gen("P-256")), cert_ptr(X509_new())};
  X509* x = id.cert.get();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
  X509_set_pubkey(x, id.key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer->cert.get() : x;
  X509_set_issuer_name(x, X509_get_subject_name(signer));
  if (issuer == nullptr) {
    add_extension(x, signer, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(x, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(x, signer, NID_basic_constraints, "CA:FALSE");
  }
  if (san != nullptr) add_extension(x, signer, NID_subject_alt_name, san);
  X509_sign(x, issuer != nullptr ? issuer->key.get() : id.key.get(), EVP_sha256());
  return id;
}

// A fresh directory, removed at the end.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "sketchd-tls-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~temp_dir() { fs::remove_all(path); }
  [[nodiscard]] std::string file(const std::string& name) const { return (path / name).string(); }
};

void write_cert(const std::string& path, const identity& id) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  PEM_write_X509(f, id.cert.get());
  std::fclose(f);
}

void write_key(const std::string& path, const identity& id, const char* passphrase = nullptr) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  if (passphrase != nullptr) {
    PEM_write_PKCS8PrivateKey(f, id.key.get(), EVP_aes_256_cbc(), nullptr, 0, nullptr,
                              const_cast<char*>(passphrase));
  } else {
    PEM_write_PrivateKey(f, id.key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  }
  std::fclose(f);
}

// A CA, a server certificate for 127.0.0.1 and a client certificate it signs, and a second
// server certificate of another CA, in their files.
struct certificates {
  temp_dir dir;
  identity ca = make_identity("sketchd test CA", nullptr);
  identity server = make_identity("sketchd", &ca, "IP:127.0.0.1,DNS:localhost");
  identity client = make_identity("prometheus", &ca);
  identity other_ca = make_identity("another CA", nullptr);
  identity other = make_identity("sketchd renewed", &other_ca, "IP:127.0.0.1,DNS:localhost");

  certificates() {
    write_cert(dir.file("ca.crt"), ca);
    write_cert(dir.file("server.crt"), server);
    write_key(dir.file("server.key"), server);
    write_cert(dir.file("client.crt"), client);
    write_key(dir.file("client.key"), client);
    write_cert(dir.file("other-ca.crt"), other_ca);
    write_cert(dir.file("other.crt"), other);
    write_key(dir.file("other.key"), other);
    write_key(dir.file("encrypted.key"), server, "passphrase");
    std::ofstream(dir.file("empty.pem")) << "";
  }

  [[nodiscard]] tls_config tls(bool client_ca = false) const {
    return tls_config{dir.file("server.crt"), dir.file("server.key"),
                      client_ca ? dir.file("ca.crt") : std::string()};
  }
};

TEST(TlsConfig, FilesThatServeAreTaken) {
  const certificates c;
  const auto r =
      load(std::string(kMinimal) + "http:\n  tls:\n    cert_file: " + c.dir.file("server.crt") +
           "\n    key_file: " + c.dir.file("server.key") +
           "\n    client_ca_file: " + c.dir.file("ca.crt") + "\n");
  ASSERT_TRUE(r.value) << testing::PrintToString(errors_of(r));
  ASSERT_TRUE(r.value->http.tls);
  EXPECT_EQ(r.value->http.tls->cert_file, c.dir.file("server.crt"));
  EXPECT_EQ(r.value->http.tls->client_ca_file, c.dir.file("ca.crt"));
}

TEST(TlsConfig, FilesThatWouldNotServeAreRefusedAtTheirKey) {
  const certificates c;
  const auto errors = [&](const std::string& cert, const std::string& key,
                          const std::string& ca = {}) {
    std::string yaml = std::string(kMinimal) +
                       "http:\n"   // 8
                       "  tls:\n"  // 9
                       "    cert_file: " +
                       c.dir.file(cert) + "\n" +                              // 10
                       "    key_file: " + c.dir.file(key) + "\n";             // 11
    if (!ca.empty()) yaml += "    client_ca_file: " + c.dir.file(ca) + "\n";  // 12
    return errors_of(load(yaml));
  };
  using testing::ElementsAre;
  using testing::HasSubstr;
  using testing::StartsWith;
  EXPECT_THAT(errors("missing.crt", "server.key"),
              ElementsAre(AllOf(StartsWith("test.yaml:10:16: http.tls.cert_file: cannot read "),
                                HasSubstr("No such file or directory"))));
  EXPECT_THAT(errors("server.key", "server.key"),
              ElementsAre(AllOf(StartsWith("test.yaml:10:16: http.tls.cert_file: "),
                                HasSubstr("holds no PEM certificate"))));
  EXPECT_THAT(errors("server.crt", "server.crt"),
              ElementsAre(AllOf(StartsWith("test.yaml:11:15: http.tls.key_file: "),
                                HasSubstr("holds no PEM private key"))));
  EXPECT_THAT(errors("server.crt", "other.key"),
              ElementsAre(AllOf(StartsWith("test.yaml:11:15: http.tls.key_file: "),
                                HasSubstr("is not the key of the certificate"))));
  EXPECT_THAT(errors("server.crt", "encrypted.key"),
              ElementsAre(AllOf(StartsWith("test.yaml:11:15: http.tls.key_file: "),
                                HasSubstr("encrypted private key"))));
  EXPECT_THAT(errors("server.crt", "server.key", "empty.pem"),
              ElementsAre(AllOf(StartsWith("test.yaml:12:21: http.tls.client_ca_file: "),
                                HasSubstr("holds no PEM certificate"))));
  // A directory, or a device that would never end, is not read.
  EXPECT_THAT(errors("", "server.key"),
              ElementsAre(AllOf(StartsWith("test.yaml:10:16: http.tls.cert_file: "),
                                HasSubstr("not a regular file"))));
  // Both keys are needed.
  EXPECT_THAT(errors_of(load(std::string(kMinimal) + "http:\n  tls: { cert_file: x }\n")),
              ElementsAre(HasSubstr("http.tls: missing required key \"key_file\"")));
}

// A server over TLS with a user, on a port of its own.
struct served_over_tls {
  explicit served_over_tls(const certificates& c, bool client_ca = false)
      : cfg{.listen = "127.0.0.1:0",
            .host = "127.0.0.1",
            .port = 0,
            .basic_auth_users = {},
            .tls = c.tls(client_ca)} {
    std::signal(SIGPIPE, SIG_IGN);  // as `sketchd run` (OpenSSL writes without MSG_NOSIGNAL)
    server = std::make_unique<http_server>(cfg, registry, std::vector<const pipeline*>{}, ready);
    port = server->start();
  }

  // A client that trusts `ca` and checks the certificate's address.
  [[nodiscard]] std::unique_ptr<httplib::SSLClient> client(const std::string& ca,
                                                           const std::string& cert = {},
                                                           const std::string& key = {}) const {
    auto cli = std::make_unique<httplib::SSLClient>("127.0.0.1", port, cert, key);
    cli->set_ca_cert_path(ca.c_str());
    cli->enable_server_certificate_verification(true);
    cli->set_read_timeout(5s);
    cli->set_connection_timeout(5s);
    return cli;
  }

  metrics::registry registry;
  readiness ready;  // /healthz 200 for a minute
  http_config cfg;
  std::unique_ptr<http_server> server;
  int port = 0;
};

TEST(TlsServer, AnswersOverTlsAndTellsAPlainClientToUseHttps) {
  const certificates c;
  served_over_tls s(c);
  auto cli = s.client(c.dir.file("ca.crt"));
  for (int i = 0; i < 3; ++i) {  // one connection, kept alive
    const auto res = cli->Get("/healthz");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_THAT(res->body, testing::HasSubstr("\"ok\""));
  }
  const auto metrics = cli->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);

  httplib::Client plain("127.0.0.1", s.port);
  plain.set_read_timeout(5s);
  const auto refused = plain.Get("/metrics");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_THAT(refused->body, testing::HasSubstr("this port speaks HTTPS"));

  // A client that does not trust the certificate's CA gets no answer.
  auto untrusting = s.client(c.dir.file("other-ca.crt"));
  EXPECT_FALSE(untrusting->Get("/healthz"));
  // The server goes on serving.
  EXPECT_TRUE(cli->Get("/healthz"));
}

TEST(TlsServer, WithAClientCaEveryConnectionNeedsACertificateItSigned) {
  const certificates c;
  served_over_tls s(c, /*client_ca=*/true);
  auto anonymous = s.client(c.dir.file("ca.crt"));
  const auto refused = anonymous->Get("/healthz");
  EXPECT_FALSE(refused && refused->status == 200);
  auto unknown = s.client(c.dir.file("ca.crt"), c.dir.file("other.crt"), c.dir.file("other.key"));
  const auto refused_too = unknown->Get("/healthz");
  EXPECT_FALSE(refused_too && refused_too->status == 200);
  auto known = s.client(c.dir.file("ca.crt"), c.dir.file("client.crt"), c.dir.file("client.key"));
  const auto res = known->Get("/healthz");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
}

TEST(TlsServer, ARenewedCertificateIsServedWithoutARestart) {
  const certificates c;
  served_over_tls s(c);
  EXPECT_TRUE(s.client(c.dir.file("ca.crt"))->Get("/healthz"));
  // The certificate first, then its key, as a renewal writes them: in between, the files do
  // not match, and the certificate before is served on.
  fs::copy_file(c.dir.file("other.crt"), c.dir.file("server.crt"),
                fs::copy_options::overwrite_existing);
  std::this_thread::sleep_for(http::tls_server_context::kRecheck + 100ms);
  EXPECT_TRUE(s.client(c.dir.file("ca.crt"))->Get("/healthz"));
  fs::copy_file(c.dir.file("other.key"), c.dir.file("server.key"),
                fs::copy_options::overwrite_existing);
  std::this_thread::sleep_for(http::tls_server_context::kRecheck + 100ms);
  const auto renewed = s.client(c.dir.file("other-ca.crt"))->Get("/healthz");
  ASSERT_TRUE(renewed) << httplib::to_string(renewed.error());
  EXPECT_EQ(renewed->status, 200);
  EXPECT_FALSE(s.client(c.dir.file("ca.crt"))->Get("/healthz"));
}

}  // namespace
}  // namespace sketchd
