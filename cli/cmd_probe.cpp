#include <algorithm>
#include <cstdio>
#include <optional>

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

}  // namespace

int cmd_probe(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("probe")->flags);
  if (!args) return usage_error("probe", args.error().message());
  if (!args->positional.empty()) return usage_error("probe", "takes no arguments");
  const SysRoots roots = SysRoots::host();

  auto f = bpf::probe_features(roots);
  auto layout = discover(roots);
  auto resctrl = read_resctrl_info(roots.resctrl);
  std::string resctrl_text = "no (not mounted at " + roots.resctrl.string() + ")";
  if (!resctrl)
    resctrl_text = "error (" + resctrl.error().message() + ")";
  else if (resctrl->has_value()) {
    const auto& r = **resctrl;
    resctrl_text = "yes";
    if (r.l3) resctrl_text += ", L3 " + std::to_string(r.l3_ways) + " ways" + (r.cdp ? " (CDP)" : "");
    if (r.mb) resctrl_text += ", MB min " + std::to_string(r.min_bandwidth) + "%";
  }

  std::optional<V2Facts> v2;
  if (layout)
    for (const auto& h : layout->hierarchies)
      if (h.unified && h.has("cpu")) v2 = v2_facts(roots, h);
  // Before 6.2 the kernel reset a task's own affinity on every write of its cpuset (6.2 keeps what the
  // task asked for: user_cpus_ptr), on v1 and v2 alike.
  const auto kernel = kernel_release(roots);
  const bool resets_affinity =
      kernel && *kernel < std::make_pair(6, 2) && layout &&
      std::ranges::any_of(layout->hierarchies, [](const auto& h) { return h.has("cpuset"); });

  auto steal = act::probe_sched_feature(roots, act::kSteal);
  std::string steal_text;
  if (!steal)
    steal_text = "error (" + steal.error().message() + ")";
  else if (steal->state == act::FeatureState::unsupported)
    steal_text = "unsupported (" + steal->why + ")";
  else
    steal_text =
        std::string(steal->state == act::FeatureState::on ? "on" : "off") + " (" + steal->file.str() + ")";

  // Each feature: its privilege, and the kernel's part (found above by trying).
  const Privileges privs = current_privileges(roots);
  std::vector<FeatureState> features;
  for (const FeatureRow& row : privilege_table()) {
    FeatureState st{&row, check(row.feature, privs), ""};
    switch (row.feature) {
      case Feature::bpf_sensing:
        // Without the privilege the loads fail for that alone (the lines above say EPERM).
        if (st.privilege.held && !f.tp_btf && !f.raw_tp)
          st.kernel_lacks = "neither tp_btf nor raw_tp programs load";
        break;
      case Feature::hw_counters:
        if (!f.hw_pmu) st.kernel_lacks = "no hardware PMU: " + f.hw_pmu_error;
        break;
      case Feature::bpf_stats:
        // Tried only with the privilege: without it the kernel's answer says nothing of the kernel.
        if (st.privilege.held && !f.bpf_stats) st.kernel_lacks = f.bpf_stats_error;
        break;
      case Feature::cgroup_knobs:
      case Feature::root_moves:
        if (!layout) st.kernel_lacks = "cgroups: " + layout.error().message();
        break;
      case Feature::resctrl:
        if (!resctrl)
          st.kernel_lacks = resctrl.error().message();
        else if (!resctrl->has_value())
          st.kernel_lacks = "not mounted at " + roots.resctrl.string();
        break;
      case Feature::steal_task:
        if (!steal)
          st.kernel_lacks = steal.error().message();
        else if (steal->state == act::FeatureState::unsupported)
          st.kernel_lacks = steal->why;
        break;
      case Feature::irq_affinity:
        st.kernel_lacks = act::irq_affinity_unwritable(roots);
        break;
    }
    features.push_back(std::move(st));
  }

  if (args->has("json")) {
    Json j = {{"btf", f.btf},
              {"tp_btf", f.tp_btf},
              {"raw_tp", f.raw_tp},
              {"hw_pmu", f.hw_pmu},
              {"sw_events", f.sw_events}};
    if (layout) {
      j["cgroup_mode"] = to_string(layout->mode);
      Json hs = Json::array();
      for (const auto& h : layout->hierarchies)
        hs.push_back({{"id", h.id}, {"name", h.name()}, {"mount", h.mount.string()}});
      j["hierarchies"] = std::move(hs);
    }
    if (v2) {
      Json lacking = Json::object();
      for (const auto& [p, on] : v2->lacking) lacking[p] = on;
      j["v2"] = {{"systemd", v2->systemd},
                 {"systemd_version", v2->systemd_version.empty() ? Json(nullptr) : Json(v2->systemd_version)},
                 {"systemd_error", v2->systemd_error.empty() ? Json(nullptr) : Json(v2->systemd_error)},
                 {"without_cpu_or_cpuset", std::move(lacking)}};
    }
    j["cpuset_write_resets_affinity"] = resets_affinity;
    j["resctrl"] = resctrl && resctrl->has_value();
    j["steal_task"] = !steal                                           ? "error"
                      : steal->state == act::FeatureState::unsupported ? "unsupported"
                      : steal->state == act::FeatureState::on          ? "on"
                                                                       : "off";
    Json caps = Json::object();
    for (Cap c : table_caps()) caps[std::string(cap_name(c))] = privs.knows(c) && privs.has(c);
    j["privileges"] = {{"uid0", privs.uid0},
                       {"capabilities", std::move(caps)},
                       {"perf_event_paranoid", privs.perf_event_paranoid}};
    Json fs = Json::object();
    for (const auto& st : features) fs[std::string(st.row->id)] = st.json();
    j["features"] = std::move(fs);
    std::puts(json_text(j).c_str());
    return kExitOk;
  }

  std::printf("kernel BTF          %s\n", f.btf ? "yes" : "no");
  std::printf("tp_btf programs     %s\n", yes_no(f.tp_btf, f.tp_btf_error).c_str());
  std::printf("raw_tp programs     %s\n", yes_no(f.raw_tp, f.raw_tp_error).c_str());
  std::printf("hardware PMU        %s\n", yes_no(f.hw_pmu, f.hw_pmu_error).c_str());
  std::printf("software counters   %s\n", yes_no(f.sw_events, f.sw_events_error).c_str());
  if (layout) {
    std::printf("cgroups             %s\n", to_string(layout->mode));
    for (const auto& h : layout->hierarchies)
      std::printf("  hierarchy %-3u %-22s %s\n", h.id, h.name().c_str(), h.mount.c_str());
  } else {
    std::printf("cgroups             error (%s)\n", layout.error().message().c_str());
  }
  if (v2) {
    if (!v2->systemd)
      std::printf("systemd             no (PID 1 is not systemd: keel writes the cgroups' files itself)\n");
    else if (!v2->systemd_error.empty())
      std::printf(
          "systemd             runs, but does not answer keel (%s): a unit without the cpu or cpuset "
          "controller stays without\n",
          v2->systemd_error.c_str());
    else
      std::printf(
          "systemd             %s (keel asks it for a unit's missing cpu or cpuset controller: "
          "CPUWeight=100, StartupAllowedCPUs=<every CPU>, at runtime, given back when keel stops)\n",
          v2->systemd_version.c_str());
    for (const auto& [p, on] : v2->lacking)
      std::printf(
          "  %-17s enables %s for its children (%s)\n", p.c_str(), on.empty() ? "nothing" : on.c_str(),
          v2->systemd && !v2->systemd_error.empty() ? "no cpu.weight, cpu.idle or cpuset.cpus below it"
          : v2->systemd                             ? "keel asks systemd per unit it acts on"
                                                    : "enable cpu and cpuset there for keel to act below it");
  }
  if (resets_affinity)
    std::printf(
        "cpuset writes       reset the tasks' own CPU affinity (kernel %d.%d, before 6.2): a task that "
        "set its own (taskset, sched_setaffinity) in a cgroup whose cpuset keel changes loses it\n",
        kernel->first, kernel->second);
  std::printf("resctrl             %s\n", resctrl_text.c_str());
  std::printf("steal_task          %s\n", steal_text.c_str());
  std::printf("privileges          %s\n", describe_held(privs).c_str());
  for (const auto& st : features)
    std::printf("  %-25s %s\n", std::string(st.row->label).c_str(), st.text().c_str());
  return kExitOk;
}

}  // namespace keel::cli
