// Basic authentication with bcrypt hashes (http/basic_auth.h): the hashes the configuration
// takes and refuses, the Authorization headers that pass, and the HTTP server asking every
// endpoint but /healthz for a user. Hashes of cost 4, the lowest bcrypt has, made here by
// libcrypt with a fixed salt, so that the tests run in milliseconds.
#include <absl/strings/escaping.h>
#include <crypt.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>

#include "config_test_support.h"
#include "sketchd/http/basic_auth.h"
#include "sketchd/http/server.h"

namespace sketchd {
namespace {

using namespace std::chrono_literals;
using test_support::errors_of;
using test_support::kMinimal;
using test_support::load;

// The bcrypt hash of `password` at cost 4, with a fixed salt.
std::string bcrypt(const std::string& password) {
  const auto data = std::make_unique<crypt_data>();
  const char* out =
      crypt_rn(password.c_str(), "$2b$04$abcdefghijklmnopqrstuu", data.get(), sizeof(crypt_data));
  EXPECT_NE(out, nullptr);
  return out == nullptr ? std::string() : std::string(out);
}

std::string basic(const std::string& user_password) {
  return "Basic " + absl::Base64Escape(user_password);
}

TEST(BcryptHash, WhatLibcryptWritesIsTaken) {
  const std::string hash = bcrypt("secret");
  ASSERT_EQ(hash.size(), 60u);
  EXPECT_EQ(http::bcrypt_hash_problem(hash), std::nullopt);
  // htpasswd's and Python bcrypt's prefixes.
  EXPECT_EQ(http::bcrypt_hash_problem("$2y$" + hash.substr(4)), std::nullopt);
  EXPECT_EQ(http::bcrypt_hash_problem("$2a$" + hash.substr(4)), std::nullopt);
}

TEST(BcryptHash, AnythingElseIsRefusedWithItsReason) {
  const std::string hash = bcrypt("secret");
  EXPECT_THAT(http::bcrypt_hash_problem("secret"), testing::Optional(testing::HasSubstr("60")));
  EXPECT_TRUE(http::bcrypt_hash_problem(hash.substr(0, 59)));
  EXPECT_TRUE(http::bcrypt_hash_problem("$1$" + hash.substr(3)));  // MD5-crypt
  EXPECT_TRUE(http::bcrypt_hash_problem(hash.substr(0, 20) + "#" + hash.substr(21)));
  EXPECT_THAT(http::bcrypt_hash_problem("$2b$03$" + hash.substr(7)),
              testing::Optional(testing::HasSubstr("04 to 31")));
  EXPECT_THAT(http::bcrypt_hash_problem("$2b$32$" + hash.substr(7)),
              testing::Optional(testing::HasSubstr("04 to 31")));
}

TEST(BasicAuthUserName, ColonsAndControlCharactersAreRefused) {
  EXPECT_EQ(http::user_name_problem("prometheus"), std::nullopt);
  EXPECT_TRUE(http::user_name_problem(""));
  EXPECT_TRUE(http::user_name_problem("a:b"));
  EXPECT_TRUE(http::user_name_problem("a\tb"));
}

TEST(BasicAuth, TheRightPasswordPassesAndNothingElse) {
  http::basic_auth auth({{"prometheus", bcrypt("s3cret:with colon")}, {"ops", bcrypt("other")}});
  EXPECT_TRUE(auth.allows(basic("prometheus:s3cret:with colon")));
  EXPECT_TRUE(auth.allows(basic("prometheus:s3cret:with colon")));       // remembered
  EXPECT_TRUE(auth.allows("basic " + absl::Base64Escape("ops:other")));  // any case
  EXPECT_FALSE(auth.allows(basic("prometheus:s3cret")));
  EXPECT_FALSE(auth.allows(basic("ops:s3cret:with colon")));  // another user's password
  EXPECT_FALSE(auth.allows(basic("nobody:other")));
  EXPECT_FALSE(auth.allows(basic("prometheus")));  // no colon
  EXPECT_FALSE(auth.allows(""));
  EXPECT_FALSE(auth.allows("Basic"));
  EXPECT_FALSE(auth.allows("Basic !!!not base64"));
  EXPECT_FALSE(auth.allows("Bearer " + absl::Base64Escape("ops:other")));
  EXPECT_FALSE(auth.allows("Basicx" + absl::Base64Escape("ops:other")));
}

TEST(BasicAuthConfig, UsersAreReadAndBadHashesNamedWithoutShowingThem) {
  const std::string hash = bcrypt("secret");
  const auto r =
      load(std::string(kMinimal) + "http:\n  basic_auth_users: { prometheus: \"" + hash + "\" }\n");
  ASSERT_TRUE(r.value) << testing::PrintToString(errors_of(r));
  EXPECT_EQ(r.value->http.basic_auth_users.at("prometheus"), hash);

  const auto bad = load(std::string(kMinimal) +
                        "http:\n"                // 8
                        "  basic_auth_users:\n"  // 9
                        "    ok: \"" +
                        hash +
                        "\"\n"                                // 10
                        "    plain: \"not-a-hash-secret\"\n"  // 11
                        "    \"a:b\": \"" +
                        hash + "\"\n");  // 12
  EXPECT_THAT(
      errors_of(bad),
      testing::ElementsAre(testing::StartsWith("test.yaml:11:12: http.basic_auth_users[\"plain\"]: "
                                               "not a bcrypt hash"),
                           testing::StartsWith("test.yaml:12:5: http.basic_auth_users[\"a:b\"]: a "
                                               "user name cannot hold a colon")));
  for (const std::string& e : errors_of(bad))
    EXPECT_THAT(e, testing::Not(testing::HasSubstr("not-a-hash-secret")));
}

struct served_with_users {
  metrics::registry registry;
  readiness ready{1000ms};
  http_config cfg{.listen = "127.0.0.1:0",
                  .host = "127.0.0.1",
                  .port = 0,
                  .basic_auth_users = {{"prometheus", bcrypt("secret")}},
                  .tls = {}};
  http_server server{cfg, registry, {}, ready};
  int port = server.start();

  httplib::Result get(const std::string& path, const std::string& user = {},
                      const std::string& password = {}) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5s);
    if (!user.empty()) client.set_basic_auth(user, password);
    return client.Get(path);
  }
};

TEST(BasicAuthServer, EveryEndpointButHealthzAsksForAUser) {
  served_with_users s;
  s.ready.set(true);
  for (const std::string path : {"/metrics", "/readyz", "/api/v1/pipelines", "/nowhere"}) {
    const auto none = s.get(path);
    ASSERT_TRUE(none) << path;
    EXPECT_EQ(none->status, 401) << path;
    EXPECT_EQ(none->get_header_value("WWW-Authenticate"), http::basic_auth::kChallenge);
    EXPECT_THAT(none->body, testing::HasSubstr("authentication required"));
    const auto wrong = s.get(path, "prometheus", "guess");
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401) << path;
  }
  const auto metrics = s.get("/metrics", "prometheus", "secret");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  const auto unknown = s.get("/nowhere", "prometheus", "secret");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  const auto health = s.get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace sketchd
