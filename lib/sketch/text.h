// Text from users and streams, made safe to print on one line of a terminal or a log.
#pragma once

#include <string>
#include <string_view>

namespace sketch {

// TEXT with its control characters escaped: newline as \n, tab as \t, the other bytes
// below 0x20 and DEL as \xNN; with escape_backslash, a backslash as \\ too (so that an
// escaped text cannot be taken for one that held the escape). Other bytes, UTF-8
// included, are kept. The result is one line, and cannot move a terminal's cursor.
[[nodiscard]] std::string escape_controls(std::string_view text, bool escape_backslash = false);

}  // namespace sketch
