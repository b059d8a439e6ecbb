// The read-only JSON API under /api/v1 (DESIGN.md, "HTTP API"): the pipelines' status
// structs rendered as JSON (the members in the order listed in pipeline/status.h), and
// the routes that serve them. Every JSON body is one line of JSON and a newline.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/pipeline/pipeline.h"
#include "sketchd/pipeline/status.h"

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace sketchd::http {

// The JSON of each answer. An item that is not valid UTF-8 is shown with U+FFFD for its
// invalid bytes, and its exact bytes follow in base64 ("item_base64").
[[nodiscard]] nlohmann::ordered_json to_json(const pipeline_status& s);
[[nodiscard]] nlohmann::ordered_json to_json(const topk_status& s);
[[nodiscard]] nlohmann::ordered_json to_json(const estimate_status& s);
[[nodiscard]] nlohmann::ordered_json to_json(const seen_status& s);

// A pipeline's answers as text (json::dump, without the body's newline): GET
// /api/v1/pipelines/NAME, …/topk, …/estimate?item=ITEM and …/seen?item=ITEM. nullopt when
// the pipeline has no heavy_hitters (topk, estimate) or dedup (seen) section. Each takes
// the pipeline's lock once.
[[nodiscard]] std::string describe_json(const pipeline& p);
[[nodiscard]] std::optional<std::string> topk_json(const pipeline& p);
[[nodiscard]] std::optional<std::string> estimate_json(const pipeline& p, std::string_view item);
[[nodiscard]] std::optional<std::string> seen_json(const pipeline& p, std::string_view item);

// The content type of every JSON answer.
inline constexpr const char* kJson = "application/json";

// The body of an error answer: {"error":MESSAGE} and a newline.
[[nodiscard]] std::string error_body(std::string_view message);
// Answers `res` with `status` and error_body(message).
void json_error(httplib::Response& res, int status, std::string_view message);

// Adds the routes of /api/v1/pipelines, /api/v1/pipelines/NAME and …/NAME/{topk,estimate,
// seen} to `server`. The pipelines must outlive the server; the handlers only read them
// (each under its lock) and may run on any number of threads at once.
void add_api_routes(httplib::Server& server, std::vector<const pipeline*> pipelines);

}  // namespace sketchd::http
