#include "sketchd/metrics/metrics.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "sketchd/util/utf8.h"

namespace sketchd::metrics {

void registry::add(collector c) {
  std::lock_guard lock(mutex_);
  collectors_.push_back(std::move(c));
}

std::vector<metric_family> registry::collect() const {
  std::vector<collector> collectors;
  {
    std::lock_guard lock(mutex_);
    collectors = collectors_;
  }
  std::vector<metric_family> raw;
  for (const auto& c : collectors) c(raw);

  // One family per name, in first-seen order, as the format requires.
  std::vector<metric_family> merged;
  std::map<std::string, std::size_t, std::less<>> index;
  for (auto& f : raw) {
    auto [it, fresh] = index.try_emplace(f.name, merged.size());
    if (fresh) {
      merged.push_back(std::move(f));
    } else {
      auto& into = merged[it->second].samples;
      into.insert(into.end(), std::make_move_iterator(f.samples.begin()),
                  std::make_move_iterator(f.samples.end()));
    }
  }
  return merged;
}

std::string registry::scrape() const { return serialize_text(collect()); }

namespace {

const char* type_name(metric_type t) {
  switch (t) {
    case metric_type::counter:
      return "counter";
    case metric_type::gauge:
      return "gauge";
    case metric_type::untyped:
      return "untyped";
  }
  return "untyped";
}

void append_escaped(std::string& out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
    fmt::format_to(std::back_inserter(out), "{}", static_cast<long long>(v));
  } else {
    fmt::format_to(std::back_inserter(out), "{}", v);  // shortest round-trip form
  }
}

}  // namespace

std::string serialize_text(const std::vector<metric_family>& families) {
  std::string out;
  for (const auto& f : families) {
    out += "# HELP ";
    out += f.name;
    out += ' ';
    append_escaped(out, f.help, false);
    out += "\n# TYPE ";
    out += f.name;
    out += ' ';
    out += type_name(f.type);
    out += '\n';
    for (const auto& s : f.samples) {
      out += f.name;
      if (!s.labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < s.labels.size(); ++i) {
          if (i) out += ',';
          out += s.labels[i].name;
          out += "=\"";
          append_escaped(out, s.labels[i].value, true);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      append_value(out, s.value);
      out += '\n';
    }
  }
  return out;
}

std::string clean_label_value(std::string_view raw, std::size_t max_bytes) {
  return utf8::clean(raw, max_bytes);
}

namespace {

metric_family single(std::string name, std::string help, metric_type type, double value) {
  return metric_family{std::move(name), std::move(help), type, {sample{{}, value}}};
}

}  // namespace

void collect_process_metrics(std::vector<metric_family>& out) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));

  // /proc/self/stat: the command name (field 2) may hold spaces, so parse after ')'.
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f((std::istream_iterator<std::string>(fields)),
                               std::istream_iterator<std::string>());
    // f[0] is field 3 (state); field N is f[N - 3].
    if (f.size() > 21) {
      const double utime = std::stod(f[14 - 3]);
      const double stime = std::stod(f[15 - 3]);
      const double start_ticks = std::stod(f[22 - 3]);
      const double vsize = std::stod(f[23 - 3]);
      const double rss_pages = std::stod(f[24 - 3]);
      out.push_back(single("process_cpu_seconds_total",
                           "Total user and system CPU time spent in seconds.", metric_type::counter,
                           (utime + stime) / ticks));
      out.push_back(single("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                           metric_type::gauge, vsize));
      out.push_back(single("process_resident_memory_bytes", "Resident memory size in bytes.",
                           metric_type::gauge, rss_pages * page));
      std::ifstream proc_stat("/proc/stat");
      std::string key;
      double boot_time = 0;
      while (proc_stat >> key) {
        if (key == "btime") {
          proc_stat >> boot_time;
          break;
        }
      }
      out.push_back(single("process_start_time_seconds",
                           "Start time of the process since unix epoch in seconds.",
                           metric_type::gauge, boot_time + start_ticks / ticks));
    }
  }

  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  out.push_back(
      single("process_open_fds", "Number of open file descriptors.", metric_type::gauge, fds));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out.push_back(single("process_max_fds", "Maximum number of open file descriptors.",
                         metric_type::gauge, static_cast<double>(limit.rlim_cur)));
  }
}

}  // namespace sketchd::metrics
