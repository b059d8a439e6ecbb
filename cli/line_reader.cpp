#include "line_reader.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace sketch::cli {

line_reader::line_reader(std::vector<std::string> files)
    : files_(std::move(files)), buffer_(1 << 20) {
  if (files_.empty()) files_.push_back("-");
}

std::FILE* line_reader::open(const std::string& name) {
  if (name == "-") return stdin;
  std::FILE* f = std::fopen(name.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + name + ": " + std::strerror(errno));
  return f;
}

}  // namespace sketch::cli
