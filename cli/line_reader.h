// Reading lines from files or stdin in bounded memory, without a copy per line.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sketch::cli {

// Reads the files in order ("-" or an empty list means stdin) and hands each line,
// without its '\n', to a callback as a string_view valid during the call. A last line
// without '\n' is a line too. Memory: one 1 MiB buffer, plus the longest line that
// crosses a buffer boundary. Throws std::runtime_error naming a file that cannot be read.
class line_reader {
 public:
  explicit line_reader(std::vector<std::string> files);

  template <class F>
  void for_each_line(F&& on_line);

  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return bytes_; }

 private:
  std::FILE* open(const std::string& name);
  std::vector<std::string> files_;
  std::vector<char> buffer_;
  std::string carry_;
  std::uint64_t bytes_ = 0;
};

template <class F>
void line_reader::for_each_line(F&& on_line) {
  for (const std::string& name : files_) {
    std::FILE* f = open(name);
    carry_.clear();
    std::size_t n;
    while ((n = std::fread(buffer_.data(), 1, buffer_.size(), f)) > 0) {
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
    const bool failed = std::ferror(f);
    const int error = errno;  // before fclose can change it
    if (f != stdin) std::fclose(f);
    if (failed) {
      throw std::runtime_error("cannot read " + (name == "-" ? std::string("stdin") : name) + ": " +
                               std::strerror(error));
    }
    if (!carry_.empty()) on_line(std::string_view(carry_));
  }
}

}  // namespace sketch::cli
