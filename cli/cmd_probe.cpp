#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actuators/irq.h"
#include "actuators/sched_features.h"
#include "bpf/features.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/usage.h"
#include "host/caps.h"
#include "host/cgroup.h"
#include "host/fileio.h"
#include "host/json.h"
#include "host/resctrl_info.h"
#include "host/sched_ext.h"
#include "host/systemd.h"
#include "inventory/platforms.h"

namespace keel::cli {

namespace {

std::string yes_no(bool ok, const std::string& why_not) { return ok ? "yes" : "no (" + why_not + ")"; }

// A feature keel uses, as this process could use it here: its privilege (host/caps.h's table) and
// what the kernel offers for it.
struct FeatureState {
  const FeatureRow* row;
  Verdict privilege;
  std::string kernel_lacks;  // why the kernel does not offer it ("" where it does)

  bool available() const { return privilege.held && kernel_lacks.empty(); }
  // "yes", "no (needs CAP_SYS_ADMIN: ...)", "partial (needs CAP_SYS_NICE: ...)", "no (no hardware PMU)".
  std::string text() const {
    if (available()) return "yes";
    std::string why;
    if (!privilege.held) why = "needs " + privilege.needs + ": " + std::string(row->without);
    if (!kernel_lacks.empty()) why += (why.empty() ? "" : "; ") + kernel_lacks;
    return std::string(privilege.partial && kernel_lacks.empty() ? "partial" : "no") + " (" + why + ")";
  }
  Json json() const {
    Json j = {{"available", available()}, {"privilege", privilege.held}};
    if (!privilege.held) {
      Json missing = Json::array();
      for (Cap c : privilege.missing) missing.push_back(std::string(cap_name(c)));
      j["needs"] = privilege.needs;
      j["missing"] = std::move(missing);
      j["without"] = std::string(row->without);
      if (privilege.partial) j["partial"] = true;
    }
    if (!kernel_lacks.empty()) j["kernel"] = kernel_lacks;
    return j;
  }
};

// The kernel's release as (major, minor), from roots.proc's osrelease; nullopt when unreadable.
std::optional<std::pair<int, int>> kernel_release(const SysRoots& roots) {
  auto text = read_file(roots.proc / "sys/kernel/osrelease");
  if (!text) return std::nullopt;
  int major = 0, minor = 0;
  if (std::sscanf(std::string(trim(*text)).c_str(), "%d.%d", &major, &minor) != 2) return std::nullopt;
  return std::make_pair(major, minor);
}

// cgroup v2 under systemd: what keel can act on for a unit's cgroups, said before anything runs.
struct V2Facts {
  bool systemd = false;         // PID 1 is systemd
  std::string systemd_version;  // as systemd answers on its socket
  std::string systemd_error;    // why it did not answer
  // The cpu and cpuset controllers the root and the top-level slices enable for their children
  // (cgroup.subtree_control), where one is missing: "/system.slice: memory pids".
  std::vector<std::pair<std::string, std::string>> lacking;
};

V2Facts v2_facts(const SysRoots& roots, const CgroupHierarchy& unified) {
  V2Facts f;
  f.systemd = systemd_runs(roots);
  if (f.systemd) {
    if (auto v = systemd_version(roots))
      f.systemd_version = *v;
    else
      f.systemd_error = v.error().message();
  }
  std::vector<std::string> places = {"/"};
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(unified.mount, ec))
    if (e.is_directory(ec) && e.path().extension() == ".slice")
      places.push_back("/" + e.path().filename().string());
  std::sort(places.begin() + 1, places.end());
  for (const std::string& p : places) {
    auto text = read_file(unified.mount / std::filesystem::path(p).relative_path() /
                          cgroup_file_name(CgroupFile::subtree_control, /*unified=*/true));
    if (!text) continue;
    const auto on = split_blanks(trim(*text));
    const bool cpu = std::ranges::find(on, "cpu") != on.end(),
               cpuset = std::ranges::find(on, "cpuset") != on.end();
    if (!cpu || !cpuset) f.lacking.emplace_back(p, std::string(trim(*text)));
  }
  return f;
}

// What probe found, each part as its reader returned it (an error is shown, never fatal).
struct Probe {
  SysRoots roots;
  bpf::KernelFeatures f;
  Result<CgroupLayout> layout;
  Result<std::optional<ResctrlInfo>> resctrl;
  std::optional<V2Facts> v2;
  std::optional<std::pair<int, int>> kernel;
  bool resets_affinity = false;
  Result<act::FeatureProbe> steal;
  Privileges privs;
  std::vector<FeatureState> features;
  SchedExt scx{};
};

// The kernel's part of each feature (found by trying), beside its privilege.
std::vector<FeatureState> feature_states(const Probe& p) {
  std::vector<FeatureState> features;
  for (const FeatureRow& row : privilege_table()) {
    FeatureState st{&row, check(row.feature, p.privs), ""};
    switch (row.feature) {
      case Feature::bpf_sensing:
        // Without the privilege the loads fail for that alone (the lines above say EPERM).
        if (st.privilege.held && !p.f.tp_btf && !p.f.raw_tp)
          st.kernel_lacks = "neither tp_btf nor raw_tp programs load";
        break;
      case Feature::hw_counters:
        if (!p.f.hw_pmu) st.kernel_lacks = "no hardware PMU: " + p.f.hw_pmu_error;
        break;
      case Feature::bpf_stats:
        // Tried only with the privilege: without it the kernel's answer says nothing of the kernel.
        if (st.privilege.held && !p.f.bpf_stats) st.kernel_lacks = p.f.bpf_stats_error;
        break;
      case Feature::cgroup_knobs:
      case Feature::root_moves:
        if (!p.layout) st.kernel_lacks = "cgroups: " + p.layout.error().message();
        break;
      case Feature::resctrl:
        if (!p.resctrl)
          st.kernel_lacks = p.resctrl.error().message();
        else if (!p.resctrl->has_value())
          st.kernel_lacks = "not mounted at " + p.roots.resctrl.string();
        break;
      case Feature::steal_task:
        if (!p.steal)
          st.kernel_lacks = p.steal.error().message();
        else if (p.steal->state == act::FeatureState::unsupported)
          st.kernel_lacks = p.steal->why;
        break;
      case Feature::irq_affinity:
        st.kernel_lacks = act::irq_affinity_unwritable(p.roots);
        break;
    }
    features.push_back(std::move(st));
  }
  return features;
}

Probe gather(const SysRoots& roots) {
  Probe p{roots,
          bpf::probe_features(roots),
          discover(roots),
          read_resctrl_info(roots.resctrl),
          std::nullopt,
          kernel_release(roots),
          false,
          act::probe_sched_feature(roots, act::kSteal),
          current_privileges(roots),
          {},
          {}};
  if (p.layout)
    for (const auto& h : p.layout->hierarchies)
      if (h.unified && h.has("cpu")) p.v2 = v2_facts(roots, h);
  // Before 6.2 the kernel reset a task's own affinity on every write of its cpuset (6.2 keeps what the
  // task asked for: user_cpus_ptr), on v1 and v2 alike.
  p.resets_affinity =
      p.kernel && *p.kernel < std::make_pair(6, 2) && p.layout &&
      std::ranges::any_of(p.layout->hierarchies, [](const auto& h) { return h.has("cpuset"); });
  p.scx = read_sched_ext(roots);
  p.features = feature_states(p);
  return p;
}

void print_json(const Probe& p) {
  const auto& f = p.f;
  Json j = {{"btf", f.btf},
            {"tp_btf", f.tp_btf},
            {"raw_tp", f.raw_tp},
            {"hw_pmu", f.hw_pmu},
            {"sw_events", f.sw_events}};
  if (p.layout) {
    j["cgroup_mode"] = to_string(p.layout->mode);
    Json hs = Json::array();
    for (const auto& h : p.layout->hierarchies)
      hs.push_back({{"id", h.id}, {"name", h.name()}, {"mount", h.mount.string()}});
    j["hierarchies"] = std::move(hs);
  }
  if (p.v2) {
    Json lacking = Json::object();
    for (const auto& [path, on] : p.v2->lacking) lacking[path] = on;
    j["v2"] = {
        {"systemd", p.v2->systemd},
        {"systemd_version", p.v2->systemd_version.empty() ? Json(nullptr) : Json(p.v2->systemd_version)},
        {"systemd_error", p.v2->systemd_error.empty() ? Json(nullptr) : Json(p.v2->systemd_error)},
        {"without_cpu_or_cpuset", std::move(lacking)}};
  }
  j["cpuset_write_resets_affinity"] = p.resets_affinity;
  j["resctrl"] = p.resctrl && p.resctrl->has_value();
  j["sched_ext"] = p.scx.state.empty() ? Json(nullptr)
                                       : Json{{"state", p.scx.state},
                                              {"ops", p.scx.ops},
                                              {"switch_all", p.scx.switch_all},
                                              {"honours_cpu_weight", p.scx.honours_weight()},
                                              {"honours_cpu_idle", p.scx.honours_idle()}};
  j["steal_task"] = !p.steal                                           ? "error"
                    : p.steal->state == act::FeatureState::unsupported ? "unsupported"
                    : p.steal->state == act::FeatureState::on          ? "on"
                                                                       : "off";
  Json caps = Json::object();
  for (Cap c : table_caps()) caps[std::string(cap_name(c))] = p.privs.knows(c) && p.privs.has(c);
  j["privileges"] = {{"uid0", p.privs.uid0},
                     {"capabilities", std::move(caps)},
                     {"perf_event_paranoid", p.privs.perf_event_paranoid}};
  Json fs = Json::object();
  for (const auto& st : p.features) fs[std::string(st.row->id)] = st.json();
  j["features"] = std::move(fs);
  std::puts(json_text(j).c_str());
}

std::string resctrl_text(const Probe& p) {
  if (!p.resctrl) return "error (" + p.resctrl.error().message() + ")";
  if (!p.resctrl->has_value()) return "no (not mounted at " + p.roots.resctrl.string() + ")";
  const auto& r = **p.resctrl;
  std::string text = "yes";
  if (r.l3) text += ", L3 " + std::to_string(r.l3_ways) + " ways" + (r.cdp ? " (CDP)" : "");
  if (r.mb) text += ", MB min " + std::to_string(r.min_bandwidth) + "%";
  return text;
}

std::string steal_text(const Probe& p) {
  if (!p.steal) return "error (" + p.steal.error().message() + ")";
  if (p.steal->state == act::FeatureState::unsupported) return "unsupported (" + p.steal->why + ")";
  return std::string(p.steal->state == act::FeatureState::on ? "on" : "off") + " (" + p.steal->file.str() +
         ")";
}

void print_v2(const V2Facts& v2) {
  if (!v2.systemd)
    std::printf("systemd             no (PID 1 is not systemd: keel writes the cgroups' files itself)\n");
  else if (!v2.systemd_error.empty())
    std::printf(
        "systemd             runs, but does not answer keel (%s): a unit without the cpu or cpuset "
        "controller stays without\n",
        v2.systemd_error.c_str());
  else
    std::printf(
        "systemd             %s (keel asks it for a unit's missing cpu or cpuset controller: "
        "CPUWeight=100, StartupAllowedCPUs=<every CPU>, at runtime, given back when keel stops)\n",
        v2.systemd_version.c_str());
  for (const auto& [p, on] : v2.lacking)
    std::printf("  %-17s enables %s for its children (%s)\n", p.c_str(), on.empty() ? "nothing" : on.c_str(),
                v2.systemd && !v2.systemd_error.empty() ? "no cpu.weight, cpu.idle or cpuset.cpus below it"
                : v2.systemd                            ? "keel asks systemd per unit it acts on"
                             : "enable cpu and cpuset there for keel to act below it");
}

void print_text(const Probe& p) {
  const auto& f = p.f;
  std::printf("kernel BTF          %s\n", f.btf ? "yes" : "no");
  std::printf("tp_btf programs     %s\n", yes_no(f.tp_btf, f.tp_btf_error).c_str());
  std::printf("raw_tp programs     %s\n", yes_no(f.raw_tp, f.raw_tp_error).c_str());
  std::printf("hardware PMU        %s\n", yes_no(f.hw_pmu, f.hw_pmu_error).c_str());
  std::printf("software counters   %s\n", yes_no(f.sw_events, f.sw_events_error).c_str());
  if (p.layout) {
    std::printf("cgroups             %s\n", to_string(p.layout->mode));
    for (const auto& h : p.layout->hierarchies)
      std::printf("  hierarchy %-3u %-22s %s\n", h.id, h.name().c_str(), h.mount.c_str());
  } else {
    std::printf("cgroups             error (%s)\n", p.layout.error().message().c_str());
  }
  if (p.v2) print_v2(*p.v2);
  if (p.resets_affinity)
    std::printf(
        "cpuset writes       reset the tasks' own CPU affinity (kernel %d.%d, before 6.2): a task that "
        "set its own (taskset, sched_setaffinity) in a cgroup whose cpuset keel changes loses it\n",
        p.kernel->first, p.kernel->second);
  std::printf("resctrl             %s\n", resctrl_text(p).c_str());
  std::printf("steal_task          %s\n", steal_text(p).c_str());
  std::printf("sched_ext           %s\n",
              p.scx.state.empty() ? "not in this kernel (the fair class schedules every task)"
                                  : (p.scx.describe().substr(11) +
                                     (p.scx.honours_weight() && p.scx.honours_idle()
                                          ? ""
                                          : ": keel run switches off the steps that write what it ignores"))
                                        .c_str());
  std::printf("privileges          %s\n", describe_held(p.privs).c_str());
  for (const auto& st : p.features)
    std::printf("  %-25s %s\n", std::string(st.row->label).c_str(), st.text().c_str());
}

}  // namespace

int cmd_probe(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("probe")->flags);
  if (!args) return usage_error("probe", args.error().message());
  if (!args->positional.empty()) return usage_error("probe", "takes no arguments");
  const Probe p = gather(SysRoots::host());
  if (args->has("json"))
    print_json(p);
  else
    print_text(p);
  return kExitOk;
}

}  // namespace keel::cli
