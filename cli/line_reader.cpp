#include "cli/line_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace sketch::cli {

namespace {

std::string shown(const std::string& name) { return name == "-" ? "stdin" : name; }

}  // namespace

line_reader::line_reader(std::vector<std::string> files)
    : files_(std::move(files)), buffer_(1 << 20) {
  if (files_.empty()) files_.push_back("-");
}

int line_reader::open(const std::string& name) {
  if (name == "-") return STDIN_FILENO;
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + name + ": " + std::strerror(errno));
  return fd;
}

void line_reader::close(int fd) {
  if (fd != STDIN_FILENO) ::close(fd);
}

std::size_t line_reader::read_some(int fd, const std::string& name,
                                   const std::function<void()>& before_waiting) {
  if (before_waiting) {
    // Only a pipe, a socket or a terminal can have nothing yet; a file always answers.
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, 0) < 0 && errno == EINTR) {
    }
    if (p.revents == 0) before_waiting();
  }
  for (;;) {
    const ssize_t n = ::read(fd, buffer_.data(), buffer_.size());
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) {
      throw std::runtime_error("cannot read " + shown(name) + ": " + std::strerror(errno));
    }
  }
}

}  // namespace sketch::cli
