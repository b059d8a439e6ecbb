#include "sketchd/util/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <utility>

#include "sketch/text.h"
#include "sketchd/util/json.h"
#include "sketchd/util/utf8.h"

namespace sketchd {

namespace {

// The members of the innermost log_fields alive on this thread. spdlog's loggers here are
// synchronous: a line is formatted on the thread that logs it.
thread_local std::string t_fields;

// %& : ",members" of the log_fields in force, or nothing.
class json_fields_flag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    if (t_fields.empty()) return;
    dest.push_back(',');
    dest.append(t_fields.data(), t_fields.data() + t_fields.size());
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_fields_flag>();
  }
};

// %* : the message as a JSON string literal.
class json_message_flag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string quoted =
        json::dump(nlohmann::json(std::string(msg.payload.data(), msg.payload.size())));
    dest.append(quoted.data(), quoted.data() + quoted.size());
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_message_flag>();
  }
};

spdlog::level::level_enum to_spdlog(log_level l) {
  switch (l) {
    case log_level::trace:
      return spdlog::level::trace;
    case log_level::debug:
      return spdlog::level::debug;
    case log_level::info:
      return spdlog::level::info;
    case log_level::warn:
      return spdlog::level::warn;
    case log_level::error:
      return spdlog::level::err;
    case log_level::critical:
      return spdlog::level::critical;
    case log_level::off:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void setup_logging(const log_config& config) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  if (config.format == log_format::json) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<json_message_flag>('*').add_flag<json_fields_flag>('&').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","logger":"%n","message":%*%&})");
    sink->set_formatter(std::move(formatter));
  } else {
    // UTC with its zone, as in the JSON lines: a local time without one is ambiguous once
    // the lines leave the machine (and for an hour every autumn on it).
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "%Y-%m-%dT%H:%M:%S.%eZ %^%-5l%$ [%n] %v", spdlog::pattern_time_type::utc));
  }
  spdlog::drop_all();
  auto make = [&](const std::string& name) {
    auto logger = std::make_shared<spdlog::logger>(name, sink);
    logger->set_level(to_spdlog(config.level));
    // An error inside logging never reaches the caller. Set before the logger is
    // registered: other threads find it through the registry's lock, after every write.
    logger->set_error_handler([](const std::string&) {});
    return logger;
  };
  spdlog::set_default_logger(make("sketchd"));
  for (const char* name : {"kafka", "pipeline", "http", "state", "generator"})
    spdlog::register_logger(make(name));
}

std::string loggable_item(std::string_view item) {
  constexpr std::size_t kMaxBytes = 64;
  const std::string shown = utf8::clean(item, kMaxBytes);
  // Cut when the whole item, cleaned, is longer (cleaning alone can change the length: an
  // invalid byte becomes a 3-byte U+FFFD).
  const bool cut = utf8::clean(item).size() > shown.size();
  std::string out = "\"";
  for (const char c : sketch::escape_controls(shown, true)) {
    if (c == '"') out += '\\';
    out += c;
  }
  out += cut ? "\"…" : "\"";
  return out;
}

log_fields::log_fields(std::string members) noexcept
    : previous_(std::exchange(t_fields, std::move(members))) {}

log_fields::~log_fields() { t_fields = std::move(previous_); }

std::shared_ptr<spdlog::logger> module_logger(const std::string& module) {
  auto l = spdlog::get(module);
  return l ? l : spdlog::default_logger();
}

void print_stderr(std::string_view text) noexcept {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace sketchd
