#include "sketchd/http/api.h"

#include <absl/strings/escaping.h>
#include <fmt/format.h>
#include <httplib.h>

#include <utility>

#include "sketchd/util/json.h"
#include "sketchd/util/utf8.h"

namespace sketchd::http {

namespace {

using nlohmann::ordered_json;

using json::number;

// `"item":…` of an answer. JSON strings hold text, so an item that is not valid UTF-8 is
// shown with U+FFFD for its invalid bytes (json::dump), and its exact bytes follow in
// base64 (`"item_base64"`): two binary items that show alike stay apart, and a script can
// send the bytes back to `estimate` or `seen`.
void add_item(ordered_json& o, const std::string& item) {
  o["item"] = item;
  if (!utf8::valid(item)) o["item_base64"] = absl::Base64Escape(item);
}

ordered_json to_json(const heavy_hitters_status& h) {
  ordered_json o;
  o["window_ms"] = h.window_ms;
  o["buckets"] = h.buckets;
  o["epsilon"] = number(h.epsilon);
  o["delta"] = number(h.delta);
  o["top_k"] = h.top_k;
  o["threshold"] = number(h.threshold);
  o["window_items"] = h.window_items;
  o["error_bound"] = number(h.error_bound);
  return o;
}

ordered_json to_json(const dedup_status& d) {
  ordered_json o;
  o["window_ms"] = d.window_ms;
  o["capacity"] = d.capacity;
  o["generations"] = d.generations;
  o["first_seen_total"] = d.first_seen_total;
  o["duplicates_total"] = d.duplicates_total;
  o["target_fpr"] = number(d.target_fpr);
  o["estimated_fpr"] = number(d.estimated_fpr);
  o["estimated_items"] = number(d.estimated_items);
  ordered_json fill = ordered_json::array();
  for (const double f : d.fill_ratio) fill.push_back(number(f));
  o["fill_ratio"] = std::move(fill);
  o["forwarded_total"] = d.forwarded_total;
  o["guaranteed_horizon_ms"] = d.guaranteed_horizon_ms;
  o["effective_window_ms"] = d.effective_window_ms;
  return o;
}

std::string body_of(const ordered_json& answer) { return json::dump(answer) + "\n"; }

// Percent-decoding as URLs have it (RFC 3986): %HH is the byte HH, and with plus_is_space
// (a query, as forms write it) '+' is a space; a '%' without two hex digits after it stays
// as it is. httplib's decoder also reads "%uXXXX", which is no part of a URL: "%u0070k"
// must name the pipeline "%u0070k", not "pk".
std::string percent_decode(std::string_view s, bool plus_is_space) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += plus_is_space && s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

// The query parameter NAME of the request: its value percent-decoded ('+' is a space, as
// in forms), everything after the parameter's first '=' (httplib's own parsing keeps only
// what follows the last one: "item=dXNlcg==" would ask for "dXNlcg"). An error message
// when the parameter is missing, empty or repeated.
struct query_param {
  std::string value;
  std::string error;
};
query_param find_query_param(const httplib::Request& req, std::string_view name) {
  query_param result;
  const std::string_view target = req.target;
  const std::size_t question = target.find('?');
  std::string_view query =
      question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
  if (const std::size_t hash = query.find('#'); hash != std::string_view::npos)
    query = query.substr(0, hash);
  int found = 0;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    const std::string key = percent_decode(pair.substr(0, eq), true);
    if (key != name) continue;
    if (++found > 1) {
      result.error = fmt::format("the query parameter \"{}\" is given more than once", name);
      return result;
    }
    if (eq != std::string_view::npos) {
      result.value = percent_decode(pair.substr(eq + 1), true);
    }
  }
  if (found == 0) {
    result.error = fmt::format("the query parameter \"{}\" is required", name);
  } else if (result.value.empty()) {
    result.error =
        fmt::format("the query parameter \"{}\" is empty (an empty item is never counted)", name);
  }
  return result;
}

// The pipeline the request's path names, or nullptr after answering 404. The name is the
// path's fourth segment as sent, percent-decoded here: the route matched the path httplib
// decoded, where an encoded '/' ("a%2Ftopk") has become a separator.
const pipeline* find_pipeline(const std::vector<const pipeline*>& pipelines,
                              const httplib::Request& req, httplib::Response& res) {
  std::string_view path = req.target;
  path = path.substr(0, path.find_first_of("?#"));
  for (int skip = 0; skip < 4; ++skip) {  // "", "api", "v1", "pipelines"
    const std::size_t slash = path.find('/');
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  }
  const std::string name = percent_decode(path.substr(0, path.find('/')), false);
  for (const auto* p : pipelines) {
    if (p->name() == name) return p;
  }
  json_error(res, 404, fmt::format("no pipeline named \"{}\"", name));
  return nullptr;
}

// GET /api/v1/pipelines/NAME/estimate?item=ITEM and …/seen?item=ITEM.
void answer_item_query(const pipeline& p, const httplib::Request& req, httplib::Response& res) {
  const bool estimate = req.matches[2] == "estimate";
  // The path first (404), then the query (400).
  if (estimate ? !p.config().heavy_hitters : !p.config().dedup) {
    return json_error(res, 404,
                      fmt::format("pipeline \"{}\" has no {} section", p.name(),
                                  estimate ? "heavy_hitters" : "dedup"));
  }
  const query_param param = find_query_param(req, "item");
  if (!param.error.empty()) return json_error(res, 400, param.error);
  const std::string& item = param.value;
  const auto body = estimate ? estimate_json(p, item) : seen_json(p, item);
  if (!body) return json_error(res, 500, "the pipeline lost its section");
  res.set_content(*body + "\n", kJson);
}

}  // namespace

