// Reading lines from files or stdin in bounded memory, without a copy per line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace sketch::cli {

// Reads the files in order ("-" or an empty list means stdin) and hands each line,
// without its '\n', to a callback as a string_view valid during the call. A last line
// without '\n' is a line too. Memory: one 1 MiB buffer, plus the longest line that
// crosses a buffer boundary. Throws std::runtime_error naming a file that cannot be read.
//
// Each read takes what the input has (up to the buffer), so the lines of a pipe that
// delivers slowly (`tail -f log | sketch dedup`) are handed over as they come, not once a
// megabyte has gathered; and before a read that would wait for more, `before_waiting`
// runs (the caller flushes its output there).
//
// Not thread-safe: one owner.
class line_reader {
 public:
  explicit line_reader(std::vector<std::string> files);

  template <class F>
  void for_each_line(F&& on_line, const std::function<void()>& before_waiting = {});

  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return bytes_; }

 private:
  // The file's descriptor (0 for "-"); closed by close().
  int open(const std::string& name);
  void close(int fd);
  // Up to the buffer's size of what fd has, 0 at its end; waits only when it has nothing.
  std::size_t read_some(int fd, const std::string& name,
                        const std::function<void()>& before_waiting);

  std::vector<std::string> files_;
  std::vector<char> buffer_;
  std::string carry_;
  std::uint64_t bytes_ = 0;
};

template <class F>
void line_reader::for_each_line(F&& on_line, const std::function<void()>& before_waiting) {
  for (const std::string& name : files_) {
    const int fd = open(name);
    carry_.clear();
    try {
      std::size_t n;
      while ((n = read_some(fd, name, before_waiting)) > 0) {
        bytes_ += n;
        std::string_view chunk(buffer_.data(), n);
        std::size_t pos = 0;
        while (true) {
          const std::size_t nl = chunk.find('\n', pos);
          if (nl == std::string_view::npos) {
            carry_.append(chunk.substr(pos));
            break;
          }
          if (carry_.empty()) {
            on_line(chunk.substr(pos, nl - pos));
          } else {
            carry_.append(chunk.substr(pos, nl - pos));
            on_line(std::string_view(carry_));
            carry_.clear();
          }
          pos = nl + 1;
        }
      }
    } catch (...) {
      close(fd);
      throw;
    }
    close(fd);
    if (!carry_.empty()) on_line(std::string_view(carry_));
  }
}

}  // namespace sketch::cli
