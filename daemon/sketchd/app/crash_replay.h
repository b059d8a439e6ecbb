// A restart after a crash forwards nothing twice (docs/SEMANTICS.md, "Crashes"): before the
// input is read, the copies forwarded since the restored snapshot are read back from the
// output topics, from the positions the snapshot recorded to their ends, and the processor
// is told which input messages they came from (processor::forwarded_before()).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "sketchd/app/snapshotter.h"
#include "sketchd/config/config.h"

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

}  // namespace sketchd::app
