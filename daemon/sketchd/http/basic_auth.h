// HTTP basic authentication (RFC 7617) with bcrypt-hashed passwords, as Prometheus' web
// configuration (exporter-toolkit's `basic_auth_users`) has it: a user name and the bcrypt
// hash of its password ($2a$, $2b$ or $2y$, as `htpasswd -nB` writes them). The hashes are
// checked by libcrypt (Debian's libxcrypt), never by code of sketchd's own.
//
// bcrypt is slow on purpose (about 0.25 s at cost 12): a user's successful password is
// remembered, as a 128-bit hash keyed with a secret drawn at the start (never the password
// itself), so that a scrape every few seconds costs one bcrypt, not one per request. A name
// that is not a user's is checked against a hash all the same, so that the time of a
// refusal does not tell which names are users.
//
// Thread-safe: the HTTP workers call allows() at once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace sketchd::http {

// Why `hash` is not a bcrypt hash libcrypt can check, or nullopt.
[[nodiscard]] std::optional<std::string> bcrypt_hash_problem(std::string_view hash);
// Why `name` cannot be a basic-auth user name (empty, a colon, a control character), or
// nullopt.
[[nodiscard]] std::optional<std::string> user_name_problem(std::string_view name);

class basic_auth {
 public:
  // `users`: name → bcrypt hash, each checked by the configuration (bcrypt_hash_problem()).
  explicit basic_auth(std::map<std::string, std::string> users);

  // Whether an `Authorization` header's value names a user with its password.
  [[nodiscard]] bool allows(std::string_view authorization);

  // The header that asks a client for credentials, with a 401.
  static constexpr std::string_view kChallenge = R"(Basic realm="sketchd", charset="UTF-8")";

 private:
  using key = std::pair<std::uint64_t, std::uint64_t>;
  [[nodiscard]] key key_of(std::string_view user, std::string_view password) const;

  std::map<std::string, std::string> users_;
  std::string dummy_hash_;  // checked for a name that is not a user's
  std::uint64_t seed_ = 0;  // of the remembered passwords' hashes
  std::mutex mutex_;
  std::set<key> remembered_;  // successful (user, password) pairs
  static constexpr std::size_t kRememberedLimit = 1024;
};

}  // namespace sketchd::http
