#include "sketchd/state/snapshot.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>

#include "sketchd/util/logging.h"

namespace sketchd::state {

namespace {

constexpr char kMagic[8] = {'S', 'K', 'D', 'S', 'N', 'A', 'P', '\0'};
constexpr std::size_t kHeaderSize = 20;
constexpr std::size_t kTrailerSize = 8;
// Small fields are gathered up to this size before they are handed on; a pipeline's
// state, which can be tens of MiB, is handed on as it is, never copied.
constexpr std::size_t kSmallFields = 64 * 1024;

std::shared_ptr<spdlog::logger> logger() { return module_logger("state"); }

std::string system_error(std::string_view what, const std::string& path, int error) {
  return fmt::format("{} {}: {}", what, path, std::strerror(error));
}

// Makes the state directory (and its missing parents). One that sketchd makes is its own
// (0700): the snapshots hold the windows' items; one that exists keeps its permissions.
void make_directory(const std::string& dir, std::error_code& ec) {
  if (std::filesystem::create_directories(dir, ec))
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
}

// The same for a directory removed while sketchd runs, said in the log.
void make_directory_again(const std::string& dir) {
  std::error_code ec;
  make_directory(dir, ec);
  if (ec)
    throw snapshot_error(
        fmt::format("cannot create the state directory {} again: {}", dir, ec.message()));
  logger()->warn("the state directory {} was gone: created it again", dir);
}

// The payload's length, known before any of it is written so the header can go first.
std::uint64_t payload_length(const snapshot& s) {
  std::uint64_t n = 8 + 4 + 4 + 4;  // created_ms, P, R, Q
  for (const auto& o : s.offsets) n += 8 + o.topic.size() + 4 + 8;
  for (const auto& o : s.outputs) n += 8 + o.topic.size() + 4 + 8;
  for (const auto& [name, state] : s.pipelines) n += 8 + name.size() + 8 + state.size();
  return n;
}

// Hands the file's bytes to `put(std::string_view)` in order, in pieces: the header, the
// payload and the checksum (see snapshot.h). Returns the number of bytes.
template <class Put>
std::uint64_t emit(const snapshot& s, Put&& put) {
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(),
                                                                      &XXH3_freeState);
  if (!hash) throw std::bad_alloc();
  XXH3_64bits_reset(hash.get());
  std::uint64_t total = 0;
  const auto out = [&](std::string_view piece) {
    XXH3_64bits_update(hash.get(), piece.data(), piece.size());
    put(piece);
    total += piece.size();
  };
  std::string small(kMagic, sizeof kMagic);
  binary_writer w(small);
  const auto flush = [&] {
    out(small);
    small.clear();
  };
  w.u32(kFormatVersion);
  w.u64(payload_length(s));
  w.i64(s.created_ms);
  for (const auto* list : {&s.offsets, &s.outputs}) {
    w.u32(static_cast<std::uint32_t>(list->size()));
    for (const auto& o : *list) {
      w.bytes(o.topic);
      w.i32(o.partition);
      w.i64(o.next_offset);
      if (small.size() >= kSmallFields) flush();
    }
  }
  w.u32(static_cast<std::uint32_t>(s.pipelines.size()));
  for (const auto& [name, state] : s.pipelines) {
    w.bytes(name);
    w.u64(state.size());
    flush();
    out(state);
  }
  flush();
  const std::uint64_t checksum = XXH3_64bits_digest(hash.get());
  w.u64(checksum);
  put(small);  // the checksum is not part of what it covers
  return total + small.size();
}

// Writes all of `data` to `fd`, retrying short writes and EINTR. False with errno set on
// an error.
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

// A file descriptor, closed on destruction. Not thread-safe; one owner.
class unique_fd {
 public:
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  // Closes now; false with errno set when close reports an error (NFS reports write
  // errors there).
  [[nodiscard]] bool close() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

// Reads a file of `size` bytes from `get(char* to, std::size_t n)`, which fills `to` with
// the next n bytes and returns how many it could (fewer only at the end). The header is
// checked first; the payload is then read field by field straight into the snapshot (every
// length checked against what the header announced, itself checked against the size, so a
// corrupt length cannot make it allocate more than the file holds) while the checksum is
// computed, and compared at the end. `keep`: of each pipeline's state, the first `keep`
// bytes are kept, the rest read (for the checksum) and dropped.
template <class Get>
snapshot parse(Get&& get, std::uint64_t size, const std::string& name,
               std::uint64_t keep = UINT64_MAX) {
  const auto fail = [&name](std::string_view why) {
    throw snapshot_error(fmt::format("{}: {}", name, why));
  };
  char header[kHeaderSize];
  if (size < kHeaderSize + kTrailerSize || get(header, kHeaderSize) != kHeaderSize ||
      std::memcmp(header, kMagic, sizeof kMagic) != 0) {
    fail("not a sketchd snapshot (bad magic or too short)");
  }
  std::uint32_t version = 0;
  std::uint64_t length = 0;
  std::memcpy(&version, header + 8, sizeof version);
  std::memcpy(&length, header + 12, sizeof length);
  if (version < kOldestFormatVersion || version > kFormatVersion) {
    fail(fmt::format("format version {}, this sketchd reads versions {} to {}", version,
                     kOldestFormatVersion, kFormatVersion));
  }
  if (length != size - kHeaderSize - kTrailerSize) {
    fail(fmt::format("truncated or corrupt: the header announces {} bytes of data, the file has {}",
                     length, size - kHeaderSize - kTrailerSize));
  }
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(),
                                                                      &XXH3_freeState);
  if (!hash) throw std::bad_alloc();
  XXH3_64bits_reset(hash.get());
  XXH3_64bits_update(hash.get(), header, kHeaderSize);

