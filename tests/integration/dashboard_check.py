#!/usr/bin/env python3
"""Static checks of the Grafana dashboards in dashboards/.

    dashboard_check.py DASHBOARD.json…            check; print every problem; exit 1 if any
    dashboard_check.py --queries DASHBOARD.json   print the dashboard's PromQL, one JSON object
                                                  per line (used by prometheus_live_test.sh)

A dashboard passes when:
  - it has a stable uid and a title, a current schemaVersion, and no import inputs
    (`__inputs`, `${DS_…}`): file provisioning does not resolve them;
  - its templating has a `datasource` variable of type datasource for prometheus, and a
    multi-value `pipeline` variable (label_values of sketchd_pipeline_items_total); every
    variable it uses is defined;
  - every panel is a row, timeseries, table or stat, with a unique id; every panel but a
    row has a description, a unit (fieldConfig.defaults.unit, from a known list) and the
    datasource {"type": "prometheus", "uid": "${datasource}"}, as do its targets;
  - every target has an expression; rate(), irate() and increase() take
    [$__rate_interval]; table targets are instant queries in table format;
  - every metric an expression reads is one that sketchd exports (or `up`, which
    Prometheus records for each target), read as its type allows: rate(), irate() and
    increase() only of counters (the metrics ending in _total), and counters only through
    them;
  - every label an expression names (in matchers, by/without/on/ignoring lists) and every
    {{label}} of a legend is one that sketchd's metrics carry.
Before checking, it checks itself: each of a set of broken copies of the first dashboard
must be rejected for the reason it was broken.
"""
import copy
import json
import re
import sys

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
PANEL_TYPES = {"row", "timeseries", "table", "stat"}
# Grafana unit ids (packages/grafana-data/src/valueFormats/categories.ts) that suit sketchd.
UNITS = {"none", "short", "percent", "percentunit", "bytes", "decbytes", "s", "ms", "cps", "ops",
         "dateTimeAsIso", "dateTimeFromNow", "bool", "bool_yes_no"}
# The metrics sketchd exports: DESIGN.md's table and the daemon's additions (docs/ has
# the reference). `up` is recorded by Prometheus for every scrape target.
METRICS = {
    "sketchd_build_info",
    "sketchd_messages_consumed_total",
    "sketchd_pipeline_items_total",
    "sketchd_pipeline_extract_failures_total",
    "sketchd_cms_window_items",
    "sketchd_cms_error_bound_items",
    "sketchd_cms_window_incomplete_seconds",
    "sketchd_kafka_uncommitted_messages",
    "sketchd_kafka_commit_failures_total",
    "sketchd_cms_size_bytes",
    "sketchd_heavy_hitter_estimated_count",
    "sketchd_heavy_hitter_ratio",
    "sketchd_heavy_hitter_threshold_ratio",
    "sketchd_heavy_hitter_events_total",
    "sketchd_heavy_hitter_alerts_sent_total",
    "sketchd_heavy_hitter_alert_failures_total",
    "sketchd_dedup_first_seen_total",
    "sketchd_dedup_duplicates_total",
    "sketchd_dedup_forwarded_total",
    "sketchd_dedup_duplicates_forwarded_total",
    "sketchd_dedup_forward_failures_total",
    "sketchd_dead_letters_total",
    "sketchd_dead_letter_failures_total",
    "sketchd_bloom_fill_ratio",
    "sketchd_bloom_estimated_false_positive_ratio",
    "sketchd_bloom_target_false_positive_ratio",
    "sketchd_bloom_estimated_items",
    "sketchd_bloom_size_bytes",
    "sketchd_bloom_effective_window_seconds",
    "sketchd_bloom_window_seconds",
    "sketchd_bloom_rotations_total",
    "sketchd_kafka_consumer_lag_messages",
    "sketchd_kafka_brokers_up",
    "sketchd_kafka_assigned_partitions",
    "sketchd_kafka_consume_errors_total",
    "sketchd_producer_queue_messages",
    "sketchd_processing_stalled_seconds",
    "sketchd_consumption_stopped",
    "sketchd_snapshot_last_success_timestamp_seconds",
    "sketchd_snapshot_failures_total",
    "sketchd_snapshot_duration_seconds",
    "sketchd_snapshot_size_bytes",
    "sketchd_snapshot_interval_seconds",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
    "up",
}
# The labels sketchd's metrics carry (docs/METRICS.md), and those Prometheus adds.
LABELS = {"instance", "job", "pipeline", "item", "topic", "partition", "reason", "generation", "event",
          "version", "revision", "__name__"}
