#include "sketchd/config/yaml_positions.h"

#include <algorithm>
#include <string>
#include <utility>

namespace sketchd::config_detail {
namespace {

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

bool is_name_char(char ch) {
  return ch == '_' || (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') ||
         (ch >= 'a' && ch <= 'z');
}

}  // namespace

source_position position_of(const YAML::Mark& mark) {
  if (mark.is_null()) return {};
  return {mark.line + 1, mark.column + 1};
}

yaml_positions::yaml_positions(std::string_view text)
    : text_(text), bom_(text.starts_with(kByteOrderMark) ? kByteOrderMark.size() : 0) {}

void yaml_positions::set_node_starts(std::vector<int> starts) {
  node_starts_ = std::move(starts);
  std::sort(node_starts_.begin(), node_starts_.end());
}

std::size_t yaml_positions::offset_of(int pos) const {
  return std::min(text_.size(), bom_ + static_cast<std::size_t>(std::max(pos, 0)));
}

YAML::Mark yaml_positions::null_entry_mark(const YAML::Mark& next) {
  if (next.pos < 0) return next;
  if (const auto known = null_entry_marks_.find(next.pos); known != null_entry_marks_.end()) {
    return known->second;  // the same entry again, through an alias
  }
  YAML::Mark mark = next;
  const std::size_t at = offset_of(next.pos);
  const std::string_view rest = text_.substr(at);
  const auto explicit_null = [&rest](std::string_view word) {
    return rest.starts_with(word) &&
           (rest.size() == word.size() ||
            std::string_view(" \t\r\n,]}#").find(rest[word.size()]) != std::string_view::npos);
  };
  const bool explicit_entry =
      explicit_null("~") || explicit_null("null") || explicit_null("Null") || explicit_null("NULL");
  int line = next.line;
  std::size_t end = at;  // the current line is looked at up to here
  while (!explicit_entry) {
    const std::size_t newline = end == 0 ? std::string_view::npos : text_.rfind('\n', end - 1);
    const std::size_t line_start = newline == std::string_view::npos ? bom_ : newline + 1;
    std::string_view content = text_.substr(line_start, end - std::min(end, line_start));
    for (std::size_t i = 0; i < content.size(); ++i) {
      if (content[i] == '#' && (i == 0 || content[i - 1] == ' ' || content[i - 1] == '\t')) {
        content = content.substr(0, i);  // a comment
        break;
      }
    }
    const std::size_t last = content.find_last_not_of(" \t\r");
    if (last != std::string_view::npos) {
      if (content[last] == '-' &&
          (last == 0 || content[last - 1] == ' ' || content[last - 1] == '\t')) {
        mark.line = line;
        mark.column = static_cast<int>(last);
        mark.pos = static_cast<int>(line_start + last - bom_);
      }
      break;
    }
    if (newline == std::string_view::npos) break;
    end = newline;
    --line;
  }
  null_entry_marks_.emplace(next.pos, mark);
  return mark;
}

std::size_t yaml_positions::scalar_end(std::size_t start, std::size_t limit) const {
  if (start >= limit || (text_[start] != '"' && text_[start] != '\'')) return limit;
  // The closing quote: a '"' after an even number of backslashes, a '\'' not doubled.
  const char quote = text_[start];
  for (std::size_t i = start + 1; i < limit; ++i) {
    if (quote == '"' && text_[i] == '\\') {
      ++i;
    } else if (text_[i] == quote) {
      if (quote == '\'' && i + 1 < limit && text_[i + 1] == '\'') {
        ++i;
        continue;
      }
      return i + 1;
    }
  }
  return limit;
}

YAML::Mark yaml_positions::mark_in_scalar(const YAML::Mark& scalar, std::string_view value,
                                          std::size_t offset) const {
  if (scalar.is_null() || scalar.pos < 0 || offset + 1 >= value.size() ||
      value.substr(offset, 2) != "${") {
    return scalar;
  }
  const std::size_t start = offset_of(scalar.pos);
  const auto next = std::upper_bound(node_starts_.begin(), node_starts_.end(), scalar.pos);
  const std::size_t limit = next == node_starts_.end() ? text_.size() : offset_of(*next);
  const std::string_view extent = text_.substr(0, scalar_end(start, std::max(start, limit)));

  std::size_t before = 0;  // "${" of the value before offset
  for (std::size_t p = value.find("${"); p < offset; p = value.find("${", p + 2)) ++before;
  std::size_t at = extent.find("${", start);
  for (; before > 0 && at != std::string_view::npos; --before) at = extent.find("${", at + 2);
  if (at == std::string_view::npos) return scalar;

  std::size_t token = offset + 2;
  while (token < value.size() && is_name_char(value[token])) ++token;
  if (extent.substr(at, token - offset) != value.substr(offset, token - offset)) return scalar;

  YAML::Mark mark = scalar;
  const std::size_t line_start = text_.rfind('\n', at);
  for (std::size_t p = start; (p = text_.find('\n', p)) < at; ++p) ++mark.line;
  mark.column =
      static_cast<int>(line_start == std::string_view::npos ? at - bom_ : at - line_start - 1);
  mark.pos = scalar.pos + static_cast<int>(at - start);
  return mark;
}

char yaml_positions::byte_at(const YAML::Mark& mark) const {
  std::string_view text = text_.substr(bom_);
  for (int line = 0; line < mark.line; ++line) {
    const std::size_t end = text.find('\n');
    if (end == std::string_view::npos) return 0;
    text.remove_prefix(end + 1);
  }
  const auto column = static_cast<std::size_t>(std::max(mark.column, 0));
  return column < text.size() ? text[column] : '\0';
}

std::optional<std::size_t> yaml_positions::first_tab_indented_line() const {
  std::size_t line = 1;
  for (std::size_t at = 0; at < text_.size(); ++line) {
    const std::size_t indent_end = text_.find_first_not_of(' ', at);
    if (indent_end < text_.size() && text_[indent_end] == '\t') return line;
    const std::size_t eol = text_.find('\n', at);
    if (eol == std::string_view::npos) break;
    at = eol + 1;
  }
  return std::nullopt;
}

}  // namespace sketchd::config_detail
