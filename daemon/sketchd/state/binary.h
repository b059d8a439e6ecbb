// Little-endian fields for the daemon's state files: a writer that appends to a string and
// a reader that checks every bound. A reader that runs out of input, or is told that a
// field is wrong, throws snapshot_error: corrupt state is an error message, never a crash.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sketchd::state {

// A snapshot (or a part of one) that is corrupt, truncated, of another format, or that
// does not fit the configuration.
class snapshot_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The snapshot was made under other parameters than the configuration's: what() lists
// each difference as "KEY: A in the snapshot, B in the configuration".
class mismatch_error : public snapshot_error {
 public:
  using snapshot_error::snapshot_error;
};

// The snapshot file could not be read at all (permissions, an I/O error, not a regular
// file): nothing says it is bad, so it is never set aside.
class unreadable_error : public snapshot_error {
 public:
  using snapshot_error::snapshot_error;
};

// Something other than a regular file (a directory, a FIFO) stands at the snapshot's path:
// unreadable whichever user tries, unlike a file only some users may read.
class not_a_file_error : public unreadable_error {
 public:
  using unreadable_error::unreadable_error;
};

// Not thread-safe; one owner.
class binary_writer {
 public:
  explicit binary_writer(std::string& out) : out_(out) {}
  template <class T>
  void pod(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  void u8(std::uint8_t v) { pod(v); }
  void u32(std::uint32_t v) { pod(v); }
  void i32(std::int32_t v) { pod(v); }
  void u64(std::uint64_t v) { pod(v); }
  void i64(std::int64_t v) { pod(v); }
  // A length (u64) and the bytes.
  void bytes(std::string_view s) {
    u64(s.size());
    out_.append(s);
  }
  // The same, with the bytes appended in place by write(std::string&): no copy of them.
  template <class Write>
  void bytes_with(Write&& write) {
    const std::size_t at = out_.size();
    u64(0);  // patched below
    write(out_);
    const std::uint64_t size = out_.size() - at - sizeof size;
    std::memcpy(out_.data() + at, &size, sizeof size);
  }

 private:
  std::string& out_;
};

// Not thread-safe; one owner. `what` names the input in error messages.
class binary_reader {
 public:
  binary_reader(std::string_view in, std::string what) : in_(in), what_(std::move(what)) {}
  template <class T>
  [[nodiscard]] T pod() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  [[nodiscard]] std::uint8_t u8() { return pod<std::uint8_t>(); }
  [[nodiscard]] std::uint32_t u32() { return pod<std::uint32_t>(); }
  [[nodiscard]] std::int32_t i32() { return pod<std::int32_t>(); }
  [[nodiscard]] std::uint64_t u64() { return pod<std::uint64_t>(); }
  [[nodiscard]] std::int64_t i64() { return pod<std::int64_t>(); }
  [[nodiscard]] std::string_view bytes() {
    const std::uint64_t n = u64();
    if (n > remaining()) fail("a field is longer than the data left (truncated or corrupt)");
    return {take(static_cast<std::size_t>(n)), static_cast<std::size_t>(n)};
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return in_.size() - pos_; }
  void done() const {
    if (remaining() != 0) fail("unexpected data after the end");
  }
  [[noreturn]] void fail(std::string_view why) const {
    throw snapshot_error(what_ + ": " + std::string(why));
  }

 private:
  const char* take(std::size_t n) {
    if (n > remaining()) fail("truncated");
    const char* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::string_view in_;
  std::size_t pos_ = 0;
  std::string what_;
};

}  // namespace sketchd::state
