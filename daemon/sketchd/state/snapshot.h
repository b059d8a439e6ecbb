// State snapshots: the pipelines' rolling structures and the input positions they reflect,
// in one file of state.dir, written atomically and checked on read.
//
// The file (all integers little-endian):
//
//   offset  size  field
//   ------  ----  --------------------------------------------------------------------
//        0     8  magic "SKDSNAP\0"
//        8     4  format version (kFormatVersion)
//       12     8  payload length L
//       20     L  payload:
//                   i64 created_ms (wall clock when written)
//                   u32 P, then P × { u64 n, n bytes topic; i32 partition; i64 next_offset }
//                   u32 R, then R × { u64 n, n bytes topic; i32 partition; i64 next_offset }
//                       (version 2: the output positions; absent from version 1)
//                   u32 Q, then Q × { u64 n, n bytes pipeline name; u64 m, m bytes state }
//                       (state: pipeline::save_state(), which carries its own parameters)
//   20 + L     8  XXH3-64 of bytes [0, 20 + L)
//
// Writing goes to DIR/sketchd.snapshot.tmp, which is fsync'd, renamed over
// DIR/sketchd.snapshot, and the directory fsync'd: a crash at any point leaves either the
// previous snapshot or the new one, whole. Both directions stream: writing hands each
// pipeline's state to the file as it is, reading puts it straight into the snapshot, so a
// state is never held more than twice (the structures and their encoding, which
// pipeline::save_state() writes in place and restore_state() reads after releasing the
// structures it replaces). Reading checks the magic, the version and the length against
// the file's size first, then every field's length against what is left while computing
// the checksum, which is compared at the end: any corruption is a snapshot_error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketchd/state/binary.h"

namespace sketchd::state {

// Written as version 2; version 1 (without the output positions) is read too.
inline constexpr std::uint32_t kFormatVersion = 2;
inline constexpr std::uint32_t kOldestFormatVersion = 1;

struct partition_offset {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t next_offset = 0;  // the state reflects exactly the messages before it
  friend bool operator==(const partition_offset&, const partition_offset&) = default;
};

struct snapshot {
  std::int64_t created_ms = 0;
  std::vector<partition_offset> offsets;
  // Where the forwarded outputs' topics ended when the snapshot was taken (every output of
  // the messages before `offsets` delivered): per output partition, an offset at or before
  // the first output forwarded after the snapshot. A restore reads the outputs from there
  // (kafka/output_replay.h), so that nothing forwarded between this snapshot and a crash is
  // forwarded again. Empty for a version 1 file, or when no end was known.
  std::vector<partition_offset> outputs;
  std::vector<std::pair<std::string, std::string>> pipelines;  // name, pipeline::save_state()
};

// The snapshot in the file at `path`, as store::read() reads it, without a store (no lock
// taken, nothing created): for a look at the snapshot of a directory another sketchd may
// be using. `keep`: of each pipeline's state only the first `keep` bytes are kept (the
// file is still read whole, for its checksum), e.g. for pipeline::state_mismatch().
[[nodiscard]] std::optional<snapshot> read_snapshot_file(const std::string& path,
                                                         std::uint64_t keep = UINT64_MAX);

// The snapshot file of one directory. Not thread-safe; one owner.
class store {
 public:
  static constexpr const char* kFileName = "sketchd.snapshot";
  static constexpr const char* kLockFileName = "sketchd.lock";

  // Creates the directory (and its parents) if missing, and locks it (flock of
  // DIR/sketchd.lock, held until the store is destroyed or the process ends). Throws
  // snapshot_error naming the directory and the system's reason when it cannot, when it is
  // not writable, or when another store (another sketchd) holds its lock.
  explicit store(std::string dir);
  ~store();
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  struct write_result {
    std::uint64_t bytes = 0;  // the file's size
    double seconds = 0;       // encoding, writing, fsync and rename
  };
  // Writes the snapshot atomically (see the file comment), streaming it: the pipelines'
  // states are not copied. Throws snapshot_error naming the file and the system's reason
  // ("No space left on device"…); the previous snapshot is then intact. A state directory
  // removed while sketchd runs is created again, with a warning, and locked again first:
  // when another sketchd has taken the new directory meanwhile, the write fails.
  write_result write(const snapshot& s);

  // The snapshot, or nullopt when there is none (a leftover .tmp of an interrupted write
  // is not looked at). Throws snapshot_error naming the file and what is wrong when it is
  // corrupt, truncated, of another format or version, or unreadable.
  [[nodiscard]] std::optional<snapshot> read() const;

  // Renames the snapshot to sketchd.snapshot.discarded-YYYYmmddTHHMMSSZ (UTC; "-N" added
  // if that name is taken) beside it, kept for inspection and no longer read; logs why on
  // the "state" logger. Does nothing when there is none.
  void set_aside(std::string_view why);
  // The same, but the snapshot stays in place too (a second name for the same file, or a
  // copy where the file system has no hard links): some of its pipelines are still to be
  // restored from it, and a crash before the next snapshot must find it again. The copy is
  // a courtesy: when neither can be made (a full disk), a warning says so and nothing is
  // thrown.
  void keep_aside(std::string_view why);

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  // Opens and flocks DIR/sketchd.lock; throws snapshot_error when another store holds it.
  [[nodiscard]] int take_lock() const;
  // Makes sure the lock held is on the lock file of the directory as it is now: one
  // removed with its directory (rm -rf of state.dir) no longer keeps another sketchd out.
  void keep_lock();
  // DIR/sketchd.snapshot.discarded-YYYYmmddTHHMMSSZ[-N]: a name no file has yet.
  [[nodiscard]] std::string aside_name() const;

  std::string dir_;
  std::string path_;
  std::string lock_path_;
  int lock_fd_ = -1;
};

// The file's bytes, in memory (for tests and tools); `name` names the input in errors.
[[nodiscard]] std::string encode(const snapshot& s);
[[nodiscard]] snapshot decode(std::string_view file, const std::string& name);

}  // namespace sketchd::state
