// The state section: where snapshots are written, how often, and whether windows are filled
// from the log.
#include "sketchd/config/sections.h"

namespace sketchd::config_detail {

state_config read_state(checker& c, const field& f) {
  state_config s;
  const mapping m(c, f,
                  {"dir", "snapshot_interval", "discard_incompatible_snapshot", "fill_from_log"});
  read_optional_text(c, m, "dir", s.dir);
  if (s.dir) s.dir_at = position_of(mark_of(*m.get("dir")));
  m.read("snapshot_interval", s.snapshot_interval,
         durations(c, std::chrono::milliseconds(1), kMaxInterval));
  m.read("discard_incompatible_snapshot", s.discard_incompatible_snapshot, booleans(c));
  m.read("fill_from_log", s.fill_from_log, booleans(c));
  return s;
}

}  // namespace sketchd::config_detail
