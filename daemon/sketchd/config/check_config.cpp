// `sketchd check-config FILE`.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "sketchd/commands.h"
#include "sketchd/config/config.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/state/snapshot.h"
#include "sketchd/util/json.h"
#include "sketchd/util/logging.h"

namespace sketchd {
namespace {

// Of each pipeline's state, the start that holds its parameters (a few hundred bytes).
constexpr std::uint64_t kParametersBytes = 1 << 20;

// What the disk says of the configuration: problems (run would not start) and notes, each
// at the position of the key it is about, as the file's own errors.
struct findings {
  std::string file;
  std::vector<config_error> problems;
  std::vector<config_error> notes;

  void problem(source_position at, std::string message) {
    problems.push_back(config_error{file, at.line, at.column, std::move(message)});
  }
  void note(source_position at, std::string message) {
    notes.push_back(config_error{file, at.line, at.column, std::move(message)});
  }
};

// Whether `run` could create state.dir and write in it. Not a directory is a problem; what
// this user may not do is a note, since the daemon may run as another user. False when
// there can be no snapshot to check.
bool check_state_dir(const std::string& dir, source_position at, findings& found) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path existing = fs::absolute(fs::path(dir), ec);
  if (ec) return true;
  bool created = false;  // `existing` is an ancestor that run would create state.dir in
  for (;;) {
    const fs::file_status st = fs::status(existing, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
      return true;  // cannot tell (a parent this user may not search)
    if (fs::exists(st)) break;
    if (fs::is_symlink(fs::symlink_status(existing, ec))) {
      found.problem(at, fmt::format("state.dir: {} is a symbolic link to nothing: sketchd would "
                                    "not start",
                                    existing.string()));
      return false;
    }
    if (!existing.has_relative_path()) return true;
    existing = existing.parent_path();
    created = true;
  }
  if (!fs::is_directory(existing, ec)) {
    found.problem(at, fmt::format("state.dir: {} is not a directory: sketchd would not start",
                                  existing.string()));
    return false;
  }
  if (::access(existing.c_str(), W_OK | X_OK) == 0) return true;
  const std::string why = std::system_category().message(errno);
  found.note(
      at, created
              ? fmt::format("note: state.dir: {} does not exist, and this user cannot create it in "
                            "{} ({}): sketchd run as this user would not start",
                            dir, existing.string(), why)
              : fmt::format("note: state.dir: this user cannot write in {} ({}): sketchd run as "
                            "this user would not start",
                            dir, why));
  return true;
}

// What `run` would find in the snapshot of state.dir with this configuration: problems
// that would stop the start, and notes (what discard_incompatible_snapshot would discard,
// a snapshot this user cannot read). Reads the file whole, for its checksum, but keeps only
// the parameters of each pipeline's state; takes no lock, so the daemon may be running.
void check_snapshot(const config& cfg, findings& found) {
  if (!cfg.state.dir || cfg.state.dir->empty()) return;
  const source_position dir_at = cfg.state.dir_at;
  if (!check_state_dir(*cfg.state.dir, dir_at, found)) return;
  const std::string file = fmt::format("{}/{}", *cfg.state.dir, state::store::kFileName);
  const bool discard = cfg.state.discard_incompatible_snapshot;
  std::optional<state::snapshot> snap;
  try {
    snap = state::read_snapshot_file(file, kParametersBytes);
  } catch (const state::not_a_file_error& e) {
    // Stops `run` whichever user runs it; a file this user cannot read may be readable by
    // the daemon's user (below).
    found.problem(dir_at, fmt::format("{}: sketchd would not start (the snapshot is kept: fix "
                                      "the cause, then start again)",
                                      e.what()));
    return;
  } catch (const state::unreadable_error& e) {
    found.note(
        dir_at,
        fmt::format("note: the snapshot was not checked against this configuration: {}", e.what()));
    return;
  } catch (const std::bad_alloc&) {
    found.note(
        dir_at,
        fmt::format(
            "note: the snapshot {} was not checked against this configuration: not enough memory",
            file));
    return;
  } catch (const state::snapshot_error& e) {
    if (discard) {
      found.note(
          dir_at,
          fmt::format(
              "note: cannot use the snapshot ({}): sketchd will set it aside and start every "
              "pipeline with empty windows (state.discard_incompatible_snapshot)",
              e.what()));
    } else {
      found.problem(
          dir_at,
          fmt::format(
              "cannot use the snapshot ({}): sketchd would not start (state.discard_incompatible_"
              "snapshot: true sets it aside and starts every pipeline with empty windows)",
              e.what()));
    }
    return;
  }
  if (!snap) return;
  for (const auto& [name, state] : snap->pipelines) {
    std::size_t i = 0;
    while (i < cfg.pipelines.size() && cfg.pipelines[i].name != name) ++i;
    if (i == cfg.pipelines.size()) continue;  // dropped at start, with a warning
    std::optional<std::string> mismatch;
    try {
      mismatch =
          pipeline::state_mismatch(name, pipeline::describe_parameters(cfg.pipelines[i]), state);
    } catch (const std::exception& e) {
      mismatch = e.what();
    }
    if (!mismatch) continue;
    if (discard) {
      found.note(cfg.pipelines[i].at, fmt::format("note: pipelines[{}] ({}): does not fit the "
                                                  "snapshot {}, {}: it will start with empty "
                                                  "windows (state.discard_incompatible_snapshot)",
                                                  i, name, file, *mismatch));
    } else {
      found.problem(
          cfg.pipelines[i].at,
          fmt::format(
              "pipelines[{}] ({}): does not fit the snapshot {}, {}: sketchd would not start "
              "(state.discard_incompatible_snapshot: true starts this pipeline with empty windows)",
              i, name, file, *mismatch));
    }
  }
}

// The verdict as one JSON object (check-config --format json).
std::string verdict_json(const std::string& path, const load_result& result,
                         const findings& found) {
  using nlohmann::ordered_json;
  ordered_json problems = ordered_json::array();
  const auto add = [&](const config_error& e, std::string_view severity) {
    std::string_view message = e.message;
    if (severity == "note" && message.starts_with("note: ")) message.remove_prefix(6);
    ordered_json p;
    p["severity"] = severity;
    p["file"] = e.file;
    p["line"] = e.line > 0 ? ordered_json(e.line) : ordered_json(nullptr);
    p["column"] = e.line > 0 ? ordered_json(e.column) : ordered_json(nullptr);
    p["message"] = message;
    problems.push_back(std::move(p));
  };
  for (const config_error& e : result.errors) add(e, "error");
  for (const config_error& e : found.problems) add(e, "error");
  for (const config_error& e : found.notes) add(e, "note");
  ordered_json o;
  o["file"] = path;
  o["valid"] = result.value.has_value() && found.problems.empty();
  o["pipelines"] =
      result.value ? ordered_json(result.value->pipelines.size()) : ordered_json(nullptr);
  o["problems"] = std::move(problems);
  return json::dump(o);
}

}  // namespace

int check_config_command(const std::string& path, const std::string& format) {
  const load_result result = load_config_file(path);
  findings found{path, {}, {}};
  if (result.value) check_snapshot(*result.value, found);
  const bool valid = result.value && found.problems.empty();
  if (format == "json") {
    fmt::print("{}\n", verdict_json(path, result, found));
    return valid ? 0 : 1;
  }
  for (const config_error& e : result.errors) print_stderr(e.to_string() + "\n");
  for (const config_error& p : found.problems) print_stderr(p.to_string() + "\n");
  for (const config_error& n : found.notes) print_stderr(n.to_string() + "\n");
  if (!valid) return 1;
  const std::size_t n = result.value->pipelines.size();
  fmt::print("{}: ok ({} pipeline{})\n", path, n, n == 1 ? "" : "s");
  return 0;
}

}  // namespace sketchd
