#include "sketchd/metrics/metrics.h"

#include <prometheus/text_serializer.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "sketchd/util/utf8.h"

namespace sketchd::metrics {

prometheus::MetricFamily family(std::string name, std::string help, prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void add(prometheus::MetricFamily& f, labels series_labels, double value) {
  prometheus::ClientMetric m;
  m.label = std::move(series_labels);
  switch (f.type) {
    case prometheus::MetricType::Counter:
      m.counter.value = value;
      break;
    case prometheus::MetricType::Gauge:
      m.gauge.value = value;
      break;
    default:
      m.untyped.value = value;
  }
  f.metric.push_back(std::move(m));
}

double value_of(const prometheus::ClientMetric& m, prometheus::MetricType type) {
  switch (type) {
    case prometheus::MetricType::Counter:
      return m.counter.value;
    case prometheus::MetricType::Gauge:
      return m.gauge.value;
    default:
      return m.untyped.value;
  }
}

prometheus::MetricFamily single(std::string name, std::string help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily f = family(std::move(name), std::move(help), type);
  add(f, {}, value);
  return f;
}

std::vector<prometheus::MetricFamily> collector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  f_(out);
  return out;
}

void registry::add(std::shared_ptr<const prometheus::Collectable> c) {
  std::lock_guard lock(mutex_);
  collectables_.push_back(std::move(c));
}

std::vector<prometheus::MetricFamily> registry::collect() const {
  std::vector<std::shared_ptr<const prometheus::Collectable>> collectables;
  {
    std::lock_guard lock(mutex_);
    collectables = collectables_;
  }
  std::vector<prometheus::MetricFamily> raw = families_->Collect();
  for (const auto& c : collectables) {
    std::vector<prometheus::MetricFamily> more = c->Collect();
    raw.insert(raw.end(), std::make_move_iterator(more.begin()),
               std::make_move_iterator(more.end()));
  }
  // One family per name, in first-seen order, as the format requires.
  std::vector<prometheus::MetricFamily> merged;
  std::map<std::string, std::size_t, std::less<>> index;
  for (auto& f : raw) {
    auto [it, fresh] = index.try_emplace(f.name, merged.size());
    if (fresh) {
      merged.push_back(std::move(f));
    } else {
      auto& into = merged[it->second].metric;
      into.insert(into.end(), std::make_move_iterator(f.metric.begin()),
                  std::make_move_iterator(f.metric.end()));
    }
  }
  return merged;
}

std::string registry::scrape() const {
  std::vector<prometheus::MetricFamily> families = collect();
  // prometheus-cpp 1.0.1's TextSerializer escapes label values but writes HELP as it is: a
  // backslash or a newline there is escaped here, as the format asks (0.0.4).
  for (auto& f : families) {
    std::string help;
    for (const char c : f.help) {
      if (c == '\\') {
        help += "\\\\";
      } else if (c == '\n') {
        help += "\\n";
      } else {
        help += c;
      }
    }
    f.help = std::move(help);
  }
  return prometheus::TextSerializer().Serialize(families);
}

void collect_process_metrics(std::vector<prometheus::MetricFamily>& out) {
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
                           "Total user and system CPU time spent in seconds.",
                           prometheus::MetricType::Counter, (utime + stime) / ticks));
      out.push_back(single("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                           prometheus::MetricType::Gauge, vsize));
      out.push_back(single("process_resident_memory_bytes", "Resident memory size in bytes.",
                           prometheus::MetricType::Gauge, rss_pages * page));
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
                           prometheus::MetricType::Gauge, boot_time + start_ticks / ticks));
    }
  }

  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  out.push_back(single("process_open_fds", "Number of open file descriptors.",
                       prometheus::MetricType::Gauge, fds));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out.push_back(single("process_max_fds", "Maximum number of open file descriptors.",
                         prometheus::MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
}

std::string clean_label_value(std::string_view raw, std::size_t max_bytes) {
  return utf8::clean(raw, max_bytes);
}

}  // namespace sketchd::metrics