  std::uint64_t left = length;  // of the payload
  const auto take = [&](char* to, std::uint64_t n) {
    if (n > left) fail("corrupt: a field is longer than the data left");
    if (get(to, static_cast<std::size_t>(n)) != n) fail("truncated while reading");
    XXH3_64bits_update(hash.get(), to, static_cast<std::size_t>(n));
    left -= n;
  };
  const auto pod = [&]<class T>(T tag) {
    T v = tag;
    take(reinterpret_cast<char*>(&v), sizeof v);
    return v;
  };
  const auto bytes = [&](std::uint64_t limit) {
    const auto n = pod(std::uint64_t{});
    if (n > left) fail("corrupt: a field is longer than the data left");
    std::string out(static_cast<std::size_t>(std::min(n, limit)), '\0');
    take(out.data(), out.size());
    if (n > out.size()) {
      std::vector<char> scratch(64 * 1024);
      for (std::uint64_t rest = n - out.size(); rest > 0;) {
        const std::uint64_t piece = std::min<std::uint64_t>(rest, scratch.size());
        take(scratch.data(), piece);
        rest -= piece;
      }
    }
    return out;
  };
  snapshot s;
  s.created_ms = pod(std::int64_t{});
  const auto positions = [&](std::vector<partition_offset>& to) {
    const auto count = pod(std::uint32_t{});
    for (std::uint32_t i = 0; i < count; ++i) {
      partition_offset o;
      o.topic = bytes(UINT64_MAX);
      o.partition = pod(std::int32_t{});
      o.next_offset = pod(std::int64_t{});
      if (o.partition < 0 || o.next_offset < 0) fail("corrupt: a negative partition or offset");
      to.push_back(std::move(o));
    }
  };
  positions(s.offsets);
  if (version >= 2) positions(s.outputs);
  const auto pipelines = pod(std::uint32_t{});
  for (std::uint32_t i = 0; i < pipelines; ++i) {
    std::string pipeline_name = bytes(UINT64_MAX);
    std::string state = bytes(keep);
    s.pipelines.emplace_back(std::move(pipeline_name), std::move(state));
  }
  if (left != 0) fail("corrupt: unexpected data after the end");
  std::uint64_t checksum = 0;
  if (get(reinterpret_cast<char*>(&checksum), sizeof checksum) != sizeof checksum)
    fail("truncated while reading");
  if (checksum != XXH3_64bits_digest(hash.get())) fail("corrupt: checksum mismatch");
  return s;
}

}  // namespace

