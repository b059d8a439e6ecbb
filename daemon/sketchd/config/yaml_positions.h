// Positions in the text of a YAML file that yaml-cpp's marks do not give: the `-` of a
// list entry without a value, the `${` inside a scalar that an error is about, the byte at
// a mark, and the first line indented with a tab. Internal to the configuration loader.
#pragma once

#include <yaml-cpp/mark.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "sketchd/config/types.h"

namespace sketchd::config_detail {

// A mark's 1-based line and column (0, 0 for a null mark).
[[nodiscard]] source_position position_of(const YAML::Mark& mark);

// The text of one YAML file, to place what yaml-cpp's marks place wrongly or not at all.
// yaml-cpp counts a mark's pos in bytes (a '\r' too) from the start of the text, a UTF-8
// byte order mark left out, and its columns in characters. Not thread-safe (a cache); one
// per load.
class yaml_positions {
 public:
  // `text` must outlive this object.
  explicit yaml_positions(std::string_view text);

  // Where the nodes of the document start (YAML::Mark::pos of each, in any order): the
  // search of a `${` in a scalar stops at the next one (mark_in_scalar).
  void set_node_starts(std::vector<int> starts);

  // Where the `-` of a list entry without a value is. yaml-cpp gives such a null the mark
  // `next` of the token after it: the next entry, the next key (another key's line), or the
  // end of the file (a line past it). The `-` is found by going back from there over blank
  // lines, comments and white space; if what comes before is not a lone `-` (an explicit
  // `~` or `null` has its own mark; an entry of a flow list has no `-`), `next` is kept.
  [[nodiscard]] YAML::Mark null_entry_mark(const YAML::Mark& next);

  // Where the `${` at `offset` of a scalar's value is in the file. The value is the
  // scalar after YAML's quoting, escapes and line folding, none of which makes or removes
  // a "${" (short of an escape such as "\x24{", or an escaped line break between "$" and
  // "{"), so the n-th "${" of the value is the n-th of the file from the scalar's start
  // on. It is searched for only up to the scalar's end (its closing quote, else the start
  // of the next node: not in another key's value, nor in a comment after the last), and
  // taken only when the variable's name after it is the same too; otherwise the scalar's
  // own mark is returned.
  [[nodiscard]] YAML::Mark mark_in_scalar(const YAML::Mark& scalar, std::string_view value,
                                          std::size_t offset) const;

  // The byte at a mark's line and column (right for a line of ASCII before the mark), or 0.
  [[nodiscard]] char byte_at(const YAML::Mark& mark) const;

  // The 1-based number of the first line indented with a tab, if any.
  [[nodiscard]] std::optional<std::size_t> first_tab_indented_line() const;

 private:
  // The offset in text_ of a mark's pos.
  [[nodiscard]] std::size_t offset_of(int pos) const;
  // Where the end of the scalar starting at `start` is: its closing quote, else `limit`.
  [[nodiscard]] std::size_t scalar_end(std::size_t start, std::size_t limit) const;

  std::string_view text_;
  std::size_t bom_;  // the bytes of a UTF-8 byte order mark at the start, which marks leave out
  std::vector<int> node_starts_;                // sorted
  std::map<int, YAML::Mark> null_entry_marks_;  // null_entry_mark's, by the mark it was given
};

}  // namespace sketchd::config_detail
