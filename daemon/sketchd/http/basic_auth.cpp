#include "sketchd/http/basic_auth.h"

#include <absl/strings/escaping.h>
#include <crypt.h>
#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <memory>
#include <random>

namespace sketchd::http {

namespace {

bool is_bcrypt_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '/';
}

// Whether `password` hashes to `hash` under libcrypt; false when libcrypt cannot tell.
bool matches(const std::string& password, const std::string& hash) {
  const auto data = std::make_unique<crypt_data>();  // about 32 KiB: not on the stack
  const char* out = crypt_rn(password.c_str(), hash.c_str(), data.get(), sizeof(crypt_data));
  if (out == nullptr) return false;
  const std::string_view computed(out);
  if (computed.size() != hash.size()) return false;
  unsigned char differ = 0;  // the whole length compared, whatever differs first
  for (std::size_t i = 0; i < hash.size(); ++i)
    differ |= static_cast<unsigned char>(computed[i] ^ hash[i]);
  return differ == 0;
}

}  // namespace

std::optional<std::string> bcrypt_hash_problem(std::string_view hash) {
  // $2b$12$ then 22 characters of salt and 31 of hash, in bcrypt's base-64 alphabet.
  const bool prefix = hash.size() == 60 && hash[0] == '$' && hash[1] == '2' &&
                      (hash[2] == 'a' || hash[2] == 'b' || hash[2] == 'y') && hash[3] == '$' &&
                      hash[6] == '$';
  if (!prefix || !std::all_of(hash.begin() + 7, hash.end(), is_bcrypt_char)) {
    return "not a bcrypt hash: expected 60 characters such as $2b$12$ followed by 53 of "
           "[./A-Za-z0-9], as `htpasswd -nBC 12 USER` writes them";
  }
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9' || cost < 4 || cost > 31) {
    return fmt::format("not a bcrypt hash: its cost, \"{}\", must be 04 to 31", hash.substr(4, 2));
  }
  if (crypt_checksalt(std::string(hash).c_str()) != CRYPT_SALT_OK) {
    return "a bcrypt hash this system's libcrypt does not check";
  }
  return std::nullopt;
}

std::optional<std::string> user_name_problem(std::string_view name) {
  if (name.empty()) return "a user name cannot be empty";
  if (name.find(':') != std::string_view::npos)
    return "a user name cannot hold a colon (basic authentication sends USER:PASSWORD)";
  if (std::any_of(name.begin(), name.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return "a user name cannot hold a control character";
  }
  return std::nullopt;
}

basic_auth::basic_auth(std::map<std::string, std::string> users) : users_(std::move(users)) {
  std::random_device random;
  seed_ = (static_cast<std::uint64_t>(random()) << 32) ^ random();
  // A hash of the users' own cost, so that a name that is not a user's costs as much.
  const std::string cost = users_.empty() ? "10" : users_.begin()->second.substr(4, 2);
  dummy_hash_ = "$2b$" + cost + "$" + std::string(53, '.');
  const auto data = std::make_unique<crypt_data>();
  if (const char* h = crypt_rn("sketchd", dummy_hash_.c_str(), data.get(), sizeof(crypt_data)))
    dummy_hash_ = h;
}

basic_auth::key basic_auth::key_of(std::string_view user, std::string_view password) const {
  std::string both;
  both.reserve(user.size() + 1 + password.size());
  both.append(user).push_back('\0');
  both.append(password);
  const XXH128_hash_t h = XXH3_128bits_withSeed(both.data(), both.size(), seed_);
  return {h.high64, h.low64};
}

bool basic_auth::allows(std::string_view authorization) {
  // "Basic" (any case), spaces, then base64 of USER:PASSWORD.
  constexpr std::string_view kScheme = "basic";
  if (authorization.size() <= kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), authorization.begin(),
                  [](char a, char b) { return a == (b | 0x20); })) {
    return false;
  }
  std::string_view encoded = authorization.substr(kScheme.size());
  if (encoded.front() != ' ') return false;
  encoded.remove_prefix(std::min(encoded.find_first_not_of(' '), encoded.size()));
  std::string decoded;
  if (!absl::Base64Unescape(absl::string_view(encoded.data(), encoded.size()), &decoded))
    return false;
  const std::size_t colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  const std::string user = decoded.substr(0, colon);
  const std::string password = decoded.substr(colon + 1);
  const key k = key_of(user, password);
  {
    const std::lock_guard lock(mutex_);
    if (remembered_.contains(k)) return true;
  }
  const auto it = users_.find(user);
  if (it == users_.end()) {
    (void)matches(password, dummy_hash_);
    return false;
  }
  if (!matches(password, it->second)) return false;
  const std::lock_guard lock(mutex_);
  if (remembered_.size() >= kRememberedLimit) remembered_.clear();
  remembered_.insert(k);
  return true;
}

}  // namespace sketchd::http