RATE_FUNCTIONS = ("rate", "irate", "increase")
# Words of PromQL that look like metric names.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
            "bool", "offset", "inf", "nan"}
# Grafana's own variables, which need no definition.
BUILTIN_VARIABLES = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s",
                     "__range_ms", "__from", "__to", "__dashboard", "__user", "__org"}


def panels_of(dashboard):
    """Every panel, those nested in collapsed rows included."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def call_arguments(expr, start):
    """The text between the parenthesis at expr[start] and its match."""
    depth = 0
    for i in range(start, len(expr)):
        if expr[i] == "(":
            depth += 1
        elif expr[i] == ")":
            depth -= 1
            if depth == 0:
                return expr[start + 1:i]
    return expr[start + 1:]


def rate_problems(expr):
    """rate(), irate() and increase() calls whose range is not [$__rate_interval]."""
    problems = []
    for m in re.finditer(r"\b(" + "|".join(RATE_FUNCTIONS) + r")\s*\(", expr):
        argument = call_arguments(expr, m.end() - 1).strip()
        if not argument.endswith("[$__rate_interval]"):
            problems.append(f"{m.group(1)}({argument}) does not use [$__rate_interval]")
    return problems


def metric_names(expr):
    """The metric names an expression reads (a small PromQL tokenizer: enough for
    selectors, functions, aggregations with by/on label lists, and numbers)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)             # string literals
    text = re.sub(r"\{[^}]*\}", " ", text)                        # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)                       # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+-?[\dsmhdwy]+", " ", text)           # offset 5m
    text = re.sub(r"(?<![\w:])\d[\d.]*(e[+-]?\d+)?", " ", text)    # numbers
    names = set()
    for m in re.finditer(r"[A-Za-z_:][\w:]*", text):
        rest = text[m.end():].lstrip()
        if rest.startswith("(") or m.group(0).lower() in KEYWORDS:
            continue                                              # a function or a keyword
        names.add(m.group(0))
    return names


def type_problems(expr):
    """Gauges under rate(), irate() or increase(); counters read without them."""
    problems = []
    outside = expr
    for m in reversed(list(re.finditer(r"\b(" + "|".join(RATE_FUNCTIONS) + r")\s*\(", expr))):
        argument = call_arguments(expr, m.end() - 1)
        for name in sorted(metric_names(argument)):
            if not name.endswith("_total"):
                problems.append(f"{m.group(1)}() of {name}, which is not a counter")
        outside = outside[:m.start()] + " " + outside[m.end() + len(argument) + 1:]
    for name in sorted(metric_names(outside)):
        if name.endswith("_total"):
            problems.append(f"counter {name} read without rate() or increase()")
    return problems


