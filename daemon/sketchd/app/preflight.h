// Checks made before anything is started, and what the start derives from the
// configuration alone.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "sketchd/config/config.h"

namespace sketchd::app {

// False, with a critical line, when the pipelines' sketches alone cannot fit in the memory
// this process may use: the start would otherwise end in the OOM killer, silently, after
// zeroing gigabytes. With state.dir, a snapshot holds the state's encoding beside the
// structures while it is written, and a restore the snapshot's while it builds them: twice
// the sketches then; the generator's Zipf table is not part of a snapshot.
[[nodiscard]] bool sketches_fit_in_memory(const config& cfg);

// Every topic the daemon reads or writes, for the embedded broker to create.
[[nodiscard]] std::set<std::string> topics_of(const config& cfg);

// The topics of all pipelines, each once, in the order the configuration names them: the
// source's topics (kafka::record::topic_index indexes them).
[[nodiscard]] std::vector<std::string> input_topics(const config& cfg);

}  // namespace sketchd::app