std::string encode(const snapshot& s) {
  std::string out;
  out.reserve(static_cast<std::size_t>(kHeaderSize + payload_length(s) + kTrailerSize));
  (void)emit(s, [&](std::string_view piece) { out.append(piece); });
  return out;
}

snapshot decode(std::string_view file, const std::string& name) {
  std::size_t pos = 0;
  return parse(
      [&](char* to, std::size_t n) {
        n = std::min(n, file.size() - pos);
        std::memcpy(to, file.data() + pos, n);
        pos += n;
        return n;
      },
      file.size(), name);
}

store::store(std::string dir)
    : dir_(std::move(dir)), path_((std::filesystem::path(dir_) / kFileName).string()) {
  std::error_code ec;
  make_directory(dir_, ec);
  if (ec)
    throw snapshot_error(
        fmt::format("cannot create the state directory {}: {}", dir_, ec.message()));
  if (!std::filesystem::is_directory(dir_, ec)) {
    throw snapshot_error(fmt::format("the state directory {} is not a directory", dir_));
  }
  if (::access(dir_.c_str(), W_OK | X_OK) != 0) {
    throw snapshot_error(system_error("cannot write in the state directory", dir_, errno));
  }
  // One instance per directory: two would write the same files, and restore each other's
  // positions. The lock goes with the process, however it ends.
  lock_path_ = (std::filesystem::path(dir_) / kLockFileName).string();
  lock_fd_ = take_lock();
}

store::~store() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

int store::take_lock() const {
  const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw snapshot_error(system_error("cannot open", lock_path_, errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) {
      throw snapshot_error(fmt::format(
          "the state directory {} is in use by another sketchd (it holds {}): give each instance "
          "a state.dir of its own",
          dir_, lock_path_));
    }
    throw snapshot_error(system_error("cannot lock", lock_path_, error));
  }
  return fd;
}

void store::keep_lock() {
  struct stat held {};
  struct stat now {};
  if (::fstat(lock_fd_, &held) == 0 && ::stat(lock_path_.c_str(), &now) == 0 &&
      held.st_dev == now.st_dev && held.st_ino == now.st_ino) {
    return;
  }
  // The lock file was removed (with its directory, say) or replaced: the flock held is on
  // a file nobody else opens, so another sketchd could start on this directory. Take the
  // lock of the directory as it is now; if another sketchd already has, this one must not
  // write there.
  std::error_code ec;
  if (!std::filesystem::is_directory(dir_, ec)) make_directory_again(dir_);
  const int fd = take_lock();
  ::close(lock_fd_);
  lock_fd_ = fd;
  logger()->warn("the lock file {} was gone: locked the state directory again", lock_path_);
}