def label_names(expr):
    """The label names an expression names: in matchers and in by/without/on/ignoring and
    group_left/group_right lists."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    names = set()
    for m in re.finditer(r"\{([^}]*)\}", text):
        names.update(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", m.group(1)))
    for m in re.finditer(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", text):
        names.update(n.strip() for n in m.group(1).split(",") if n.strip())
    return names


def variables_used(text):
    return set(re.findall(r"\$\{?(\w+)", text))


def check(dashboard):
    """Every problem of the dashboard, as a list of sentences."""
    problems = []
    add = problems.append
    if "__inputs" in dashboard or "__requires" in dashboard:
        add("has import inputs (__inputs/__requires): file provisioning does not resolve them")
    if "${DS_" in json.dumps(dashboard):
        add("refers to an import input ${DS_…}")
    if not dashboard.get("uid") or not dashboard.get("title"):
        add("needs a uid and a title")
    if not 36 <= dashboard.get("schemaVersion", 0) <= 41:
        add(f"schemaVersion {dashboard.get('schemaVersion')} is not a current Grafana's (36..41)")

    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        add("needs a `datasource` variable of type datasource with query prometheus")
    pipeline = variables.get("pipeline")
    if (not pipeline or pipeline.get("type") != "query"
            or not re.search(r"label_values\(\s*sketchd_pipeline_items_total\b.*,\s*pipeline\s*\)",
                             json.dumps(pipeline.get("query"))) or not pipeline.get("multi")
            or not pipeline.get("includeAll")):
        add("needs a multi-value `pipeline` variable: label_values(sketchd_pipeline_items_total, pipeline)")
    for name, v in variables.items():
        if v.get("type") == "query":
            if v.get("datasource") != DATASOURCE:
                add(f"variable {name}: datasource must be {DATASOURCE}")
            for used in variables_used(json.dumps(v.get("query"))) - set(variables) - BUILTIN_VARIABLES:
                add(f"variable {name} uses undefined variable ${used}")

    ids = set()
    for panel in panels_of(dashboard):
        title = panel.get("title", "?")
        where = f"panel {panel.get('id')} \"{title}\""
        if panel.get("id") in ids or not isinstance(panel.get("id"), int):
            add(f"{where}: id missing or not unique")
        ids.add(panel.get("id"))
        kind = panel.get("type")
        if kind not in PANEL_TYPES:
            add(f"{where}: type {kind} is not one of {sorted(PANEL_TYPES)}")
        if kind == "row":
            continue
        if not panel.get("description", "").strip():
            add(f"{where}: no description")
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
        if unit not in UNITS:
            add(f"{where}: unit {unit!r} is not a known Grafana unit ({', '.join(sorted(UNITS))})")
        if panel.get("datasource") != DATASOURCE:
            add(f"{where}: datasource must be {DATASOURCE}")
        targets = panel.get("targets", [])
        if not targets:
            add(f"{where}: no targets")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs):
            add(f"{where}: refIds not unique")
        for t in targets:
            at = f"{where} target {t.get('refId')}"
            expr = t.get("expr", "")
            if t.get("datasource") != DATASOURCE:
                add(f"{at}: datasource must be {DATASOURCE}")
            if not expr.strip():
                add(f"{at}: no expression")
            for p in rate_problems(expr):
                add(f"{at}: {p}")
            for name in sorted(metric_names(expr) - METRICS):
                add(f"{at}: metric {name} is not one sketchd exports")
            for p in type_problems(expr):
                add(f"{at}: {p}")
            for name in sorted(label_names(expr) - LABELS):
                add(f"{at}: label {name} is not one sketchd's metrics carry")
            for name in sorted(set(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", ""))) - LABELS):
                add(f"{at}: legend label {name} is not one sketchd's metrics carry")
            for used in sorted(variables_used(expr) - set(variables) - BUILTIN_VARIABLES):
                add(f"{at}: undefined variable ${used}")
            if kind == "table" and not (t.get("instant") and t.get("format") == "table"):
                add(f"{at}: a table's targets are instant queries in table format")
    return problems


def self_test(dashboard):
    """Breaks copies of a good dashboard one way each; the check must name every break."""
    def first(d, kind):
        return next(p for p in panels_of(d) if p.get("type") == kind)

    def mutate(change):
        d = copy.deepcopy(dashboard)
        change(d)
        return d

    def with_expr(expr):
        return lambda d: first(d, "timeseries")["targets"][0].update(expr=expr)

    breaks = {
        "no unit": (lambda d: first(d, "timeseries")["fieldConfig"]["defaults"].pop("unit"), "unit None"),
        "no description": (lambda d: first(d, "stat").pop("description"), "no description"),
        "fixed datasource": (lambda d: first(d, "table").update(datasource={"uid": "prometheus"}),
                             "datasource must be"),
        "import inputs": (lambda d: d.update(__inputs=[{"name": "DS_PROMETHEUS"}]), "import inputs"),
        "rate over 5m": (with_expr("sum(rate(sketchd_pipeline_items_total[5m]))"), "does not use"),
        "increase over 1h": (with_expr("increase(sketchd_dedup_first_seen_total{pipeline=~\"$pipeline\"}[1h])"),
                             "does not use"),
        "unknown metric": (with_expr("sum by (pipeline) (sketchd_no_such_metric{pipeline=~\"$pipeline\"}) * 2"),
                           "metric sketchd_no_such_metric"),
        "undefined variable": (with_expr("sketchd_cms_window_items{pipeline=~\"$pipelines\"}"),
                               "undefined variable $pipelines"),
        "rate of a gauge": (with_expr("sum(rate(sketchd_bloom_fill_ratio[$__rate_interval]))"),
                            "not a counter"),
        "bare counter": (with_expr("sum by (pipeline) (sketchd_pipeline_items_total)"),
                         "read without rate()"),
        "misspelt by label": (with_expr("sum by (pipline) (sketchd_cms_window_items)"),
                              "label pipline"),
        "misspelt matcher": (with_expr("sketchd_cms_window_items{pipline=~\"$pipeline\"}"),
                             "label pipline"),
        "misspelt legend": (lambda d: first(d, "timeseries")["targets"][0].update(legendFormat="{{pipline}}"),
                            "legend label pipline"),
        "graph panel": (lambda d: first(d, "timeseries").update(type="graph"), "type graph"),
        "duplicate id": (lambda d: first(d, "stat").update(id=first(d, "table")["id"]), "not unique"),
        "no pipeline variable": (lambda d: d["templating"].update(
            list=[v for v in d["templating"]["list"] if v["name"] != "pipeline"]), "`pipeline` variable"),
    }
    failures = []
    for name, (change, expected) in breaks.items():
        found = check(mutate(change))
        if not any(expected in p for p in found):
            failures.append(f"self-test: the check does not reject a dashboard with {name} "
                            f"(expected a problem containing {expected!r}, got {found})")
    # The tokenizer on what the dashboards write.
    names = metric_names('sum by (pipeline, item) (a_total{x="b_total"}) / on (pipeline) group_left '
                         'max(rate(c_seconds[$__rate_interval])) * 3 + 1e-3 > bool 0.5')
    if names != {"a_total", "c_seconds"}:
        failures.append(f"self-test: metric_names found {sorted(names)}, expected a_total and c_seconds")
    names = metric_names("sketchd_cms_window_items offset 5m - sketchd_cms_window_items offset 1h")
    if names != {"sketchd_cms_window_items"}:
        failures.append(f"self-test: metric_names found {sorted(names)} with offsets")
    return failures


def queries(dashboard):
    """The dashboard's PromQL: its query variables' and every panel target's."""
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            yield {"variable": v["name"], "query": q.get("query") if isinstance(q, dict) else q}
    for panel in panels_of(dashboard):
        for t in panel.get("targets", []):
            yield {"panel": panel.get("title"), "id": panel.get("id"), "ref": t.get("refId"),
                   "expr": t.get("expr"), "instant": bool(t.get("instant"))}


def main(argv):
    if len(argv) == 3 and argv[1] == "--queries":
        with open(argv[2], encoding="utf-8") as f:
            for q in queries(json.load(f)):
                print(json.dumps(q, ensure_ascii=False))
        return 0
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    status = 0
    dashboards = []
    for path in argv[1:]:
        try:
            with open(path, encoding="utf-8") as f:
                dashboards.append((path, json.load(f)))
        except (OSError, ValueError) as e:
            print(f"FAIL {path}: {e}")
            status = 1
    if dashboards:
        for problem in self_test(dashboards[0][1]):
            print(problem)
            status = 1
    for path, dashboard in dashboards:
        problems = check(dashboard)
        for p in problems:
            print(f"FAIL {path}: {p}")
        if problems:
            status = 1
        else:
            panels = [p for p in panels_of(dashboard) if p.get("type") != "row"]
            targets = sum(len(p.get("targets", [])) for p in panels)
            print(f"ok {path}: uid {dashboard['uid']}, {len(panels)} panels, {targets} queries")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
