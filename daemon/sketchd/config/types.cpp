#include "sketchd/config/types.h"

namespace sketchd {

std::string_view to_string(item_source v) noexcept {
  switch (v) {
    case item_source::key:
      return "key";
    case item_source::value:
      return "value";
    case item_source::json:
      return "json";
    case item_source::header:
      return "header";
  }
  return "?";
}

std::string_view to_string(clock_kind v) noexcept {
  return v == clock_kind::event ? "event" : "wall";
}

std::string_view to_string(state_scope v) noexcept {
  return v == state_scope::instance ? "instance" : "partition";
}

std::string_view to_string(state_compression v) noexcept {
  return v == state_compression::automatic ? "auto" : "none";
}

std::string_view to_string(dedup_sizing v) noexcept {
  return v == dedup_sizing::memory ? "memory" : "transmission";
}

std::string_view to_string(generator_format v) noexcept {
  return v == generator_format::json ? "json" : "text";
}

std::string_view to_string(log_level v) noexcept {
  switch (v) {
    case log_level::trace:
      return "trace";
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warn";
    case log_level::error:
      return "error";
    case log_level::critical:
      return "critical";
    case log_level::off:
      return "off";
  }
  return "?";
}

std::string_view to_string(log_format v) noexcept {
  return v == log_format::text ? "text" : "json";
}

}  // namespace sketchd
