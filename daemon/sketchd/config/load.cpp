// The configuration loader: reads the one YAML document, then each section with its reader
// (sections.h), then the checks that span sections, and collects every problem with its
// position instead of stopping at the first.
#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "sketch/text.h"
#include "sketchd/config/checker.h"
#include "sketchd/config/config.h"
#include "sketchd/config/document.h"
#include "sketchd/config/sections.h"

namespace sketchd {
namespace {

using config_detail::checker;
using config_detail::field;
using config_detail::mapping;

config read_config(checker& c, const YAML::Node& root) {
  config cfg;
  const field self{root, YAML::Mark(), ""};
  if (!root.IsMap()) {
    c.error(self, fmt::format("expected a mapping of sections (kafka, pipelines, …), got {}",
                              config_detail::kind_of(root)));
    return cfg;
  }
  const mapping m(c, self, {"kafka", "http", "state", "pipelines", "generator", "log"});
  config_detail::property_positions kafka_properties;
  if (const field* k = m.find("kafka")) {
    cfg.kafka = config_detail::read_kafka(c, *k, kafka_properties);
  } else {
    c.error(m.mark(), "missing required key \"kafka\"");
  }
  if (const field* h = m.find("http")) cfg.http = config_detail::read_http(c, *h);
  const field* state = m.find("state");
  if (state != nullptr) cfg.state = config_detail::read_state(c, *state);
  std::optional<std::vector<field>> elements;
  if (const auto p = m.require("pipelines")) {
    if ((elements = c.list(*p))) {
      if (elements->empty()) c.error(*p, "needs at least one pipeline");
      cfg.pipelines = config_detail::read_pipelines(c, *elements, cfg.state.topic.has_value());
    }
  }
  const field* g = m.find("generator");
  if (g != nullptr) cfg.generator = config_detail::read_generator(c, *g);
  if (elements) config_detail::check_output_kinds(c, *elements, cfg.pipelines, g, cfg.generator);
  if (cfg.state.topic) config_detail::check_state_topic(c, *state, cfg.pipelines, cfg.generator);
  if (const field* l = m.find("log")) cfg.log = config_detail::read_log(c, *l);
  const bool produces =
      std::any_of(cfg.pipelines.begin(), cfg.pipelines.end(), [](const pipeline_config& p) {
        return (p.dedup && (p.dedup->output_topic || p.dedup->duplicates_topic)) ||
               (p.heavy_hitters && p.heavy_hitters->alerts_topic);
      });
  config_detail::check_kafka_properties(c, kafka_properties, cfg.kafka, produces);
  return cfg;
}

}  // namespace

std::string config_error::to_string() const {
  const std::string text = line <= 0 ? fmt::format("{}: {}", file, message)
                                     : fmt::format("{}:{}:{}: {}", file, line, column, message);
  // One line whatever the values quoted in it hold: control characters escaped (a newline
  // would start a line without a location; an escape sequence would reach the terminal),
  // trailing white space dropped (librdkafka's reasons end in a newline).
  return sketch::escape_controls(
      std::string_view(text).substr(0, text.find_last_not_of(" \t\r\n") + 1));
}

load_result load_config_string(std::string_view yaml, const std::string& file_name,
                               const getenv_function& getenv) {
  load_result result;
  checker c(file_name, yaml, getenv);
  if (const auto root = config_detail::read_document(yaml, c)) {
    config cfg = read_config(c, *root);
    if (c.ok()) result.value = std::move(cfg);
  }
  result.errors = c.take_errors();
  return result;
}

load_result load_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return load_result{std::nullopt, {config_error{path, 0, 0, "is a directory, not a file"}}};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::string reason = std::error_code(errno, std::generic_category()).message();
    return load_result{std::nullopt,
                       {config_error{path, 0, 0, fmt::format("cannot read the file: {}", reason)}}};
  }
  // Bounded: a device or a runaway file (/dev/zero) is an error, not all of memory.
  constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
  std::string text;
  std::array<char, 65536> chunk{};
  while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxBytes) {
      return load_result{
          std::nullopt,
          {config_error{path, 0, 0, "is larger than 16 MiB: not a configuration file"}}};
    }
  }
  if (in.bad()) {
    const std::string reason = std::error_code(errno, std::generic_category()).message();
    return load_result{std::nullopt,
                       {config_error{path, 0, 0, fmt::format("cannot read the file: {}", reason)}}};
  }
  return load_config_string(text, path, process_getenv);
}

}  // namespace sketchd
