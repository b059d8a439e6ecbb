#include "sketchd/state/snapshot.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace sketchd::state {

namespace {

constexpr char kMagic[8] = {'S', 'K', 'D', 'S', 'N', 'A', 'P', '\0'};
constexpr std::size_t kHeaderSize = 20;
constexpr std::size_t kTrailerSize = 8;

std::string system_error(std::string_view what, const std::string& path) {
  return fmt::format("{} {}: {}", what, path, std::strerror(errno));
}

// Writes all of `data` to `fd`, retrying short writes and EINTR.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

std::string encode(const snapshot& s) {
  std::string out(kMagic, sizeof kMagic);
  binary_writer w(out);
  w.u32(kFormatVersion);
  w.u64(0);  // payload length, filled in below
  w.i64(s.created_ms);
  w.u32(static_cast<std::uint32_t>(s.offsets.size()));
  for (const auto& o : s.offsets) {
    w.bytes(o.topic);
    w.i32(o.partition);
    w.i64(o.next_offset);
  }
  w.u32(static_cast<std::uint32_t>(s.pipelines.size()));
  for (const auto& [name, state] : s.pipelines) {
    w.bytes(name);
    w.bytes(state);
  }
  const std::uint64_t length = out.size() - kHeaderSize;
  std::memcpy(out.data() + 12, &length, sizeof length);
  w.u64(XXH3_64bits(out.data(), out.size()));
  return out;
}

snapshot decode(std::string_view file, const std::string& name) {
  binary_reader header(file, name);
  if (file.size() < kHeaderSize + kTrailerSize || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) {
    header.fail("not a sketchd snapshot (bad magic or too short)");
  }
  (void)header.pod<std::uint64_t>();  // the magic
  const std::uint32_t version = header.u32();
  if (version != kFormatVersion) {
    header.fail(fmt::format("format version {}, this sketchd reads version {}", version, kFormatVersion));
  }
  const std::uint64_t length = header.u64();
  if (length != file.size() - kHeaderSize - kTrailerSize) {
    header.fail(fmt::format("truncated or corrupt: the header announces {} bytes of data, the file has {}", length,
                            file.size() - kHeaderSize - kTrailerSize));
  }
  std::uint64_t checksum = 0;
  std::memcpy(&checksum, file.data() + kHeaderSize + length, sizeof checksum);
  if (checksum != XXH3_64bits(file.data(), kHeaderSize + length)) header.fail("corrupt: checksum mismatch");

  binary_reader r(file.substr(kHeaderSize, length), name);
  snapshot s;
  s.created_ms = r.i64();
  const std::uint32_t offsets = r.u32();
  for (std::uint32_t i = 0; i < offsets; ++i) {
    partition_offset o;
    o.topic = std::string(r.bytes());
    o.partition = r.i32();
    o.next_offset = r.i64();
    if (o.partition < 0 || o.next_offset < 0) r.fail("corrupt: a negative partition or offset");
    s.offsets.push_back(std::move(o));
  }
  const std::uint32_t pipelines = r.u32();
  for (std::uint32_t i = 0; i < pipelines; ++i) {
    std::string pipeline_name(r.bytes());
    std::string state(r.bytes());
    s.pipelines.emplace_back(std::move(pipeline_name), std::move(state));
  }
  r.done();
  return s;
}

store::store(std::string dir) : dir_(std::move(dir)), path_((std::filesystem::path(dir_) / kFileName).string()) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw snapshot_error(fmt::format("cannot create the state directory {}: {}", dir_, ec.message()));
  if (!std::filesystem::is_directory(dir_, ec)) {
    throw snapshot_error(fmt::format("the state directory {} is not a directory", dir_));
  }
  if (::access(dir_.c_str(), W_OK | X_OK) != 0) {
    throw snapshot_error(system_error("cannot write in the state directory", dir_));
  }
}

store::write_result store::write(const snapshot& s) {
  const std::string data = encode(s);
  const std::string tmp = path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw snapshot_error(system_error("cannot create", tmp));
  const bool written = write_all(fd, data) && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!written) {
    errno = saved;
    const std::string message = system_error("cannot write", tmp);
    ::unlink(tmp.c_str());
    throw snapshot_error(message);
  }
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    const std::string message = system_error("cannot rename the new snapshot to", path_);
    ::unlink(tmp.c_str());
    throw snapshot_error(message);
  }
  // The rename is durable once the directory is.
  const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {data.size()};
}

std::optional<snapshot> store::read() const {
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    if (errno == ENOENT || !std::filesystem::exists(path_)) return std::nullopt;
    throw snapshot_error(system_error("cannot read", path_));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw snapshot_error(system_error("cannot read", path_));
  return decode(buffer.str(), path_);
}

void store::set_aside(std::string_view why) {
  if (!std::filesystem::exists(path_)) return;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const std::string target = fmt::format("{}.discarded-{}", path_, stamp);
  std::error_code ec;
  std::filesystem::rename(path_, target, ec);
  if (ec) throw snapshot_error(fmt::format("cannot set {} aside: {}", path_, ec.message()));
  spdlog::warn("snapshot {} set aside as {}: {}", path_, target, why);
}

}  // namespace sketchd::state
