// State snapshots: the file round-trips, corruption of any kind is a snapshot_error (never
// a crash), writes replace the previous snapshot atomically, and a pipeline restored from
// its state answers exactly as before — or refuses a state made under other parameters.
#include "sketchd/state/snapshot.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "sketchd/pipeline/pipeline.h"

namespace sketchd {
namespace {

namespace fs = std::filesystem;

class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "sketchd-snapshot-test.XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

state::snapshot sample() {
  state::snapshot s;
  s.created_ms = 1'790'000'000'000;
  s.offsets = {{"events", 0, 42}, {"events", 3, 7}, {"other", 1, 0}};
  s.outputs = {{"first-seen", 0, 1'000}, {"first-seen", 1, 0}};
  s.pipelines = {{"clicks", std::string("state\0with\0zeros", 16)}, {"empty", ""}};
  return s;
}

TEST(Snapshot, EncodeDecodeRoundTrips) {
  const state::snapshot s = sample();
  const state::snapshot back = state::decode(state::encode(s), "test");
  EXPECT_EQ(back.created_ms, s.created_ms);
  EXPECT_EQ(back.offsets, s.offsets);
  EXPECT_EQ(back.outputs, s.outputs);
  EXPECT_EQ(back.pipelines, s.pipelines);
}

// A version 1 file (written before the output positions) is read, with none.
TEST(Snapshot, VersionOneIsReadWithoutOutputPositions) {
  state::snapshot s = sample();
  s.outputs.clear();
  std::string file = state::encode(s);
  // Version 1 is version 2 without the count of output positions (0 here), which follows
  // the input positions: header (20 bytes), created_ms, P, P positions.
  std::size_t at = 20 + 8 + 4;
  for (const auto& o : s.offsets) at += 8 + o.topic.size() + 4 + 8;
  file.erase(at, 4);
  const std::uint32_t version = 1;
  std::memcpy(file.data() + 8, &version, sizeof version);
  const std::uint64_t length = file.size() - 20 - 8;
  std::memcpy(file.data() + 12, &length, sizeof length);
  const std::uint64_t checksum = XXH3_64bits(file.data(), file.size() - 8);
  std::memcpy(file.data() + file.size() - 8, &checksum, sizeof checksum);
  const state::snapshot back = state::decode(file, "v1");
  EXPECT_EQ(back.offsets, s.offsets);
  EXPECT_TRUE(back.outputs.empty());
  EXPECT_EQ(back.pipelines, s.pipelines);
}

TEST(Snapshot, EveryTruncationIsAnError) {
  const std::string file = state::encode(sample());
  for (std::size_t n = 0; n < file.size(); ++n) {
    EXPECT_THROW((void)state::decode(std::string_view(file).substr(0, n), "test"),
                 state::snapshot_error)
        << n;
  }
}

TEST(Snapshot, EveryFlippedBitIsAnError) {
  const std::string file = state::encode(sample());
  for (std::size_t i = 0; i < file.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = file;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      EXPECT_THROW((void)state::decode(bad, "test"), state::snapshot_error) << i << ":" << bit;
    }
  }
}

TEST(Snapshot, ForeignFileAndNewerVersionAreNamed) {
  try {
    (void)state::decode("this is not a snapshot at all, but long enough", "/x/y");
    FAIL();
  } catch (const state::snapshot_error& e) {
    EXPECT_NE(std::string(e.what()).find("/x/y: not a sketchd snapshot"), std::string::npos)
        << e.what();
  }
  std::string file = state::encode(sample());
  file[8] = 9;  // version 9
  try {
    (void)state::decode(file, "f");
    FAIL();
  } catch (const state::snapshot_error& e) {
    EXPECT_NE(std::string(e.what()).find("format version 9"), std::string::npos) << e.what();
  }
}

TEST(SnapshotStore, WritesReadsAndReplaces) {
  temp_dir dir;
  state::store store(dir.path() + "/nested/state");
  EXPECT_FALSE(store.read().has_value());
  state::snapshot s = sample();
  const auto written = store.write(s);
  EXPECT_EQ(written.bytes, fs::file_size(store.path()));
  EXPECT_EQ(written.bytes, state::encode(s).size());
  EXPECT_GE(written.seconds, 0.0);
  s.created_ms += 1000;
  s.offsets.pop_back();
  (void)store.write(s);
  const auto back = store.read();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->created_ms, s.created_ms);
  EXPECT_EQ(back->offsets, s.offsets);
  EXPECT_FALSE(fs::exists(store.path() + ".tmp"));
}

// The file read without a store, keeping only the start of each state (check-config): the
// prefixes, and a corruption past them still found by the checksum.
TEST(SnapshotStore, TheFileCanBeReadForTheStartsOfItsStates) {
  temp_dir dir;
  state::store store(dir.path());
  (void)store.write(sample());
  const auto heads = state::read_snapshot_file(store.path(), 5);
  ASSERT_TRUE(heads.has_value());
  EXPECT_EQ(heads->offsets, sample().offsets);
  ASSERT_EQ(heads->pipelines.size(), 2u);
  EXPECT_EQ(heads->pipelines[0], std::make_pair(std::string("clicks"), std::string("state")));
  EXPECT_EQ(heads->pipelines[1], std::make_pair(std::string("empty"), std::string()));
  EXPECT_EQ(state::read_snapshot_file(dir.path() + "/none"), std::nullopt);
  {
    std::fstream f(store.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(store.path()) - 32));  // in "zeros"
    f.put('Z');
  }
  try {
    (void)state::read_snapshot_file(store.path(), 5);
    FAIL() << "a corrupt snapshot was read";
  } catch (const state::snapshot_error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

TEST(SnapshotStore, LeftoverTemporaryFileIsIgnored) {
  temp_dir dir;
  state::store store(dir.path());
  (void)store.write(sample());
  std::ofstream(store.path() + ".tmp") << "half a snapshot from a crash";
  EXPECT_EQ(store.read()->offsets, sample().offsets);
}

TEST(SnapshotStore, FailedWriteKeepsThePreviousSnapshot) {
  temp_dir dir;
  state::store store(dir.path());
  (void)store.write(sample());
  // The temporary file's name is taken by a directory: the write fails (even as root).
  fs::create_directory(store.path() + ".tmp");
  state::snapshot other = sample();
  other.created_ms = 1;
  EXPECT_THROW((void)store.write(other), state::snapshot_error);
  EXPECT_EQ(store.read()->created_ms, sample().created_ms);
}

TEST(SnapshotStore, AFailedWriteIsNamedAndKeepsThePreviousSnapshot) {
  temp_dir dir;
  state::store store(dir.path());
  (void)store.write(sample());
  // A write that fails midway, as on a full disk: the process may not grow a file past
  // 16 bytes (EFBIG; SIGXFSZ ignored, as the daemon's writes would see the error).
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 16;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  state::snapshot other = sample();
  other.created_ms = 1;
  std::string what;
  try {
    (void)store.write(other);
  } catch (const state::snapshot_error& e) {
    what = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(what.empty()) << "a write past the size limit succeeded";
  EXPECT_NE(what.find(store.path() + ".tmp"), std::string::npos) << what;
  EXPECT_NE(what.find(std::strerror(EFBIG)), std::string::npos) << what;
  EXPECT_FALSE(fs::exists(store.path() + ".tmp"));  // removed after the failure
  EXPECT_EQ(store.read()->created_ms, sample().created_ms);
}

// The rename that puts a new snapshot in place fails (a non-empty directory has taken the
// snapshot's name since the store was built, or since the last write): a snapshot_error
// naming the snapshot's path and the system's reason, the temporary file removed, and what
// stands at the snapshot's path left as it was.
TEST(SnapshotStore, AFailedRenameIsNamedAndLeavesNoTemporaryFile) {
  temp_dir dir;
  state::store store(dir.path());
  fs::create_directory(store.path());
  { std::ofstream(store.path() + "/inside") << "x"; }
  std::string what;
  try {
    (void)store.write(sample());
  } catch (const state::snapshot_error& e) {
    what = e.what();
  }
  ASSERT_FALSE(what.empty()) << "a snapshot was renamed over a non-empty directory";
  // rename(2) of a file over a directory: EISDIR.
  EXPECT_NE(
      what.find("cannot rename the new snapshot to " + store.path() + ": " + std::strerror(EISDIR)),
      std::string::npos)
      << what;
  EXPECT_FALSE(fs::exists(store.path() + ".tmp"));
  EXPECT_TRUE(fs::is_directory(store.path()));
  EXPECT_TRUE(fs::exists(store.path() + "/inside"));
  // Once the directory is gone, the next write succeeds.
  fs::remove_all(store.path());
  (void)store.write(sample());
  EXPECT_EQ(store.read()->created_ms, sample().created_ms);
}

// Whoever can write in state.dir must not make sketchd write elsewhere: a symlink in the
// temporary file's place is replaced, never followed; the files are the owner's only.
TEST(SnapshotStore, ASymlinkInPlaceOfTheTemporaryFileIsNotFollowed) {
  temp_dir dir;
  const std::string state_dir = dir.path() + "/state";
  state::store store(state_dir);
  const std::string victim = dir.path() + "/victim";
  { std::ofstream(victim) << "keep"; }
  fs::create_symlink(victim, store.path() + ".tmp");
  (void)store.write(sample());
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "keep");
  EXPECT_FALSE(fs::is_symlink(store.path()));
  EXPECT_EQ(store.read()->created_ms, sample().created_ms);
  EXPECT_EQ(fs::status(store.path()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(state_dir).permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST(SnapshotStore, SetAsideKeepsTheFileBesideAndForgetsIt) {
  temp_dir dir;
  state::store store(dir.path());
  store.set_aside("nothing to set aside");  // no snapshot: nothing happens
  for (int i = 0; i < 2; ++i) {
    (void)store.write(sample());
    store.set_aside("test");
    EXPECT_FALSE(store.read().has_value());
  }
  int discarded = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    if (name == state::store::kLockFileName) continue;
    EXPECT_TRUE(name.starts_with("sketchd.snapshot.discarded-")) << name;
    discarded += name.starts_with("sketchd.snapshot.discarded-");
  }
  EXPECT_EQ(discarded, 2);  // the second, of the same second, did not replace the first
}

// One instance per directory: a second store (another sketchd) is refused while the first
// lives, with a message that says so; once it is gone, the directory is free again.
TEST(SnapshotStore, ADirectoryInUseIsRefused) {
  temp_dir dir;
  {
    state::store first(dir.path());
    try {
      state::store second(dir.path());
      FAIL() << "two stores on one directory";
    } catch (const state::snapshot_error& e) {
      EXPECT_NE(std::string(e.what()).find("is in use by another sketchd"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(state::store again(dir.path()));
}

// A state directory removed while sketchd runs (rm -rf of state.dir) takes the lock file
// with it: the next snapshot locks the directory it creates again, so that a second
// sketchd is still kept out; and if a second one got in first, the first stops writing
// there.
TEST(SnapshotStore, TheLockOutlivesTheDirectorysRemoval) {
  temp_dir dir;
  const std::string state_dir = dir.path() + "/state";
  {
    state::store first(state_dir);
    fs::remove_all(state_dir);
    (void)first.write(sample());
    EXPECT_THROW(state::store second(state_dir), state::snapshot_error);
  }
  {
    state::store first(state_dir);
    fs::remove_all(state_dir);
    state::store second(state_dir);  // the directory is new: its lock is free
    try {
      (void)first.write(sample());
      FAIL() << "two stores wrote to one directory";
    } catch (const state::snapshot_error& e) {
      EXPECT_NE(std::string(e.what()).find("is in use by another sketchd"), std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(fs::exists(second.path()));
    (void)second.write(sample());
    EXPECT_TRUE(second.read().has_value());
  }
}

// A snapshot that cannot be read at all is an unreadable_error, which sketchd never sets
// aside (nothing says the file is bad); a corrupt one is a plain snapshot_error.
TEST(SnapshotStore, UnreadableIsToldApartFromCorrupt) {
  temp_dir dir;
  state::store store(dir.path());
  fs::create_directory(store.path());  // "sketchd.snapshot" is a directory
  EXPECT_THROW((void)store.read(), state::unreadable_error);
  fs::remove(store.path());
  // A FIFO: refused at once, not waited on for a writer.
  ASSERT_EQ(::mkfifo(store.path().c_str(), 0600), 0);
  EXPECT_THROW((void)store.read(), state::unreadable_error);
  fs::remove(store.path());
  std::ofstream(store.path()) << "not a snapshot";
  try {
    (void)store.read();
    FAIL() << "a corrupt snapshot was read";
  } catch (const state::unreadable_error&) {
    FAIL() << "a corrupt snapshot is reported as unreadable";
  } catch (const state::snapshot_error&) {
  }
}

TEST(SnapshotStore, UnusableDirectoryIsAnError) {
  temp_dir dir;
  std::ofstream(dir.path() + "/file") << "x";
  EXPECT_THROW(state::store(dir.path() + "/file"), state::snapshot_error);
}

pipeline_config clicks_config() {
  pipeline_config c;
  c.name = "clicks";
  c.topics = {"events"};
  c.item.from = item_source::key;
  c.clock = clock_kind::wall;
  heavy_hitters_config h;
  h.window = std::chrono::minutes(5);
  h.epsilon = 0.01;
  h.delta = 0.01;
  h.top_k = 5;
  h.threshold = 0.05;
  c.heavy_hitters = h;
  dedup_config d;
  d.capacity = 10000;
  d.fpr = 0.01;
  c.dedup = d;
  return c;
}

message_view keyed(const std::string& key) {
  message_view m;
  m.has_key = true;
  m.key = key;
  return m;
}

TEST(PipelineState, RestoredPipelineAnswersAsBefore) {
  pipeline original(clicks_config());
  const std::int64_t now = 1'790'000'000'000;
  original.begin_batch();
  for (int i = 0; i < 3000; ++i) {
    const std::string key = fmt::format("u{}", i % 7 == 0 ? 1 : i);  // u1 is heavy
    (void)original.process(keyed(key), now, now);
  }
  (void)original.end_batch(now);

  pipeline restored(clicks_config());
  restored.restore_state(original.save_state());
  EXPECT_EQ(restored.topk(), original.topk());
  for (const std::string item : {"u1", "u2", "u2999", "never"}) {
    EXPECT_EQ(restored.estimate(item), original.estimate(item)) << item;
    EXPECT_EQ(restored.seen(item), original.seen(item)) << item;
  }
  // And it keeps deduplicating: an item seen before the snapshot is a duplicate after.
  restored.begin_batch();
  EXPECT_EQ(restored.process(keyed("u2"), now, now), verdict::duplicate);
  EXPECT_EQ(restored.process(keyed("brand-new"), now, now), verdict::first_seen);
  (void)restored.end_batch(now);
}

// state.compression: auto codes the dedup window's sparse generations (sketch/serialize.h's
// format version 4). Such a state is far smaller, and restores to the same answers as the
// plain one, which it equals once written back plain.
TEST(PipelineState, ACompressedStateRestoresAsThePlainOne) {
  pipeline_config config = clicks_config();
  config.heavy_hitters.reset();  // the Count-Min sketch is written as it is either way
  pipeline original(config);
  const std::int64_t now = 1'790'000'000'000;
  original.begin_batch();
  for (int i = 0; i < 3000; ++i) (void)original.process(keyed(fmt::format("u{}", i)), now, now);
  (void)original.end_batch(now);

  const std::string plain = original.save_state();
  const std::string coded = original.save_state(bit_coding_of(state_compression::automatic));
  EXPECT_EQ(original.save_state(bit_coding_of(state_compression::none)), plain);
  // 3,000 items in a window sized for far more: the dedup generations are nearly empty.
  EXPECT_LT(coded.size(), plain.size() / 2);

  pipeline restored(config);
  restored.restore_state(coded);
  EXPECT_EQ(restored.save_state(), plain);
  for (const std::string item : {"u1", "u2999", "never"}) {
    EXPECT_EQ(restored.seen(item), original.seen(item)) << item;
  }
  restored.begin_batch();
  EXPECT_EQ(restored.process(keyed("u2"), now, now), verdict::duplicate);
  (void)restored.end_batch(now);
}

// A dedup record whose options are not the configuration's is refused before it is read:
// coded, it could describe arrays far larger than itself.
TEST(PipelineState, ACompressedStateOfOtherDedupOptionsIsRefused) {
  pipeline_config bigger = clicks_config();
  bigger.dedup->capacity *= 1000;
  pipeline original(bigger);
  const std::string coded = original.save_state(sketch::bit_coding::golomb);
  // The parameters' text is the configuration's, the dedup record is not.
  std::string state = coded;
  const std::string ours = pipeline::describe_parameters(clicks_config());
  const std::string theirs = pipeline::describe_parameters(bigger);
  ASSERT_EQ(state.compare(8, theirs.size(), theirs), 0);
  state.replace(8, theirs.size(), ours);
  const std::uint64_t length = ours.size();
  std::memcpy(state.data(), &length, sizeof length);
  try {
    pipeline(clicks_config()).restore_state(state);
    ADD_FAILURE() << "restored";
  } catch (const state::snapshot_error& e) {
    EXPECT_NE(std::string(e.what()).find("the structures do not match the parameters"),
              std::string::npos)
        << e.what();
  }
}

// The rotations counter of a restored pipeline counts those of the new run only: a
// snapshot older than the last scrape would otherwise take the counter back, which
// Prometheus reads as a reset and counts all the restored rotations again.
TEST(PipelineState, RestoredRotationsAreNotExportedAgain) {
  const auto rotations = [](const pipeline& p) {
    std::vector<prometheus::MetricFamily> families;
    p.collect(families);
    std::map<std::string, double> by_reason;
    for (const auto& f : families) {
      if (f.name != "sketchd_bloom_rotations_total") continue;
      for (const auto& s : f.metric) by_reason[s.label.at(1).value] = s.counter.value;
    }
    return by_reason;
  };
  pipeline original(clicks_config());
  const std::int64_t now = 1'790'000'000'000;
  original.begin_batch();
  for (int i = 0; i < 10000; ++i) (void)original.process(keyed(fmt::format("u{}", i)), now, now);
  (void)original.end_batch(now);
  original.begin_batch();
  (void)original.end_batch(now + 7'200'000);  // two hours on: rotations by time
  const auto before = rotations(original);
  ASSERT_GT(before.at("capacity"), 0);
  ASSERT_GT(before.at("time"), 0);

  pipeline restored(clicks_config());
  restored.restore_state(original.save_state());
  const auto after = rotations(restored);
  EXPECT_EQ(after.at("capacity"), 0);
  EXPECT_EQ(after.at("time"), 0);
  restored.begin_batch();
  (void)restored.end_batch(now + 4 * 7'200'000);
  EXPECT_GT(rotations(restored).at("time"), 0);
  EXPECT_EQ(rotations(restored).at("capacity"), 0);
}

TEST(PipelineState, OtherParametersAreRefusedWithEachDifference) {
  pipeline original(clicks_config());
  pipeline_config other = clicks_config();
  other.dedup->capacity = 20000;
  other.heavy_hitters->window = std::chrono::minutes(10);
  pipeline different(other);
  try {
    different.restore_state(original.save_state());
    FAIL() << "restored a state of other parameters";
  } catch (const state::mismatch_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("dedup.capacity: 10000 in the snapshot, 20000 in the configuration"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("heavy_hitters.window: 5m in the snapshot, 10m in the configuration"),
              std::string::npos)
        << what;
    // The sizes derived from a changed setting are not listed beside it.
    EXPECT_EQ(what.find("(derived)"), std::string::npos) << what;
  }
}

// dedup.sizing: transmission sizes the window for a lower rate (sized_fpr; in the parameters
// only when set, so that the states made before the key existed still match). Its state
// restores as any other; one made under the memory sizing is refused, naming the key.
TEST(PipelineState, TheTransmissionSizingIsAParameterOfTheState) {
  pipeline_config memory = clicks_config();
  memory.dedup->fpr = 0.001;
  pipeline_config transmission = memory;
  transmission.dedup->sizing = dedup_sizing::transmission;
  const double sized = sized_fpr(*transmission.dedup);
  EXPECT_LT(sized, 0.001);
  EXPECT_EQ(pipeline::describe_parameters(memory).find("sizing"), std::string::npos);
  EXPECT_NE(pipeline::describe_parameters(transmission)
                .find(fmt::format("dedup.sized_fpr (derived): {}\n", sized)),
            std::string::npos);

  pipeline original(transmission);
  const std::int64_t now = 1'790'000'000'000;
  original.begin_batch();
  for (int i = 0; i < 3000; ++i) (void)original.process(keyed(fmt::format("u{}", i)), now, now);
  (void)original.end_batch(now);
  const std::string state = original.save_state(bit_coding_of(state_compression::automatic));
  pipeline restored(transmission);
  restored.restore_state(state);
  EXPECT_EQ(restored.save_state(), original.save_state());
  EXPECT_TRUE(restored.seen("u2999"));

  try {
    pipeline(transmission).restore_state(pipeline(memory).save_state());
    ADD_FAILURE() << "restored a state of the memory sizing";
  } catch (const state::mismatch_error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "dedup.sizing: (not set) in the snapshot, transmission in the configuration"),
              std::string::npos)
        << e.what();
  }
}

pipeline_config events_config() {
  pipeline_config c;
  c.name = "events";
  c.topics = {"events", "other"};
  c.item.from = item_source::json;
  c.item.path = "/user";
  c.clock = clock_kind::event;
  dedup_config d;
  d.window = std::chrono::minutes(10);
  d.capacity = 5000;
  d.fpr = 0.001;
  d.generations = 3;
  c.dedup = d;
  return c;
}

message_view json_user(const std::string& user, std::string& storage) {
  storage = fmt::format(R"({{"user":"{}"}})", user);
  message_view m;
  m.value = storage;
  return m;
}

// The daemon's path: several pipelines and their positions through a store, into new
// pipelines built from the same configuration.
TEST(PipelineState, StoreRoundTripOfSeveralPipelines) {
  temp_dir dir;
  const std::int64_t now = 1'790'000'000'000;
  pipeline clicks(clicks_config());
  pipeline events(events_config());
  clicks.begin_batch();
  events.begin_batch();
  std::string storage;
  for (int i = 0; i < 2000; ++i) {
    (void)clicks.process(keyed(fmt::format("u{}", i % 3 == 0 ? 0 : i)), now + i, now + i);
    (void)events.process(json_user(fmt::format("v{}", i % 500), storage), now + i, now + i);
  }
  (void)clicks.end_batch(now + 2000);
  (void)events.end_batch(now + 2000);

  state::snapshot s;
  s.created_ms = now + 2000;
  s.offsets = {{"events", 0, 1200}, {"events", 1, 800}, {"other", 0, 0}};
  s.pipelines = {{"clicks", clicks.save_state()}, {"events", events.save_state()}};
  (void)state::store(dir.path()).write(s);

  const auto back = state::store(dir.path()).read();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->created_ms, s.created_ms);
  EXPECT_EQ(back->offsets, s.offsets);
  ASSERT_EQ(back->pipelines.size(), 2U);
  pipeline clicks2(clicks_config());
  pipeline events2(events_config());
  clicks2.restore_state(back->pipelines[0].second);
  events2.restore_state(back->pipelines[1].second);
  EXPECT_EQ(clicks2.save_state(), clicks.save_state());
  EXPECT_EQ(events2.save_state(), events.save_state());
  EXPECT_EQ(clicks2.topk(), clicks.topk());
  EXPECT_EQ(events2.seen("v42"), events.seen("v42"));
  EXPECT_EQ(events2.estimate("v42"), std::nullopt);  // no heavy_hitters section
}

// The parameters of a configuration, described without building its structures, are those
// the built pipeline records in its states (a snapshot made before describe_parameters()
// was static still fits), with the derived sizes of the structures as built.
TEST(PipelineState, ParametersAreDescribedWithoutBuildingTheStructures) {
  for (const pipeline_config& c : {clicks_config(), events_config()}) {
    const pipeline built(c);
    EXPECT_EQ(pipeline::describe_parameters(c), built.parameters()) << c.name;
    EXPECT_EQ(
        pipeline::state_mismatch(c.name, pipeline::describe_parameters(c), built.save_state()),
        std::nullopt);
  }
  const pipeline_config c = clicks_config();
  const std::string text = pipeline::describe_parameters(c);
  sketch::rolling_bloom_options o;
  o.window_ms = c.dedup->window.count();
  o.capacity = c.dedup->capacity;
  o.fpr = c.dedup->fpr;
  o.generations = c.dedup->generations;
  const sketch::rolling_bloom filter(o);
  EXPECT_NE(
      text.find(fmt::format("dedup.generation_bits (derived): {}\n", filter.generation(0).bits())),
      std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("dedup.slice_ms (derived): {}\n", filter.slice_ms())),
            std::string::npos)
      << text;
}

TEST(PipelineState, OtherItemOrClockIsAMismatch) {
  pipeline original(clicks_config());
  pipeline_config other = clicks_config();
  other.item.from = item_source::json;
  other.item.path = "/user";
  other.clock = clock_kind::event;
  try {
    pipeline(other).restore_state(original.save_state());
    FAIL() << "restored a state of another extractor";
  } catch (const state::mismatch_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("item.from: key in the snapshot, json in the configuration"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("item.path: (not set) in the snapshot, /user in the configuration"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("clock: wall in the snapshot, event in the configuration"),
              std::string::npos)
        << what;
  }
  // A section on one side only is said once, not as every key of it "(not set)".
  pipeline_config no_dedup = clicks_config();
  no_dedup.dedup.reset();
  try {
    pipeline(no_dedup).restore_state(original.save_state());
    FAIL() << "restored a state with a dedup section into a pipeline without one";
  } catch (const state::mismatch_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "made under other parameters (dedup: present in the snapshot, absent in the "
              "configuration)");
  }
  EXPECT_THROW(
      pipeline(clicks_config(), sketch::kDefaultSeed + 1).restore_state(original.save_state()),
      state::mismatch_error);
}

// clicks_config() with small structures (a few KiB of state), for the corruption tests.
pipeline_config small_config() {
  pipeline_config c = clicks_config();
  c.heavy_hitters->epsilon = 0.1;
  c.heavy_hitters->delta = 0.1;
  c.heavy_hitters->threshold = 0.2;
  c.heavy_hitters->buckets = 4;
  c.dedup->capacity = 200;
  return c;
}

// Every byte of a state is checked: the library's records by their checksums, the
// parameters by comparison, the flags by value. Only the clock (its last 16 bytes) has no
// redundancy, so a flip there is accepted. Small structures and a flip every 13th byte
// (a prime: every position modulo 8 is hit) keep the test fast, also under ASan.
TEST(PipelineState, FlippedBitsAreErrorsNotCrashes) {
  const pipeline_config small = small_config();
  pipeline original(small);
  const std::int64_t now = 1'790'000'000'000;
  original.begin_batch();
  for (int i = 0; i < 500; ++i) (void)original.process(keyed(fmt::format("u{}", i % 50)), now, now);
  (void)original.end_batch(now);
  const std::string saved = original.save_state();
  ASSERT_GT(saved.size(), 16U);
  std::size_t refused = 0;
  std::size_t tried = 0;
  for (std::size_t i = 0; i < saved.size(); i += 13) {
    std::string bad = saved;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
    pipeline p(small);
    ++tried;
    try {
      p.restore_state(bad);
      EXPECT_GE(i, saved.size() - 16) << "a flipped bit at byte " << i << " was accepted";
    } catch (const state::snapshot_error&) {
      ++refused;
    }
  }
  EXPECT_GE(refused + 2, tried);  // at most two probes land in the clock
  EXPECT_GT(tried, 100U);
}

// The clock comes back with the state: the daemon compares it with the machine's, so that
// a snapshot written while the clock was ahead does not hold the windows still.
TEST(PipelineState, TheClockIsRestored) {
  pipeline original(small_config());
  const std::int64_t ahead = 1'790'000'000'000;
  original.begin_batch();
  (void)original.process(keyed("u1"), ahead, ahead);
  (void)original.end_batch(ahead);
  EXPECT_EQ(original.clock_ms(), ahead);
  pipeline back(small_config());
  EXPECT_EQ(back.clock_ms(), 0);
  back.restore_state(original.save_state());
  EXPECT_EQ(back.clock_ms(), ahead);
}

// A truncated state is refused, and a refused state leaves the pipeline with empty
// windows (it releases its structures before it builds the state's: never both at once).
TEST(PipelineState, TruncatedStateIsAnErrorAndChangesNothing) {
  pipeline original(small_config());
  const std::int64_t now = 1'790'000'000'000;
  original.begin_batch();
  for (int i = 0; i < 100; ++i) (void)original.process(keyed(fmt::format("u{}", i % 10)), now, now);
  (void)original.end_batch(now);
  const std::string saved = original.save_state();
  pipeline p(small_config());
  const std::string before = p.save_state();
  for (std::size_t n = 0; n < saved.size(); n += 7) {
    EXPECT_THROW(p.restore_state(std::string_view(saved).substr(0, n)), state::snapshot_error) << n;
  }
  EXPECT_THROW(p.restore_state(saved + "x"), state::snapshot_error);
  EXPECT_EQ(p.save_state(), before);
}

}  // namespace
}  // namespace sketchd
