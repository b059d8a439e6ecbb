// The http section: the address the HTTP server listens on, the users of its basic
// authentication, and its TLS files.
#include <arpa/inet.h>

#include <algorithm>
#include <string>
#include <utility>

#include "sketchd/config/sections.h"
#include "sketchd/http/basic_auth.h"
#include "sketchd/http/tls.h"

namespace sketchd::config_detail {
namespace {

// Far above what a metrics endpoint needs; each connection holds a file descriptor.
constexpr std::uint64_t kMaxConnections = 1'000'000;

// http.listen (`f`) into `h`.
void read_listen(checker& c, const field& f, http_config& h) {
  const auto value = c.text(f);
  if (!value || value->empty()) return;  // empty after substitution: the default
  const auto bad = [&](std::string_view why) {
    c.error(f, fmt::format("{}, got \"{}\"", why, *value));
  };
  if (value->find("://") != std::string::npos) {
    return bad("expected HOST:PORT such as 127.0.0.1:9464, not a URL");
  }
  const std::size_t colon = value->rfind(':');
  if (colon == std::string::npos) {
    return bad("expected HOST:PORT such as 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464");
  }
  std::string host = value->substr(0, colon);
  const std::string port = value->substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find_first_of(":[]") != std::string::npos) {
    return bad("an IPv6 address needs brackets, as in [::1]:9464");
  }
  if (host.empty()) return bad("needs a host (0.0.0.0 listens on every interface)");
  // A host of digits and dots is meant as an IPv4 address, one in brackets as an IPv6
  // address: either must be one. Other hosts are names, resolved when the daemon starts.
  const bool dotted = std::all_of(host.begin(), host.end(),
                                  [](char ch) { return ch == '.' || (ch >= '0' && ch <= '9'); });
  const bool bracketed = value->front() == '[';
  in6_addr address{};
  if ((dotted || bracketed) &&
      ::inet_pton(bracketed ? AF_INET6 : AF_INET, host.c_str(), &address) != 1) {
    return bad(bracketed ? "not an IPv6 address" : "not an IPv4 address");
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
      std::stoul(port) > 65535) {
    return bad("the port must be a number in [0, 65535] (0: any free port)");
  }
  h.listen = *value;
  h.host = std::move(host);
  h.port = static_cast<std::uint16_t>(std::stoul(port));
}

// http.basic_auth_users (`f`) into `h`: each user's bcrypt hash, checked; the hashes never
// shown in a message.
void read_users(checker& c, const field& f, http_config& h) {
  const mapping users(c, f, {}, /*any_key=*/true);
  for (auto [name, value] : users.entries()) {
    if (const auto problem = http::user_name_problem(name)) {
      c.error(value.key_mark, fmt::format("{}: {}", value.path, *problem));
      continue;
    }
    value.secret = true;
    const auto hash = c.nonempty_text(value);
    if (!hash) continue;
    if (const auto problem = http::bcrypt_hash_problem(*hash)) {
      c.error(value, *problem);
      continue;
    }
    h.basic_auth_users.emplace(name, *hash);
  }
}

// http.tls (`f`) into `h`: the files' paths, and the files read and checked, so that a
// certificate or key that would not do is refused at its key, by check-config as by run.
void read_tls(checker& c, const field& f, http_config& h) {
  const mapping m(c, f, {"cert_file", "key_file", "client_ca_file"});
  if (!m.valid()) return;
  tls_config t;
  const auto cert = m.require("cert_file");
  const auto key = m.require("key_file");
  const auto ca = m.get("client_ca_file");
  bool ok = true;
  const auto path = [&](const std::optional<field>& at, std::string& out) {
    if (!at) return;
    if (const auto value = c.nonempty_text(*at)) {
      out = *value;
    } else {
      ok = false;
    }
  };
  path(cert, t.cert_file);
  path(key, t.key_file);
  if (ca && !c.empty_after_substitution(*ca)) path(ca, t.client_ca_file);
  if (!ok || !cert || !key) return;
  if (const auto problem = http::tls_files_problem(t)) {
    const field& at = problem->file == http::tls_file::cert  ? *cert
                      : problem->file == http::tls_file::key ? *key
                                                             : *ca;
    c.error(at, problem->message);
    return;
  }
  h.tls = std::move(t);
}

}  // namespace

http_config read_http(checker& c, const field& f) {
  http_config h;
  const mapping m(c, f, {"listen", "basic_auth_users", "tls", "max_connections"});
  if (const auto listen = m.get("listen")) read_listen(c, *listen, h);
  if (const auto users = m.get("basic_auth_users")) read_users(c, *users, h);
  if (const auto tls = m.get("tls")) read_tls(c, *tls, h);
  m.read("max_connections", h.max_connections,
         [&](const field& v) { return c.count(v, 1, kMaxConnections); });
  return h;
}

}  // namespace sketchd::config_detail