ordered_json to_json(const pipeline_status& s) {
  ordered_json o;
  o["name"] = s.name;
  o["topics"] = s.topics;
  ordered_json item;
  item["from"] = std::string(to_string(s.item.from));
  if (s.item.from == item_source::json) {
    item["path"] = s.item.path;
  } else if (s.item.from == item_source::header) {
    item["name"] = s.item.header;
  }
  o["item"] = std::move(item);
  o["clock"] = std::string(to_string(s.clock));
  o["scope"] = std::string(to_string(s.scope));
  o["shards"] = s.shards;
  o["items_total"] = s.items_total;
  if (s.heavy_hitters) o["heavy_hitters"] = to_json(*s.heavy_hitters);
  if (s.dedup) o["dedup"] = to_json(*s.dedup);
  return o;
}

ordered_json to_json(const topk_status& s) {
  ordered_json o;
  o["pipeline"] = s.pipeline;
  o["window_items"] = s.window_items;
  o["threshold"] = number(s.threshold);
  o["error_bound"] = number(s.error_bound);
  ordered_json items = ordered_json::array();
  for (const auto& e : s.items) {
    ordered_json entry;
    add_item(entry, e.item);
    entry["estimate"] = e.estimate;
    entry["ratio"] = number(e.ratio);
    entry["heavy"] = e.heavy;
    items.push_back(std::move(entry));
  }
  o["items"] = std::move(items);
  return o;
}

ordered_json to_json(const estimate_status& s) {
  ordered_json o;
  add_item(o, s.item);
  o["estimate"] = s.estimate;
  o["error_bound"] = number(s.error_bound);
  o["window_items"] = s.window_items;
  return o;
}

ordered_json to_json(const seen_status& s) {
  ordered_json o;
  add_item(o, s.item);
  o["seen"] = s.seen;
  o["estimated_fpr"] = number(s.estimated_fpr);  // as GET /api/v1/pipelines/NAME spells it
  // The spelling of the first release, kept as an alias for one release (docs/OPERATIONS.md).
  o["false_positive_ratio"] = number(s.estimated_fpr);
  return o;
}

std::string describe_json(const pipeline& p) { return json::dump(to_json(p.status())); }

std::optional<std::string> topk_json(const pipeline& p) {
  const auto s = p.topk();
  if (!s) return std::nullopt;
  return json::dump(to_json(*s));
}

std::optional<std::string> estimate_json(const pipeline& p, std::string_view item) {
  const auto s = p.estimate(item);
  if (!s) return std::nullopt;
  return json::dump(to_json(*s));
}

std::optional<std::string> seen_json(const pipeline& p, std::string_view item) {
  const auto s = p.seen(item);
  if (!s) return std::nullopt;
  return json::dump(to_json(*s));
}

std::string error_body(std::string_view message) {
  ordered_json o;
  o["error"] = std::string(message);
  return body_of(o);
}

void json_error(httplib::Response& res, int status, std::string_view message) {
  res.status = status;
  res.set_content(error_body(message), kJson);
}

void add_api_routes(httplib::Server& server, std::vector<const pipeline*> pipelines) {
  server.Get("/api/v1/pipelines", [pipelines](const httplib::Request&, httplib::Response& res) {
    ordered_json all = ordered_json::array();
    for (const pipeline* p : pipelines) all.push_back(to_json(p->status()));
    ordered_json o;
    o["pipelines"] = std::move(all);
    res.set_content(body_of(o), kJson);
  });
  server.Get(R"(/api/v1/pipelines/([^/]+))",
             [pipelines](const httplib::Request& req, httplib::Response& res) {
               const pipeline* p = find_pipeline(pipelines, req, res);
               if (!p) return;
               res.set_content(describe_json(*p) + "\n", kJson);
             });
  server.Get(R"(/api/v1/pipelines/([^/]+)/topk)", [pipelines](const httplib::Request& req,
                                                              httplib::Response& res) {
    const pipeline* p = find_pipeline(pipelines, req, res);
    if (!p) return;
    const auto body = topk_json(*p);
    if (!body) {
      return json_error(res, 404,
                        fmt::format("pipeline \"{}\" has no heavy_hitters section", p->name()));
    }
    res.set_content(*body + "\n", kJson);
  });
  server.Get(R"(/api/v1/pipelines/([^/]+)/(estimate|seen))",
             [pipelines](const httplib::Request& req, httplib::Response& res) {
               const pipeline* p = find_pipeline(pipelines, req, res);
               if (p) answer_item_query(*p, req, res);
             });
}

}  // namespace sketchd::http
