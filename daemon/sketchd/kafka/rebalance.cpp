#include "sketchd/kafka/rebalance.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <string_view>
#include <thread>
#include <utility>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/read_ahead.h"
#include "sketchd/kafka/time_lookup.h"
#include "sketchd/util/logging.h"

namespace sketchd::kafka {

// The group's committed offsets of an assignment's partitions, read once for every use.
struct group_commits {
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__STATE;  // not asked
  topic_partition_list_ptr list;
  // The committed offset of `tp` (its err set when the group has none readable), or
  // nullptr when they could not be read.
  [[nodiscard]] const rd_kafka_topic_partition_t* find(const rd_kafka_topic_partition_t& tp) const {
    return err || !list ? nullptr
                        : rd_kafka_topic_partition_list_find(list.get(), tp.topic, tp.partition);
  }
};

namespace {

std::shared_ptr<spdlog::logger> log() { return module_logger("kafka"); }

// A partition whose restored start is behind the group's committed offset.
struct behind_commit {
  int index;  // in partitions
  std::int64_t start;
  std::int64_t committed;
};
// How long the group's committed offsets and the partitions' first and last offsets are
// waited for.
constexpr int kCommittedWaitMs = 10000;

// How long an assignment change made during the close is waited for (apply()).
constexpr std::chrono::seconds kCloseAssignWait{5};

// Whether the consumer's partition.assignment.strategy is cooperative: librdkafka accepts
// only assignors of one protocol, and cooperative-sticky is its only cooperative one.
bool cooperative_strategy(rd_kafka_t* rk) {
  char value[512];
  std::size_t size = sizeof value;
  if (rd_kafka_conf_get(rd_kafka_conf(rk), "partition.assignment.strategy", value, &size) !=
      RD_KAFKA_CONF_OK) {
    return false;
  }
  return std::string_view(value).find("cooperative-sticky") != std::string_view::npos;
}

group_commits read_commits(rd_kafka_t* rk, const rd_kafka_topic_partition_list_t* partitions) {
  group_commits out;
  out.list.reset(rd_kafka_topic_partition_list_new(partitions->cnt));
  for (int i = 0; i < partitions->cnt; ++i) {
    rd_kafka_topic_partition_list_add(out.list.get(), partitions->elems[i].topic,
                                      partitions->elems[i].partition);
  }
  out.err = partitions->cnt == 0 ? RD_KAFKA_RESP_ERR_NO_ERROR
                                 : rd_kafka_committed(rk, out.list.get(), kCommittedWaitMs);
  return out;
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The first and last offsets of the partitions of `known` (index in partitions, offset),
// with one ListOffsets request per leader for each end; the starts outside them are
// dropped: the reading begins where auto.offset.reset says, not at the commit (a log
// truncated below it, or retention past it), and which offset that is is not known here.
void keep_starts_in_range(rd_kafka_t* rk, const rd_kafka_topic_partition_list_t* partitions,
                          std::vector<std::pair<int, std::int64_t>>& known) {
  if (known.empty()) return;
  const auto ends = [&](std::int64_t which) {
    topic_partition_list_ptr list(
        rd_kafka_topic_partition_list_new(static_cast<int>(known.size())));
    for (const auto& [index, offset] : known) {
      // ListOffsets' "timestamps" for the first offset and the next one.
      rd_kafka_topic_partition_list_add(list.get(), partitions->elems[index].topic,
                                        partitions->elems[index].partition)
          ->offset = which;
    }
    if (rd_kafka_offsets_for_times(rk, list.get(), kCommittedWaitMs) != RD_KAFKA_RESP_ERR_NO_ERROR)
      list.reset();
    return list;
  };
  const topic_partition_list_ptr low = ends(RD_KAFKA_OFFSET_BEGINNING);
  const topic_partition_list_ptr high = low ? ends(RD_KAFKA_OFFSET_END) : nullptr;
  std::erase_if(known, [&](const std::pair<int, std::int64_t>& k) {
    if (!high) return true;
    const auto& tp = partitions->elems[k.first];
    const auto* l = rd_kafka_topic_partition_list_find(low.get(), tp.topic, tp.partition);
    const auto* h = rd_kafka_topic_partition_list_find(high.get(), tp.topic, tp.partition);
    if (l == nullptr || h == nullptr || l->err || h->err || l->offset < 0 || h->offset < 0)
      return true;
    return k.second != 0 && (k.second < l->offset || k.second > h->offset);
  });
}

// Starts partition `tp` (at `index` in the assignment) at its restored position `start`,
// or where the group's committed offset `group` (nullptr when unknown) says when the group
// has committed further: then the messages of [start, committed) that the log still holds
// are appended to `behind`, for the owner to decide.
void start_restored(rd_kafka_t* rk, rd_kafka_topic_partition_t& tp, int index, std::int64_t start,
                    const rd_kafka_topic_partition_t* group, std::vector<behind_commit>& behind) {
  tp.offset = start;
  if (group == nullptr || group->err != RD_KAFKA_RESP_ERR_NO_ERROR || group->offset <= start) {
    log()->info("partition {} [{}] starts at offset {} (restored state)", tp.topic, tp.partition,
                start);
    return;
  }
  // The messages to read again are those of [start, committed) the log still holds:
  // retention may have deleted the first ones, and a log truncated below the commit (an
  // unclean leader election) holds none past its end; what is written there later is
  // new, to be processed and forwarded as usual.
  std::int64_t low = 0;
  std::int64_t high = 0;
  const rd_kafka_resp_err_t w =
      query_watermarks(rk, tp.topic, tp.partition, &low, &high, kCommittedWaitMs);
  if (w) {
    tp.offset = group->offset;
    log()->warn(
        "partition {} [{}] starts at the group's committed offset {}, past the snapshot's {}: "
        "its first and last offsets cannot be read ({}), so the messages between are not "
        "read again (their items are not in this instance's windows)",
        tp.topic, tp.partition, group->offset, start, rd_kafka_err2str(w));
    return;
  }
  const std::int64_t from = std::max(start, low);
  const std::int64_t until = std::min(group->offset, high);
  if (from < until) {
    tp.offset = from;
    behind.push_back({index, from, until});
    return;
  }
  tp.offset = std::clamp(group->offset, low, high);
  log()->info(
      "partition {} [{}] starts at offset {}: the log (offsets {} to {}) holds none of the "
      "messages between the snapshot's position {} and the group's committed offset {}",
      tp.topic, tp.partition, tp.offset, low, high, start, group->offset);
}

// The starts of `partitions` from on_assign (a snapshot's positions), where the group has
// committed no further: those partitions start there. The others, whose start is behind
// the group's committed offset (this instance committed past its snapshot before it
// stopped, or another member processed the partition since), are returned with the
// committed offset, for the owner to decide. Should the committed offsets be unreadable,
// every partition starts at its restored position.
//
// Also the starts of the other partitions, as far as the group's committed offsets tell
// them (`known`: index in partitions, offset): a snapshot written before a partition's first
// message is processed holds that position, so that a restart reads what this instance
// processes of it afterwards into the windows again, even when it was committed since.
// `from_earliest`: a partition without a commit is read from its start (offset 0 stands for
// it: at a restart, before the log's first offset is read from the log's first message).
// `want_known`: the caller keeps state positions (a state directory); without it, nor a
// restored start, nothing is asked of the group.
std::vector<behind_commit> start_at_restored_positions(
    rd_kafka_t* rk, rd_kafka_topic_partition_list_t* partitions,
    const std::vector<std::optional<std::int64_t>>& starts, bool want_known, bool from_earliest,
    const group_commits& commits, std::vector<std::pair<int, std::int64_t>>& known) {
  std::vector<behind_commit> behind;
  bool restored = false;
  for (int i = 0; i < partitions->cnt; ++i)
    restored = restored || starts[static_cast<std::size_t>(i)].has_value();
  if ((!restored && !want_known) || partitions->cnt == 0) return behind;
  const rd_kafka_resp_err_t err = commits.err;
  if (err && restored) {
    log()->warn(
        "cannot read the group's committed offsets ({}): the restored partitions start at the "
        "snapshot's positions, and what the group processed after the snapshot is processed "
        "(and forwarded) again",
        rd_kafka_err2str(err));
  } else if (err) {
    log()->warn(
        "cannot read the group's committed offsets ({}): a snapshot written before the first "
        "message of each assigned partition is processed leaves that partition out, and a "
        "restart from it forwards again the items of that partition which were first seen "
        "before it",
        rd_kafka_err2str(err));
  }
  for (int i = 0; i < partitions->cnt; ++i) {
    auto& tp = partitions->elems[i];
    const rd_kafka_topic_partition_t* group = commits.find(tp);
    if (const auto& start = starts[static_cast<std::size_t>(i)]) {
      start_restored(rk, tp, i, *start, group, behind);
      continue;
    }
    if (!want_known || group == nullptr || group->err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    if (group->offset >= 0) {
      known.emplace_back(i, group->offset);
    } else if (from_earliest) {
      known.emplace_back(i, 0);  // any offset up to the log's first reads from there
    }
  }
  keep_starts_in_range(rk, partitions, known);
  return behind;
}

}  // namespace

rebalance_handler::rebalance_handler(rd_kafka_t* consumer, const std::vector<std::string>& topics,
                                     bool from_earliest, read_ahead& ahead,
                                     std::function<std::unique_ptr<time_lookup>()> make_lookup)
    : consumer_(consumer),
      cooperative_(cooperative_strategy(consumer)),
      topics_(topics),
      from_earliest_(from_earliest),
      ahead_(ahead),
      make_lookup_(std::move(make_lookup)) {}

rebalance_handler::~rebalance_handler() = default;

std::vector<topic_partition> rebalance_handler::indexed(
    const rd_kafka_topic_partition_list_t* partitions) const {
  std::vector<topic_partition> list;
  for (int i = 0; i < partitions->cnt; ++i) {
    const auto& tp = partitions->elems[i];
    std::size_t index = 0;
    while (index < topics_.size() && topics_[index] != tp.topic) ++index;
    list.push_back({index, tp.partition});
  }
  return list;
}

void rebalance_handler::on_rebalance(rd_kafka_resp_err_t err,
                                     rd_kafka_topic_partition_list_t* partitions) {
  // From the configuration, not rd_kafka_rebalance_protocol(): that call waits, unbounded,
  // for the group's thread, as the assignment calls do (apply()).
  const bool cooperative = cooperative_;
  const bool assigning = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
  const std::vector<topic_partition> list = indexed(partitions);
  bool restored = false;
  if (assigning) {
    restored = assign(partitions, list);
  } else {
    revoke(partitions, list);
  }
  apply(assigning, cooperative, partitions);
  // Offsets can be stored for the partitions only now: before, librdkafka refuses them
  // (not assigned), and the assignment resets what was stored.
  if (restored && hooks_.on_assigned) ahead_.run_on_owner([&] { hooks_.on_assigned(); });
}

void rebalance_handler::revoke(rd_kafka_topic_partition_list_t* partitions,
                               std::span<const topic_partition> list) {
  // What is not handed over yet is never processed here: the new owner reads it.
  ahead_.drop(list);
  {
    const std::lock_guard lock(committed_mutex_);
    for (int i = 0; i < partitions->cnt; ++i)
      committed_.erase({partitions->elems[i].topic, partitions->elems[i].partition});
  }
  // Offsets stored so far are committed before the partitions go to another member. When
  // closing, close() has just committed them: only what the revocation stored since is
  // committed, without waiting here (close() waits for it, within its bound). A lost
  // assignment (the session expired: the group has moved on without this member) cannot
  // commit, and the coordinator may be what is unreachable: no wait for it.
  const bool lost = rd_kafka_assignment_lost(consumer_) == 1;
  topic_partition_list_ptr to_commit;
  ahead_.run_on_owner([&] {
    if (hooks_.on_revoke) hooks_.on_revoke(list);
    if (hooks_.revocation_commit) to_commit.reset(hooks_.revocation_commit(list, closing_));
  });
  if (lost) {
    log()->warn(
        "assignment lost (the group's session expired, or this member left it after "
        "max.poll.interval.ms without a poll): {} partition(s) revoked "
        "without a commit; their next owner reads them from the last commit",
        partitions->cnt);
  }
  if (lost || !to_commit) return;
  const rd_kafka_resp_err_t c = rd_kafka_commit(consumer_, to_commit.get(), closing_ ? 1 : 0);
  if (c && c != RD_KAFKA_RESP_ERR__NO_OFFSET) {
    log()->warn("commit before revocation failed: {}", rd_kafka_err2str(c));
  }
}

bool rebalance_handler::assign(rd_kafka_topic_partition_list_t* partitions,
                               std::span<const topic_partition> list) {
  assigned_once_ = true;
  std::vector<std::optional<std::int64_t>> starts(list.size());
  std::vector<std::optional<std::int64_t>> fill_since(list.size());
  std::vector<std::uint32_t> counts;
  if (hooks_.on_partition_counts)
    counts = partition_counts(consumer_, topics_, std::chrono::seconds(5));
  // Slow reads for the owner to use, on this thread: the owner keeps processing meanwhile.
  if (hooks_.on_assignment_prepare) hooks_.on_assignment_prepare(list);
  ahead_.run_on_owner([&] {
    if (hooks_.on_partition_counts) hooks_.on_partition_counts(counts);
    if (hooks_.on_assignment) hooks_.on_assignment();
    if (hooks_.on_assign) {
      for (std::size_t i = 0; i < list.size(); ++i) starts[i] = hooks_.on_assign(list[i]);
    }
    if (hooks_.on_fill_since) {
      for (std::size_t i = 0; i < list.size(); ++i)
        if (!starts[i]) fill_since[i] = hooks_.on_fill_since(list[i]);
    }
  });
  const bool restored = std::any_of(starts.begin(), starts.end(),
                                    [](const auto& start) { return start.has_value(); });
  const bool asked_fill = std::any_of(fill_since.begin(), fill_since.end(),
                                      [](const auto& since) { return since.has_value(); });
  // The group's committed offsets, read once, when a start, a fill or a takeover needs them.
  group_commits commits;
  if (restored || asked_fill || hooks_.on_start_known || hooks_.on_taken_over) {
    commits = read_commits(consumer_, partitions);
  }
  {
    const std::lock_guard lock(committed_mutex_);
    for (int i = 0; i < partitions->cnt; ++i) {
      const rd_kafka_topic_partition_t* c = commits.find(partitions->elems[i]);
      if (c != nullptr && c->err == RD_KAFKA_RESP_ERR_NO_ERROR && c->offset >= 0)
        committed_[{c->topic, c->partition}] = c->offset;
    }
  }
  std::vector<std::pair<int, std::int64_t>> known;
  const std::vector<behind_commit> behind = start_at_restored_positions(
      consumer_, partitions, starts, static_cast<bool>(hooks_.on_start_known), from_earliest_,
      commits, known);
  const std::vector<fill_outcome> fills = fill_from_log(partitions, fill_since, commits);
  // Only with something to tell: the owner may be away (a hold), and the rebalance would
  // wait for it.
  if (!known.empty() || asked_fill) {
    ahead_.run_on_owner([&] {
      if (hooks_.on_start_known) {
        for (const auto& [index, offset] : known)
          hooks_.on_start_known(list[static_cast<std::size_t>(index)], offset);
      }
      if (hooks_.on_filled) {
        for (std::size_t i = 0; i < list.size(); ++i)
          if (fill_since[i]) hooks_.on_filled(list[i], fills[i]);
      }
    });
  }
  tell_taken_over(partitions, list, starts, commits);
  if (behind.empty()) return restored;
  std::vector<bool> start_behind(behind.size(), false);
  ahead_.run_on_owner([&] {
    if (!hooks_.on_start_behind_commit) return;
    for (std::size_t j = 0; j < behind.size(); ++j) {
      start_behind[j] = hooks_.on_start_behind_commit(
          list[static_cast<std::size_t>(behind[j].index)], behind[j].start, behind[j].committed);
    }
  });
  for (std::size_t j = 0; j < behind.size(); ++j) {
    if (!start_behind[j]) partitions->elems[behind[j].index].offset = behind[j].committed;
  }
  return restored;
}

void rebalance_handler::tell_taken_over(const rd_kafka_topic_partition_list_t* partitions,
                                        std::span<const topic_partition> list,
                                        const std::vector<std::optional<std::int64_t>>& starts,
                                        const group_commits& commits) {
  if (!hooks_.on_taken_over) return;
  std::vector<int> asked;
  for (int i = 0; i < partitions->cnt; ++i)
    if (!starts[static_cast<std::size_t>(i)]) asked.push_back(i);
  if (asked.empty()) return;
  if (commits.err) {
    log()->warn(
        "cannot read the group's committed offsets ({}): should a member have crashed, what it "
        "forwarded from the {} partition(s) just assigned after its last commit is forwarded "
        "again",
        rd_kafka_err2str(commits.err), asked.size());
    return;
  }
  std::vector<committed_metadata> taken;
  for (const int i : asked) {
    const rd_kafka_topic_partition_t* c = commits.find(partitions->elems[i]);
    if (c == nullptr || c->err) continue;
    // Never committed and read from its start: a member may have forwarded from it and
    // stopped (or failed to commit before it was revoked: a commit during a rebalance can
    // be refused) before its first commit.
    if (c->offset < 0 && from_earliest_) {
      taken.push_back({list[static_cast<std::size_t>(i)], committed_metadata::kNeverCommitted, {}});
      continue;
    }
    if (c->offset < 0 || c->metadata == nullptr || c->metadata_size == 0) continue;
    taken.push_back({list[static_cast<std::size_t>(i)], c->offset,
                     std::string(static_cast<const char*>(c->metadata), c->metadata_size)});
  }
  if (taken.empty()) return;
  ahead_.run_on_owner([&] { hooks_.on_taken_over(taken); });
}

std::vector<fill_outcome> rebalance_handler::fill_from_log(
    rd_kafka_topic_partition_list_t* partitions,
    const std::vector<std::optional<std::int64_t>>& since, const group_commits& commits) {
  std::vector<fill_outcome> out(since.size());
  std::vector<int> asked;
  for (int i = 0; i < partitions->cnt; ++i)
    if (since[static_cast<std::size_t>(i)]) asked.push_back(i);
  if (asked.empty()) return out;
  if (from_earliest_ && !commits.err) {
    // A partition the group never committed is read from its start, every message
    // processed: nothing to fill, and while its log still starts at offset 0 its windows
    // miss nothing whatever the time asked. Such partitions are settled by their
    // watermarks alone, without the lookup: on a broker that cannot answer by time (the
    // mock cluster) that is a search by reading, which made every fresh start of a group
    // seconds slower.
    std::erase_if(asked, [&](int i) {
      const rd_kafka_topic_partition_t& tp = partitions->elems[i];
      const rd_kafka_topic_partition_t* group = commits.find(tp);
      if (group != nullptr && group->err == RD_KAFKA_RESP_ERR_NO_ERROR && group->offset >= 0)
        return false;
      std::int64_t low = 0;
      std::int64_t high = 0;
      if (query_watermarks(consumer_, tp.topic, tp.partition, &low, &high, kCommittedWaitMs) !=
              RD_KAFKA_RESP_ERR_NO_ERROR ||
          low != 0)
        return false;
      out[static_cast<std::size_t>(i)].complete = true;
      return true;
    });
    if (asked.empty()) return out;
  }
  std::vector<time_query> queries;
  for (const int i : asked) {
    const auto& tp = partitions->elems[i];
    queries.push_back({tp.topic, tp.partition, *since[static_cast<std::size_t>(i)]});
  }
  if (commits.err) {
    log()->warn(
        "cannot read the group's committed offsets ({}): the windows of {} partition(s) are "
        "not filled from the log",
        rd_kafka_err2str(commits.err), asked.size());
    return out;
  }
  // A client of its own for this assignment's lookups, released with them.
  std::unique_ptr<time_lookup> lookup;
  try {
    lookup = make_lookup_();
  } catch (const std::exception& e) {
    log()->warn(
        "cannot look up where the logs reach a time ({}): the windows of {} partition(s) are "
        "not filled from the log",
        e.what(), asked.size());
    return out;
  }
  const std::vector<time_answer> answers = lookup->find(
      queries, std::chrono::steady_clock::now() + std::chrono::milliseconds(kCommittedWaitMs));
  for (std::size_t j = 0; j < asked.size(); ++j) {
    auto& tp = partitions->elems[asked[j]];
    out[static_cast<std::size_t>(asked[j])] = fill_one(tp, commits.find(tp), answers[j]);
  }
  return out;
}

fill_outcome rebalance_handler::fill_one(rd_kafka_topic_partition_t& tp,
                                         const rd_kafka_topic_partition_t* group,
                                         const time_answer& answer) {
  fill_outcome out;
  std::int64_t low = 0;
  std::int64_t high = 0;
  if (!answer.ok() ||
      query_watermarks(consumer_, tp.topic, tp.partition, &low, &high, kCommittedWaitMs)) {
    log()->warn(
        "partition {} [{}]: where its log reaches the windows' start cannot be found ({}): its "
        "windows are not filled from the log",
        tp.topic, tp.partition, answer.ok() ? "its first and last offsets" : answer.error->what());
    return out;
  }
  // The log holds every message since the time: nothing was ever deleted from it, or a
  // message before the answer is older (the answer is past the log's first offset).
  out.complete = low == 0 || answer.offset > low;
  const bool committed =
      group != nullptr && group->err == RD_KAFKA_RESP_ERR_NO_ERROR && group->offset >= 0;
  if (!committed && from_earliest_) return out;  // read from its start, every message processed
  const std::int64_t from = std::max(answer.offset, low);
  const std::int64_t until = std::min(committed ? group->offset : high, high);
  if (from >= until) return out;
  tp.offset = from;
  out.filled = true;
  out.from = from;
  out.until = until;
  log()->info(
      "partition {} [{}]: its windows are filled from the log: offsets {} to {}, {} message(s) "
      "of the last {} s{}, go into them without being forwarded",
      tp.topic, tp.partition, from, until, until - from, (wall_ms() - answer.timestamp_ms) / 1000,
      out.complete ? "" : " (the log no longer holds the older ones)");
  return out;
}

void rebalance_handler::apply(bool assign, bool cooperative,
                              rd_kafka_topic_partition_list_t* partitions) {
  // With a pause or a hold in force, what is assigned is paused too, before a release
  // can resume the assignment without it.
  std::unique_lock pause_lock(pause_mutex_);
  // The call, with its own copy of the partitions: during the close it may outlive this one.
  auto change = [rk = consumer_, assign, cooperative,
                 owned = topic_partition_list_ptr(rd_kafka_topic_partition_list_copy(partitions))] {
    if (cooperative) {
      const error_ptr e(assign ? rd_kafka_incremental_assign(rk, owned.get())
                               : rd_kafka_incremental_unassign(rk, owned.get()));
      if (e) {
        log()->error("incremental {} failed: {}", assign ? "assign" : "unassign",
                     rd_kafka_error_string(e.get()));
      }
    } else {
      const rd_kafka_resp_err_t e = rd_kafka_assign(rk, assign ? owned.get() : nullptr);
      if (e) log()->error("assign failed: {}", rd_kafka_err2str(e));
    }
  };
  if (!closing_) {
    change();
  } else {
    // librdkafka's assignment calls wait, without a bound, for the group's thread to
    // answer. Once the close has begun, the group may terminate meanwhile; before librdkafka
    // 2.9 its termination empties the queue the call's request waits in, and the call never
    // returns (librdkafka issues 4884 and 4970; Debian 12 ships 2.0.2). During the close the
    // call runs on a thread of its own, waited for kCloseAssignWait at most; one left waiting
    // keeps the handle alive to the process's exit (call_abandoned()).
    std::packaged_task<void()> task(std::move(change));
    std::future<void> done = task.get_future();
    std::thread(std::move(task)).detach();
    if (done.wait_for(kCloseAssignWait) != std::future_status::ready) {
      call_abandoned_ = true;
      log()->warn(
          "closing: librdkafka did not answer the {} of {} partition(s) within {} s (its group "
          "had terminated meanwhile); the consumer is left to the process's exit",
          assign ? "assignment" : "revocation", partitions->cnt, kCloseAssignWait.count());
    }
  }
  if (assign && (paused_ || ahead_.held())) rd_kafka_pause_partitions(consumer_, partitions);
  pause_lock.unlock();
  // The assignment after this change (an incremental unassign completes asynchronously,
  // so it is computed here rather than read back).
  const auto count = static_cast<std::size_t>(partitions->cnt);
  if (cooperative) {
    assigned_ =
        assign ? assigned_.load() + count : assigned_.load() - std::min(assigned_.load(), count);
  } else {
    assigned_ = assign ? count : 0;
  }
  log()->info("{} {} partition(s) ({} rebalance); {} assigned now", assign ? "assigned" : "revoked",
              partitions->cnt, cooperative ? "cooperative" : "eager", assigned_.load());
}

std::optional<std::int64_t> rebalance_handler::committed_at_assignment(
    std::string_view topic, std::int32_t partition) const {
  const std::lock_guard lock(committed_mutex_);
  const auto it = committed_.find(std::make_pair(std::string(topic), partition));
  return it == committed_.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
}

void rebalance_handler::pause_assignment(bool pause) {
  rd_kafka_topic_partition_list_t* assignment = nullptr;
  if (rd_kafka_assignment(consumer_, &assignment) == RD_KAFKA_RESP_ERR_NO_ERROR && assignment) {
    topic_partition_list_ptr owned(assignment);
    if (pause) {
      rd_kafka_pause_partitions(consumer_, assignment);
    } else {
      rd_kafka_resume_partitions(consumer_, assignment);
    }
  }
}

void rebalance_handler::pause() {
  if (paused_) return;
  const std::lock_guard lock(pause_mutex_);
  paused_ = true;  // read by the rebalance callback, on the poller thread
  if (!ahead_.held()) pause_assignment(true);
}

void rebalance_handler::hold() {
  if (ahead_.held() || paused_) return;
  const std::lock_guard lock(pause_mutex_);
  pause_assignment(true);
  ahead_.set_held(true);
}

void rebalance_handler::release(bool resume) {
  if (!ahead_.held()) return;
  const std::lock_guard lock(pause_mutex_);
  ahead_.set_held(false);
  if (!paused_ && resume) pause_assignment(false);
}

}  // namespace sketchd::kafka
