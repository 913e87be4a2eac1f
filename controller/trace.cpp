#include "controller/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "host/json.h"

namespace keel::ctl {

namespace {

// JSON numbers are doubles: a field must be a finite one (a count also whole and not negative).
std::optional<double> number(const Json& o, const char* k) {
  auto it = o.find(k);
  if (it == o.end() || !it->is_number()) return std::nullopt;
  double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<uint64_t> count(const Json& o, const char* k) {
  auto v = number(o, k);
  if (!v || *v < 0 || *v > 1.8e19 || std::floor(*v) != *v) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

const std::string* text(const Json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

Json optional_number(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

}  // namespace

std::string to_json_line(const Snapshot& s) {
  Json workloads = Json::array();
  for (const auto& w : s.workloads) {
    Json o = {{"instance", w.instance}, {"workload", w.workload}, {"critical", w.critical}};
    if (w.fresh) o["fresh"] = true;
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
    o["cpus"] = w.cpus.to_list();
    o["shares"] = w.shares ? Json(*w.shares) : Json(nullptr);
    workloads.push_back(std::move(o));
  }
  Json j = {{"tick", s.tick}, {"period_s", s.period_s}, {"workloads", std::move(workloads)}};
  return json_text(j);
}

Result<Snapshot> parse_json_line(std::string_view line) {
  Json doc;
  try {
    doc = Json::parse(line);
  } catch (const Json::parse_error& e) {
    return fail("trace line: " + std::string(e.what()));  // names the byte where it breaks
  }
  if (!doc.is_object()) return fail("trace line: not an object");
  Snapshot s;
  auto tick = count(doc, "tick");
  auto period = number(doc, "period_s");
  auto wls = doc.find("workloads");
  if (!tick || !period || wls == doc.end() || !wls->is_array())
    return fail("trace line: needs tick, period_s and workloads");
  s.tick = *tick;
  s.period_s = *period;
  for (const Json& w : *wls) {
    if (!w.is_object()) return fail("trace line: a workload is not an object");
    WorkloadSignals ws;
    const std::string* instance = text(w, "instance");
    const std::string* workload = text(w, "workload");
    const std::string* cpus = text(w, "cpus");
    auto crit = w.find("critical");
    auto waits = count(w, "rq_waits");
    auto p50 = number(w, "rq_p50_us"), p99 = number(w, "rq_p99_us");
    if (!instance || !workload || !cpus || crit == w.end() || !crit->is_boolean() || !waits || !p50 || !p99)
      return fail(
          "trace line: a workload lacks instance, workload, critical, rq_waits, rq_p50_us, rq_p99_us or "
          "cpus");
    ws.instance = *instance;
    ws.workload = *workload;
    ws.critical = crit->get<bool>();
    ws.rq_waits = *waits;
    ws.rq_p50_us = *p50;
    ws.rq_p99_us = *p99;
    // Absent in older traces: 0, or unavailable.
    ws.rq_wait_s_per_s = number(w, "rq_wait_s_per_s").value_or(0);
    ws.migrations_per_s = number(w, "migrations_per_s").value_or(0);
    ws.cross_llc_per_s = number(w, "cross_llc_per_s").value_or(0);
    ws.cross_numa_per_s = number(w, "cross_numa_per_s").value_or(0);
    ws.cache_misses_per_s = number(w, "cache_misses_per_s");
    ws.mpki = number(w, "mpki");
    ws.cpu_usage = number(w, "cpu_usage");
    ws.throttled_per_s = number(w, "throttled_per_s");
    ws.shares = count(w, "shares");
    if (auto f = w.find("fresh"); f != w.end() && f->is_boolean()) ws.fresh = f->get<bool>();
    if (auto cg = w.find("cgroups"); cg != w.end() && cg->is_array())
      for (const Json& c : *cg)
        if (c.is_string()) ws.cgroups.push_back(c.get<std::string>());
    auto set = CpuSet::parse_list(*cpus);
    if (!set) return fail("trace line: workload " + ws.instance + ": bad cpus \"" + *cpus + "\"");
    ws.cpus = *set;
    s.workloads.push_back(std::move(ws));
  }
  return s;
}

std::string format_actions(const Plan& p, std::string_view mode) {
  std::string out;
  const std::string head = "tick " + std::to_string(p.tick) + (mode.empty() ? "" : " " + std::string(mode));
  const char* would = mode == "observe" ? "would " : "";
  for (const auto& a : p.actions) {
    const char* kind = a.kind == Action::Kind::act         ? "act"
                       : a.kind == Action::Kind::give_back ? "give-back"
                                                           : "revert";
    out += head + " " + would + kind + " " + (a.instance.empty() ? "(host)" : a.instance) + " " +
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
