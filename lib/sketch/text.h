// Text from users and streams, made safe to print on one line of a terminal or a log.
#pragma once

#include <string>
#include <string_view>

namespace sketch {

// TEXT with its control characters escaped: newline as \n, tab as \t, the other bytes
// below 0x20 and DEL as \xNN, and the UTF-8 characters that act on a terminal or on the
// order of the text shown (the C1 controls U+0080..U+009F, U+2028, U+2029 and the
// bidirectional controls U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) as
// \uNNNN; with escape_backslash, a backslash as \\ too (so that an escaped text cannot
// be taken for one that held the escape). Other bytes, the rest of UTF-8 and invalid
// sequences included, are kept. The result is one line, and cannot move a terminal's
// cursor or reorder what is printed around it.
[[nodiscard]] std::string escape_controls(std::string_view text, bool escape_backslash = false);

// The length of the UTF-8 sequence at text[i] when it encodes one of the characters that
// escape_controls writes as \uNNNN (its code point in *cp), or 0. For other escapers (JSON).
[[nodiscard]] std::size_t escaped_character_at(std::string_view text, std::size_t i, unsigned* cp);

}  // namespace sketch
