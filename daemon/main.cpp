// The `sketchd` command line: parses the arguments and runs one command of
// sketchd/commands.h. Bad arguments are a one-line error and exit status 2.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketchd/commands.h"
#include "sketchd/config/config.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/util/build_info.h"
#include "sketchd/util/logging.h"

namespace {

constexpr int kUsageError = 2;
constexpr int kMaxPartitions = sketchd::kafka::mock_cluster::kMaxPartitions;
// The most brokers mock-kafka --brokers takes: the same as embedded.brokers in the
// configuration.
constexpr int kMaxMockBrokers = sketchd::embedded_kafka_config::kMaxBrokers;

constexpr const char* kDescription =
    "sketchd: stream analytics on Kafka.\n"
    "Each pipeline takes one item from every event of its topics (the message key or value,\n"
    "a JSON field, a header) and keeps the heavy hitters of a sliding window (rolling\n"
    "Count-Min sketch and top-k) and/or deduplicates first-seen items (rolling Bloom filter),\n"
    "exported as Prometheus metrics and over an HTTP API.";

constexpr const char* kExamples =
    "\nExamples:\n"
    "  sketchd check-config config/example.yaml   report every problem of a configuration\n"
    "  sketchd run --config sketchd.yaml          run the daemon (same as: sketchd --config …)\n"
    "  sketchd mock-kafka --topic events:8        a local Kafka-protocol cluster for tests\n"
    "\n"
    "config/example.yaml documents every configuration key.";

// "NAME" or "NAME:PARTITIONS"; the error message, or nullopt when `text` is valid.
[[nodiscard]] std::optional<std::string> parse_topic_argument(std::string_view text,
                                                              std::pair<std::string, int>& out) {
  const std::size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  if (!sketchd::is_valid_topic_name(name)) {
    return fmt::format(
        "\"{}\" is not a valid topic name (1 to 249 letters, digits, \".\", \"_\" "
        "or \"-\")",
        name);
  }
  int partitions = sketchd::embedded_kafka_config{}.partitions;
  if (colon != std::string_view::npos) {
    const std::string_view count = text.substr(colon + 1);
    const auto [ptr, ec] = std::from_chars(count.data(), count.data() + count.size(), partitions);
    if (count.empty() || ec != std::errc() || ptr != count.data() + count.size() ||
        partitions < 1 || partitions > kMaxPartitions) {
      return fmt::format("partitions must be a number in [1, {}], got \"{}\"", kMaxPartitions,
                         count);
    }
  }
  out = {std::string(name), partitions};
  return std::nullopt;
}

// A one-line error; `command` is the subcommand whose help to point at, if any.
int usage_error(std::string_view message, const CLI::App* command = nullptr) {
  const std::string help =
      command == nullptr ? "sketchd --help" : fmt::format("sketchd {} --help", command->get_name());
  sketchd::print_stderr(fmt::format("sketchd: {} (see {})\n", message, help));
  return kUsageError;
}

// What the command line gives, filled by CLI11 as it parses.
struct arguments {
  std::string config_path;      // sketchd --config FILE
  std::string run_config_path;  // sketchd run --config FILE
  std::string check_path;
  std::string check_format = "text";
  sketchd::mock_kafka_options mock_options;
  std::vector<std::string> topic_arguments;  // mock-kafka --topic, checked after parsing
};

struct subcommands {
  CLI::App* run = nullptr;
  CLI::App* check = nullptr;
  CLI::App* mock = nullptr;
};

CLI::App* add_run(CLI::App& app, arguments& args) {
  CLI::App* run = app.add_subcommand("run", "Run the daemon (the default with --config)");
  run->footer(
      "\nConsumes the pipelines' topics, serves /metrics, /healthz, /readyz and /api/v1/… on\n"
      "http.listen, and runs until SIGINT, SIGTERM or SIGHUP, each a clean stop (there is no\n"
      "reload; a third signal during the stop exits at once, with status 1, without finishing\n"
      "the stop). An invalid configuration is reported as with check-config, and\n"
      "the daemon does not start (exit status 1). Exit status 0 after a clean stop; 129 after\n"
      "a clean stop on SIGHUP, so that a supervisor restarting on failure starts it again\n"
      "with the configuration as it is now (the reload SIGHUP asks for); 1 when it\n"
      "cannot start (a snapshot it cannot use, state.dir in use by another sketchd, sketches\n"
      "larger than the memory, http.listen unavailable), after a fatal Kafka error, when the\n"
      "generator stops, after a final forwarding failure (which stopped consumption), or when\n"
      "the final snapshot of state.dir could not be written (the log says why each time).");
  run->add_option("-c,--config", args.run_config_path, "The YAML configuration (required)")
      ->type_name("FILE");
  return run;
}

CLI::App* add_check(CLI::App& app, arguments& args) {
  CLI::App* check =
      app.add_subcommand("check-config", "Check a configuration file without running it");
  check->footer(
      "\nPrints every problem on stderr as FILE:LINE:COL: message and exits 1, or prints\n"
      "\"FILE: ok (N pipelines)\" and exits 0. Environment variables are substituted as when\n"
      "running. With state.dir set, the directory and the snapshot there are checked too, as\n"
      "run would use them: a file in the directory's place, or a pipeline the snapshot does\n"
      "not fit, is a problem (the latter a note with state.discard_incompatible_snapshot:\n"
      "true); a directory this user could not create or write in is a note.");
  check->add_option("FILE", args.check_path, "The YAML configuration to check")
      ->required()
      ->type_name("");
  check
      ->add_option("--format", args.check_format,
                   "text: problems on stderr, as below. json: one object on stdout, for CI "
                   "systems: {\"file\", \"valid\", \"pipelines\", \"problems\": [{\"severity\": "
                   "\"error\" or \"note\", \"file\", \"line\", \"column\", \"message\"}]} (line "
                   "and column null for a problem of the whole file); the same exit status")
      ->check(CLI::IsMember({"text", "json"}))
      ->default_str("text")
      ->type_name("FORMAT");
  return check;
}

CLI::App* add_mock(CLI::App& app, arguments& args) {
  CLI::App* mock =
      app.add_subcommand("mock-kafka", "Serve a local Kafka-protocol cluster, for tests and demos");
  mock->footer(
      "\nlibrdkafka's mock cluster on loopback, in memory: each partition keeps at most 5 MiB\n"
      "and drops the oldest messages beyond that. The first line on stdout is\n"
      "\"bootstrap: HOST:PORT[,HOST:PORT…]\", the value for kafka.brokers. Serves until\n"
      "SIGINT or SIGTERM.");
  mock->add_option("--brokers", args.mock_options.brokers,
                   fmt::format("Number of brokers, 1 to {}", kMaxMockBrokers))
      ->type_name("N")
      ->check(CLI::Range(1, kMaxMockBrokers).description(""))
      ->capture_default_str();
  mock->add_option("--topic", args.topic_arguments,
                   fmt::format("Create this topic at start, with PARTITIONS partitions (default "
                               "{}, at most {}); repeat for more topics",
                               sketchd::embedded_kafka_config{}.partitions, kMaxPartitions))
      ->type_name("NAME[:PARTITIONS]")
      ->check(CLI::Validator(
          [](std::string& text) {
            std::pair<std::string, int> topic;
            return parse_topic_argument(text, topic).value_or(std::string());
          },
          ""));
  mock->add_flag(
      "--control", args.mock_options.control,
      "Read fault-injection commands on stdin, one per line: down BROKER, up BROKER, rtt BROKER "
      "MS, "
      "leader TOPIC PARTITION BROKER, coordinator group|transaction NAME BROKER, errors API "
      "CODE[,CODE...] (the next requests of Kafka API number API fail with those error "
      "codes), clear API; each is answered \"ok: COMMAND\" on stdout");
  return mock;
}

// mock-kafka, once its --topic arguments are checked.
int mock_kafka(arguments& args, const CLI::App* mock) {
  for (const std::string& text : args.topic_arguments) {
    std::pair<std::string, int> topic;
    if (const auto error = parse_topic_argument(text, topic)) {
      return usage_error(fmt::format("mock-kafka: --topic: {}", *error), mock);
    }
    for (const auto& [name, partitions] : args.mock_options.topics) {
      if (name == topic.first) {
        return usage_error(fmt::format("mock-kafka: --topic: {} is given twice", name), mock);
      }
    }
    args.mock_options.topics.push_back(std::move(topic));
  }
  return sketchd::mock_kafka_command(args.mock_options);
}

// The parsed command, run.
int dispatch(arguments& args, const subcommands& sub) {
  if (!args.config_path.empty() && (sub.check->parsed() || sub.mock->parsed())) {
    return usage_error("--config belongs to run (check-config takes the file as its argument)");
  }
  if (sub.check->parsed()) return sketchd::check_config_command(args.check_path, args.check_format);
  if (sub.mock->parsed()) return mock_kafka(args, sub.mock);
  if (sub.run->parsed() || !args.config_path.empty()) {
    if (!args.config_path.empty() && !args.run_config_path.empty() &&
        args.config_path != args.run_config_path) {
      return usage_error("--config is given twice with different files");
    }
    const std::string& path =
        args.run_config_path.empty() ? args.config_path : args.run_config_path;
    if (path.empty()) return usage_error("run: --config FILE is required", sub.run);
    return sketchd::run_command(path);
  }
  return usage_error("no command: use run --config FILE, check-config FILE or mock-kafka");
}

int run_main(int argc, char** argv) {
  CLI::App app(kDescription, "sketchd");
  app.set_version_flag(
      "--version",
      fmt::format("sketchd {} (revision {})", SKETCHD_VERSION, sketchd::build_revision()),
      "Print the version and exit");
  app.require_subcommand(0, 1);
  arguments args;
  app.add_option("-c,--config", args.config_path,
                 "Run the daemon with this configuration (same as: sketchd run --config FILE)")
      ->type_name("FILE");
  const subcommands sub{add_run(app, args), add_check(app, args), add_mock(app, args)};
  app.footer(kExamples);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    const CLI::App* command = nullptr;
    for (const CLI::App* s : {sub.run, sub.check, sub.mock}) {
      if (s->parsed()) command = s;
    }
    return usage_error(
        command == nullptr ? e.what() : fmt::format("{}: {}", command->get_name(), e.what()),
        command);
  }
  return dispatch(args, sub);
}

}  // namespace

int main(int argc, char** argv) {
  int status = 1;
  try {
    status = run_main(argc, argv);
  } catch (const std::exception& e) {  // a write to stdout that failed, memory…
    sketchd::print_stderr(fmt::format("sketchd: {}\n", e.what()));
  }
  // What is still buffered (check-config's verdict, --help) must reach stdout, or the exit
  // status says it did not.
  std::cout.flush();
  if ((std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) && status == 0) {
    sketchd::print_stderr("sketchd: cannot write to stdout\n");
    status = 1;
  }
  return status;
}
