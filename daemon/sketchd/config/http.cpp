// The http section: the address the HTTP server listens on.
#include <arpa/inet.h>

#include <algorithm>
#include <string>
#include <utility>

#include "sketchd/config/sections.h"

namespace sketchd::config_detail {

http_config read_http(checker& c, const field& f) {
  http_config h;
  const mapping m(c, f, {"listen"});
  const auto listen = m.get("listen");
  if (!listen) return h;
  const auto value = c.text(*listen);
  if (!value || value->empty()) return h;  // empty after substitution: the default
  const auto bad = [&](std::string_view why) {
    c.error(*listen, fmt::format("{}, got \"{}\"", why, *value));
    return h;
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
  return h;
}

}  // namespace sketchd::config_detail
