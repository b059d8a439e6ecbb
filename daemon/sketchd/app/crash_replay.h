// A restart after a crash forwards nothing twice (docs/SEMANTICS.md, "Crashes"): before the
// input is read, the copies forwarded since the restored snapshot are read back from the
// output topics, from the positions the snapshot recorded to their ends, and the processor
// is told which input messages they came from (processor::forwarded_before()).
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "sketchd/app/snapshotter.h"
#include "sketchd/config/config.h"
#include "sketchd/kafka/source.h"

namespace sketchd {
class processor;
}

namespace sketchd::app {

// Reads back, for every output topic of `proc` whose copies can be told apart
// (processor::replayable_outputs()), what was forwarded since the snapshot of `restored`
// from `topics` (from a restored partition, at or after its position), within `timeout`
// per topic; logs what it found, and what it could not read. Never throws: an output that
// cannot be read back is forwarded again, as it would have been without this step.
void replay_outputs(const config& cfg, const std::string& bootstrap_servers,
                    const restored_state& restored, const std::vector<std::string>& topics,
                    processor& proc, std::chrono::milliseconds timeout);

// A member that crashed forwarded the messages after its last commit; their next owner reads
// them again. For the partitions `taken` over (assigned without a restored position, their
// commit carrying the outputs' positions: processor/output_checkpoints.h), reads every
// replayable output back from those positions and tells `proc` which of their messages at or
// after the committed offset have a copy already, within `timeout` per topic. A partition
// the group never committed (offset kNeverCommitted, read from its start) may have been
// forwarded from by a member that stopped before its first commit: with one among `taken`,
// every partition of the outputs is read from its start, and all of its copies count. Logs
// what it found, and what it could not read. Never throws.
void replay_after_takeover(const config& cfg, const std::string& bootstrap_servers,
                           std::span<const kafka::committed_metadata> taken,
                           const std::vector<std::string>& topics, processor& proc,
                           std::chrono::milliseconds timeout);

}  // namespace sketchd::app
