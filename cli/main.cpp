// `sketch`: the sketch library on files and pipes. The interface is the contract of
// DESIGN.md ("sketch command"): size, fpr, dedup, topk, compressed. Bad arguments: one line naming
// the argument on stderr, exit status 2.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "cli/common.h"

namespace sketch::cli {
namespace {

// The subcommands and the options they fill.
struct command_line {
  size_options size;
  fpr_options fpr;
  dedup_options dedup;
  topk_options topk;
  compressed_options compressed;
  CLI::App* size_cmd = nullptr;
  CLI::App* fpr_cmd = nullptr;
  CLI::App* dedup_cmd = nullptr;
  CLI::App* topk_cmd = nullptr;
  CLI::App* compressed_cmd = nullptr;
};

CLI::App* add_size(CLI::App& app, size_options& size) {
  auto* size_cmd =
      app.add_subcommand("size", "Size a Bloom filter for N items at a target false-positive rate");
  size_cmd->add_option("--items", size.items, "Expected distinct items (k, M, G suffixes allowed)")
      ->required();
  size_cmd->add_option("--fpr", size.fpr, "Target false-positive probability, in (0, 1)");
  size_cmd
      ->add_option("--layout", size.layout,
                   "classic, blocked (split-block, 8 hashes; the default), or compressed (a "
                   "classic filter sized for transmission, Golomb-coded: the fewest transmitted "
                   "bits at --fpr)")
      ->check(CLI::IsMember({"classic", "blocked", "compressed"}));
  size_cmd->add_option("--transmitted-bits-per-item", size.transmitted_bits_per_item,
                       "compressed layout: instead of --fpr, the lowest false-positive rate "
                       "within this many transmitted bits per item");
  size_cmd->add_option("--max-bits-per-item", size.max_bits_per_item,
                       "compressed layout: the most array bits per item in memory (default 64)");
  return size_cmd;
}

CLI::App* add_fpr(CLI::App& app, fpr_options& fpr) {
  auto* fpr_cmd = app.add_subcommand(
      "fpr", "False-positive probability of a filter with M bits, N items, K hashes");
  fpr_cmd
      ->add_option("--bits", fpr.bits,
                   "Bits (per hash function for the partitioned layout; blocked rounds up to whole "
                   "256-bit blocks)")
      ->required();
  fpr_cmd->add_option("--items", fpr.items, "Items inserted")->required();
  fpr_cmd->add_option("--hashes", fpr.hashes,
                      "Hash functions (classic, partitioned; blocked uses 8)");
  fpr_cmd
      ->add_option("--layout", fpr.layout,
                   "classic (one vector, the default), partitioned (K vectors of M bits), blocked")
      ->check(CLI::IsMember({"classic", "partitioned", "blocked"}));
  return fpr_cmd;
}

CLI::App* add_dedup(CLI::App& app, dedup_options& dedup) {
  auto* dedup_cmd = app.add_subcommand("dedup",
                                       "Print each line the first time it is seen (bounded memory; "
                                       "rare false positives drop a new line)");
  dedup_cmd->add_option("--items", dedup.items,
                        "Distinct lines expected (default 10M); sizes the filter");
  dedup_cmd->add_option("--fpr", dedup.fpr, "Target false-positive probability (default 0.001)");
  dedup_cmd->add_option("--bits-per-item", dedup.bits_per_item,
                        "Bits per expected item, instead of --fpr");
  dedup_cmd->add_option("--hashes", dedup.hashes,
                        "Hash functions with --bits-per-item (then the layout is classic unless "
                        "--layout says blocked)");
  dedup_cmd
      ->add_option(
          "--layout", dedup.layout,
          "blocked (the default, fastest; 8 hashes) or classic (the default with --hashes)")
      ->check(CLI::IsMember({"classic", "blocked"}));
  dedup_cmd->add_option("FILE", dedup.files, "Input files (stdin when none, or -)");
  return dedup_cmd;
}

CLI::App* add_topk(CLI::App& app, topk_options& topk) {
  auto* topk_cmd = app.add_subcommand(
      "topk", "Print the K most frequent lines as ESTIMATE<TAB>ITEM, highest first");
  topk_cmd->add_option("-k", topk.k, "How many items, 1 to 1000 (default 10)");
  topk_cmd->add_option("--epsilon", topk.epsilon,
                       "Count-Min error, in (0, 1): estimate <= true + epsilon*N (default 0.0001)");
  topk_cmd->add_option("--delta", topk.delta,
                       "Probability that the error bound fails, in (0, 1) (default 0.001)");
  topk_cmd->add_option("FILE", topk.files, "Input files (stdin when none, or -)");
  return topk_cmd;
}

CLI::App* add_compressed(CLI::App& app, compressed_options& compressed) {
  auto* cmd = app.add_subcommand(
      "compressed",
      "A compressed Bloom filter (Mitzenmacher 2002): its false-positive rate and the bits per "
      "item an ideal coder transmits; with --items, a real filter coded by the library");
  cmd->add_option("--bits-per-item", compressed.bits_per_item,
                  "Bits of the array per item, b = m/n (larger than the optimum's, to compress)")
      ->required();
  cmd->add_option("--hashes", compressed.hashes, "Hash functions, k")->required();
  cmd->add_option("--items", compressed.items,
                  "Build a filter of N random items (fixed seed), Golomb-code it and query 1M "
                  "other items: prints compressed_bits_per_item and measured_fpr too");
  return cmd;
}

// A first word that is no command would otherwise be reported as a missing command, and an
// option before the command as a missing command, or as a missing option.
void check_first_argument(const CLI::App& app, int argc, char** argv) {
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(),
                   [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
    throw usage_error(fmt::format(
        "{}: not a command (size, fpr, dedup, topk or compressed; see sketch --help)", argv[1]));
  }
  if (argc > 1 && argv[1][0] == '-' && argv[1][1] != '\0') {
    const std::string_view first = argv[1];
    if (first != "-h" && first != "--help" && first != "--help-all" && first != "--version" &&
        first != "--") {
      throw usage_error(fmt::format(
          "{}: not an option of sketch itself; a command's options go after it (sketch COMMAND "
          "[OPTIONS]; see sketch --help)",
          first.substr(0, first.find('='))));
    }
  }
}

int run_main(int argc, char** argv) {
  CLI::App app{
      "sketch: probabilistic sketches on files and pipes (Bloom filters, Count-Min).\n"
      "Items are lines, compared byte for byte (a CRLF line keeps its \\r: convert with\n"
      "`tr -d '\\r'` first); FILE arguments are read in order, stdin when there are none.",
      "sketch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("sketch {}", SKETCH_VERSION),
                       "Print the version and exit");
  app.set_help_all_flag("--help-all", "Show the help of every command");
  command_line c;
  c.size_cmd = add_size(app, c.size);
  c.fpr_cmd = add_fpr(app, c.fpr);
  c.dedup_cmd = add_dedup(app, c.dedup);
  c.topk_cmd = add_topk(app, c.topk);
  c.compressed_cmd = add_compressed(app, c.compressed);

  int status = 2;
  try {
    check_first_argument(app, argc, argv);
    app.parse(argc, argv);
    if (*c.size_cmd) status = run_size(c.size);
    if (*c.fpr_cmd) status = run_fpr(c.fpr);
    if (*c.dedup_cmd) status = run_dedup(c.dedup);
    if (*c.topk_cmd) status = run_topk(c.topk);
    if (*c.compressed_cmd) status = run_compressed(c.compressed);
  } catch (const CLI::CallForHelp& e) {
    status = app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    status = app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    status = app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    return 2;
  } catch (const usage_error& e) {
    print_error(e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);  // the output so far, before the error
    print_error(e.what());
    return 1;
  }
  // exit() would flush the rest of the output too, but ignore a write error.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    print_error(cannot_write());
    return 1;
  }
  return status;
}

}  // namespace
}  // namespace sketch::cli

int main(int argc, char** argv) {
  int status = 1;
  try {
    status = sketch::cli::run_main(argc, argv);
  } catch (const std::exception& e) {  // --help or --version to a stdout that fails, memory…
    sketch::cli::print_error(e.what());
  }
  std::cout.flush();
  if ((std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) && status == 0) {
    sketch::cli::print_error(sketch::cli::cannot_write());
    status = 1;
  }
  return status;
}
