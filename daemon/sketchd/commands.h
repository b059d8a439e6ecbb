// The commands of the `sketchd` executable. main() only parses the command line and calls
// one of these; each returns the process exit status.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sketchd {

// `sketchd check-config FILE`: prints every problem of the configuration as
// "FILE:LINE:COL: message" on stderr and returns 1, or prints "FILE: ok (N pipelines)"
// on stdout and returns 0. A valid configuration with a state.dir is also checked against
// the snapshot there, as `run` would restore it: what would stop the start is a problem
// ("FILE: message"), what discard_incompatible_snapshot would discard, or a snapshot that
// cannot be read by this user, a note ("FILE: note: …") on stderr.
// `format`: "text" (problems on stderr as FILE:LINE:COL: message) or "json" (one JSON
// object on stdout, for CI systems).
[[nodiscard]] int check_config_command(const std::string& path, const std::string& format = "text");

// `sketchd [run] --config FILE`: runs the daemon until SIGTERM, SIGINT or SIGHUP. Returns 0 after
// a clean shutdown, 129 after a clean shutdown on SIGHUP (for a supervisor to restart it), 1
// when the configuration is invalid, the daemon cannot start, or it stops on a failure (a
// fatal Kafka error, a final forwarding failure, a final snapshot not written; `sketchd run
// --help` lists them).
[[nodiscard]] int run_command(const std::string& config_path);

struct mock_kafka_options {
  int brokers = 1;
  std::vector<std::pair<std::string, int>> topics;  // name, partitions
  bool control = false;                             // read fault-injection commands from stdin
};

// `sketchd mock-kafka`: serves librdkafka's mock cluster on loopback, prints
// "bootstrap: HOST:PORT[,HOST:PORT…]" as the first line on stdout, and returns 0 on
// SIGINT or SIGTERM. With `control`, reads one fault-injection command per line on stdin
// (for tests): `down BROKER`, `up BROKER`, `rtt BROKER MS`, `leader TOPIC PARTITION
// BROKER`, `coordinator group|transaction NAME BROKER`, `errors API CODE[,CODE…]` (the
// next requests of that API number fail with those Kafka error codes), `clear API`;
// answers "ok: COMMAND" on stdout or "error: …" on stderr.
[[nodiscard]] int mock_kafka_command(const mock_kafka_options& options);

}  // namespace sketchd