store::write_result store::write(const snapshot& s) {
  const auto start = std::chrono::steady_clock::now();
  keep_lock();
  const std::string tmp = path_ + ".tmp";
  // On any error: the temporary file goes, the previous snapshot stays as it was.
  const auto fail = [&](std::string_view what, const std::string& path, int error) {
    const std::string message = system_error(what, path, error);
    ::unlink(tmp.c_str());
    throw snapshot_error(message);
  };
  std::uint64_t bytes = 0;
  {
    // A new file, never one that is there: a .tmp left by a crash is removed first, and a
    // symlink put in its place (by whoever can write in state.dir) is removed, not followed
    // (O_EXCL refuses any name that exists, O_NOFOLLOW says so). Owner-only (0600): the
    // snapshot holds the items (user ids, keys) of the windows.
    const auto create = [&] {
      ::unlink(tmp.c_str());
      return ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    };
    int created = create();
    if (created < 0 && errno == ENOENT) {
      // The directory went away (a clean-up job, an operator): make it again.
      make_directory_again(dir_);
      created = create();
    }
    unique_fd fd(created);
    if (fd.get() < 0) throw snapshot_error(system_error("cannot create", tmp, errno));
    bool ok = true;
    int error = 0;
    try {
      bytes = emit(s, [&](std::string_view piece) {
        if (ok && !write_all(fd.get(), piece)) {
          ok = false;
          error = errno;
        }
      });
    } catch (...) {
      ::unlink(tmp.c_str());  // out of memory: no half-written file is left behind
      throw;
    }
    if (!ok) fail("cannot write", tmp, error);
    if (::fsync(fd.get()) != 0) fail("cannot write (fsync)", tmp, errno);
    if (!fd.close()) fail("cannot write (close)", tmp, errno);
  }
  if (::rename(tmp.c_str(), path_.c_str()) != 0)
    fail("cannot rename the new snapshot to", path_, errno);
  // The rename is durable once the directory is. The new snapshot is in place by now, so
  // a failure here is reported but nothing is removed. EINVAL: the file system does not
  // sync directories (it has nothing to make durable).
  const unique_fd dir(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0 || (::fsync(dir.get()) != 0 && errno != EINVAL)) {
    // Not a failed snapshot: the new one is what a start restores, unless the machine
    // loses power before the directory reaches the disk.
    logger()->warn(
        "the new snapshot is in place, but its rename may not be durable: cannot fsync the "
        "directory {}: {}",
        dir_, std::strerror(errno));
  }
  return {bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

std::optional<snapshot> store::read() const { return read_snapshot_file(path_); }

std::optional<snapshot> read_snapshot_file(const std::string& path, std::uint64_t keep) {
  // O_NONBLOCK: opening a FIFO put there by mistake must not wait for a writer forever
  // (before the signal handlers and the HTTP server are up). It does not change how a
  // regular file reads.
  const unique_fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw unreadable_error(system_error("cannot read", path, errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw unreadable_error(system_error("cannot read", path, errno));
  if (!S_ISREG(st.st_mode))
    throw not_a_file_error(fmt::format("cannot read {}: not a regular file", path));
  // Straight into the snapshot's strings: the file is never held whole beside them.
  return parse(
      [&](char* to, std::size_t n) {
        std::size_t got = 0;
        while (got < n) {
          const ssize_t r = ::read(fd.get(), to + got, n - got);
          if (r < 0 && errno == EINTR) continue;
          if (r < 0) throw unreadable_error(system_error("cannot read", path, errno));
          if (r == 0) break;  // the file shrank meanwhile: parse() reports the truncation
          got += static_cast<std::size_t>(r);
        }
        return got;
      },
      static_cast<std::uint64_t>(st.st_size), path, keep);
}

std::string store::aside_name() const {
  std::error_code ec;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  // Never over an earlier discarded snapshot of the same second.
  std::string target = fmt::format("{}.discarded-{}", path_, stamp);
  for (int i = 1; std::filesystem::exists(target, ec); ++i) {
    target = fmt::format("{}.discarded-{}-{}", path_, stamp, i);
  }
  return target;
}

void store::set_aside(std::string_view why) {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return;
  const std::string target = aside_name();
  std::filesystem::rename(path_, target, ec);
  if (ec) throw snapshot_error(fmt::format("cannot set {} aside: {}", path_, ec.message()));
  logger()->warn("snapshot {} set aside as {}: {}", path_, target, why);
}

void store::keep_aside(std::string_view why) {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return;
  const std::string target = aside_name();
  std::filesystem::create_hard_link(path_, target, ec);
  if (ec) {
    ec.clear();
    std::filesystem::copy_file(path_, target, ec);
    if (ec) {
      const std::string reason = ec.message();
      std::filesystem::remove(target, ec);
      logger()->warn("snapshot {}: {}; no copy of it is kept ({}: {})", path_, why, target, reason);
      return;
    }
  }
  logger()->warn("snapshot {} kept as {}: {}", path_, target, why);
}

}  // namespace sketchd::state
