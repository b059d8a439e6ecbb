// The one UTF-8 cleaner of the daemon: item bytes (any bytes a stream carries) made into
// text for metric labels, JSON strings and log lines.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

namespace sketchd::utf8 {

// Whether `s` is valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF). Thread-safe, as every function here.
[[nodiscard]] bool valid(std::string_view s) noexcept;

// `raw` as valid UTF-8 of at most `max_bytes` bytes: each byte that does not begin a valid
// sequence becomes U+FFFD (so two invalid bytes are two U+FFFD, and valid text is kept as
// it is), and the result is cut at the last character boundary within `max_bytes`.
[[nodiscard]] std::string clean(std::string_view raw,
                                std::size_t max_bytes = std::numeric_limits<std::size_t>::max());

}  // namespace sketchd::utf8
