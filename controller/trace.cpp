#include "controller/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "host/cgroup_files.h"
#include "host/json.h"

namespace keel::ctl {

namespace {

// A trace is read back as a tick the controller decides from: every number is checked against what
// it can be before it is converted or used (a float past an integer's range converts to anything),
// and a field that is there but out of range is an error naming it, never taken as absent.
std::string shown(const Json& v) { return v.dump(); }

// A whole number in [lo, hi]: written as an integer, or as a float with nothing after the point.
Result<std::optional<uint64_t>> whole(const Json& o, const char* k, uint64_t lo, uint64_t hi) {
  auto it = o.find(k);
  if (it == o.end() || it->is_null()) return std::nullopt;
  auto bad = [&] {
    return fail(std::string(k) + ": " + shown(*it) + " is not a whole number from " + std::to_string(lo) +
                " to " + std::to_string(hi));
  };
  uint64_t v = 0;
  if (it->is_number_unsigned()) {
    v = it->get<uint64_t>();
  } else if (it->is_number_float()) {
    const double d = it->get<double>();
    // 2^64 is the first double past uint64_t; NaN fails every comparison.
    if (!(d >= 0 && d < 18446744073709551616.0) || std::floor(d) != d) return bad();
    v = static_cast<uint64_t>(d);
  } else {
    return bad();  // negative, or not a number
  }
  if (v < lo || v > hi) return bad();
  return v;
}

// A finite number in [lo, hi] (hi infinite: no upper bound).
Result<std::optional<double>> real(const Json& o, const char* k, double lo, double hi) {
  auto it = o.find(k);
  if (it == o.end() || it->is_null()) return std::nullopt;
  const double v = it->is_number() ? it->get<double>() : std::nan("");
  // JSON text cannot hold one (the parser refuses 1e400), a Json built in code can.
  if (it->is_number() && !std::isfinite(v)) return fail(std::string(k) + ": not a finite number");
  if (!(v >= lo && v <= hi)) {  // NaN (not a number) included
    char range[64];
    if (std::isinf(hi))
      std::snprintf(range, sizeof range, "a number from %g up", lo);
    else
      std::snprintf(range, sizeof range, "a number from %g to %g", lo, hi);
    return fail(std::string(k) + ": " + shown(*it) + " is not " + range);
  }
  return v;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

const std::string* text(const Json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

Json optional_number(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

// One workload of a trace line (not one `seen` already in its tick).
Result<WorkloadSignals> parse_workload(const Json& w, std::set<std::string>& seen) {
  if (!w.is_object()) return fail("trace line: a workload is not an object");
  WorkloadSignals ws;
  const std::string* instance = text(w, "instance");
  const std::string* workload = text(w, "workload");
  const std::string* cpus = text(w, "cpus");
  auto crit = w.find("critical");
  if (!instance || !workload || !cpus || crit == w.end() || !crit->is_boolean() || !w.contains("rq_waits") ||
      !w.contains("rq_p50_us") || !w.contains("rq_p99_us"))
    return fail(
        "trace line: a workload lacks instance, workload, critical, rq_waits, rq_p50_us, rq_p99_us or "
        "cpus");
  const std::string who = "trace line: workload " + Json(*instance).dump() + ": ";
  if (!seen.insert(*instance).second) return fail(who + "listed twice in one tick");
  ws.instance = *instance;
  ws.workload = *workload;
  ws.critical = crit->get<bool>();
  // Counts and rates are never negative; CPU usage is at most every CPU; shares are the kernel's.
  auto waits = whole(w, "rq_waits", 0, UINT64_MAX);
  auto shares = whole(w, "shares", kSharesMin, kSharesMax);
  struct Real {
    const char* key;
    double hi;
    std::optional<double>* to;
  };
  std::optional<double> p50, p99, wait, migrations, llc, numa, lull, starved;
  const Real reals[] = {{"rq_p50_us", kInf, &p50},
                        {"rq_p99_us", kInf, &p99},
                        {"rq_wait_s_per_s", kInf, &wait},
                        {"migrations_per_s", kInf, &migrations},
                        {"cross_llc_per_s", kInf, &llc},
                        {"cross_numa_per_s", kInf, &numa},
                        {"cache_misses_per_s", kInf, &ws.cache_misses_per_s},
                        {"mpki", kInf, &ws.mpki},
                        {"cpu_usage", CpuSet::kMaxCpu, &ws.cpu_usage},
                        {"throttled_per_s", kInf, &ws.throttled_per_s},
                        {"lull_s", kInf, &lull},
                        {"watch_cpu", CpuSet::kMaxCpu, &ws.watch_cpu},
                        {"starved_s", kInf, &starved}};
  if (!waits) return fail(who + waits.error().what);
  if (!shares) return fail(who + shares.error().what);
  for (const Real& r : reals) {
    auto v = real(w, r.key, 0, r.hi);
    if (!v) return fail(who + v.error().what);
    *r.to = *v;
  }
  if (!*waits || !p50 || !p99) return fail(who + "rq_waits, rq_p50_us and rq_p99_us must be numbers");
  ws.rq_waits = **waits;
  ws.rq_p50_us = *p50;
  ws.rq_p99_us = *p99;
  // Absent in older traces: 0, or unavailable.
  ws.rq_wait_s_per_s = wait.value_or(0);
  ws.migrations_per_s = migrations.value_or(0);
  ws.cross_llc_per_s = llc.value_or(0);
  ws.cross_numa_per_s = numa.value_or(0);
  ws.lull_s = lull.value_or(0);
  ws.starved_s = starved.value_or(0);
  ws.shares = *shares;
  if (auto f = w.find("fresh"); f != w.end() && f->is_boolean()) ws.fresh = f->get<bool>();
  if (auto c = w.find("in_class"); c != w.end() && c->is_boolean()) ws.in_class = c->get<bool>();
  if (auto h = w.find("host_daemon"); h != w.end() && h->is_boolean())
    ws.host_daemon = h->get<bool>() && !ws.critical;
  if (auto cg = w.find("cgroups"); cg != w.end() && cg->is_array())
    for (const Json& c : *cg)
      if (c.is_string()) ws.cgroups.push_back(c.get<std::string>());
  auto set = CpuSet::parse_list(*cpus);
  if (!set) return fail(who + "bad cpus " + Json(*cpus).dump() + ": " + set.error().what);
  ws.cpus = *set;
  return ws;
}

}  // namespace

std::string to_json_line(const Snapshot& s) {
  Json workloads = Json::array();
  for (const auto& w : s.workloads) {
    Json o = {{"instance", w.instance}, {"workload", w.workload}, {"critical", w.critical}};
    if (w.fresh) o["fresh"] = true;
    if (w.host_daemon) o["host_daemon"] = true;
    o["cgroups"] = w.cgroups;
    o["rq_waits"] = w.rq_waits;
    o["rq_p50_us"] = w.rq_p50_us;
    o["rq_p99_us"] = w.rq_p99_us;
    o["rq_wait_s_per_s"] = w.rq_wait_s_per_s;
    o["migrations_per_s"] = w.migrations_per_s;
    o["cross_llc_per_s"] = w.cross_llc_per_s;
    o["cross_numa_per_s"] = w.cross_numa_per_s;
    o["cache_misses_per_s"] = optional_number(w.cache_misses_per_s);
    o["mpki"] = optional_number(w.mpki);
    o["cpu_usage"] = optional_number(w.cpu_usage);
    o["throttled_per_s"] = optional_number(w.throttled_per_s);
    if (w.lull_s > 0) o["lull_s"] = w.lull_s;
    if (w.watch_cpu) o["watch_cpu"] = *w.watch_cpu;
    if (w.starved_s > 0) o["starved_s"] = w.starved_s;
    o["cpus"] = w.cpus.to_list();
    o["shares"] = w.shares ? Json(*w.shares) : Json(nullptr);
    if (w.in_class) o["in_class"] = *w.in_class;
    workloads.push_back(std::move(o));
  }
  Json j = {{"tick", s.tick}, {"period_s", s.period_s}, {"workloads", std::move(workloads)}};
  return json_text(j);
}

Result<Snapshot> parse_json_line(std::string_view line) {
  Json doc;
  try {
    doc = Json::parse(line);
  } catch (const Json::exception& e) {  // a parse_error names the byte; 1e400 is an out_of_range
    return fail("trace line: " + std::string(e.what()));
  }
  if (!doc.is_object()) return fail("trace line: not an object");
  Snapshot s;
  auto tick = whole(doc, "tick", 0, UINT64_MAX);
  // keel's period is 10 ms to 1 h (config/validate.cpp); rates and durations divide by it.
  auto period = real(doc, "period_s", 0.01, 3600);
  if (!tick) return fail("trace line: " + tick.error().what);
  if (!period) return fail("trace line: " + period.error().what);
  auto wls = doc.find("workloads");
  if (!*tick || !*period || wls == doc.end() || !wls->is_array())
    return fail("trace line: needs tick, period_s and workloads");
  s.tick = **tick;
  s.period_s = **period;
  std::set<std::string> seen;
  for (const Json& w : *wls) {
    auto ws = parse_workload(w, seen);
    if (!ws) return std::unexpected(std::move(ws.error()));
    s.workloads.push_back(std::move(*ws));
  }
  return s;
}

std::string format_actions(const Plan& p, std::string_view mode) {
  std::string out;
  const std::string head = "tick " + std::to_string(p.tick) + (mode.empty() ? "" : " " + std::string(mode));
  const char* would = mode == "observe" ? "would " : "";
  for (const auto& a : p.actions) {
    out += head + " " + would + to_string(a.kind) + " " + (a.instance.empty() ? "(host)" : a.instance) + " " +
           to_string(a.knob) + " " + (a.from.empty() ? "(as found)" : a.from) + " -> " +
           (a.to.empty() ? "(as found)" : a.to) + ": " + a.reason + "\n";
  }
  if (!mode.empty()) {
    std::vector<std::string> named;
    for (const auto& i : p.interference) {
      if (std::find(named.begin(), named.end(), i.victim) != named.end()) continue;
      named.push_back(i.victim);
      char score[32];
      std::snprintf(score, sizeof score, "%.2f", i.score);
      out += head + " interference " + i.victim + " antagonist " + i.antagonist + " (" + score +
             " CPUs busy or queued on its CPUs)\n";
    }
  }
  for (const auto& [inst, v] : p.workloads)
    if (!v.blocked.empty() && v.violated) out += head + " blocked " + inst + ": " + v.blocked + "\n";
  return out;
}

}  // namespace keel::ctl
