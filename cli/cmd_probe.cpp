#include <unistd.h>

#include <cstdio>

#include "actuators/sched_features.h"
#include "bpf/features.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "host/cgroup.h"
#include "host/json.h"
#include "host/resctrl_info.h"

namespace keel::cli {

namespace {

std::string yes_no(bool ok, const std::string& why_not) { return ok ? "yes" : "no (" + why_not + ")"; }

}  // namespace

int cmd_probe(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, {.switches = {"json"}, .with_value = {}});
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

  auto steal = act::probe_sched_feature(roots, act::kSteal);
  std::string steal_text;
  if (!steal)
    steal_text = "error (" + steal.error().message() + ")";
  else if (steal->state == act::FeatureState::unsupported)
    steal_text = "unsupported (" + steal->why + ")";
  else
    steal_text =
        std::string(steal->state == act::FeatureState::on ? "on" : "off") + " (" + steal->file.str() + ")";

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
    j["resctrl"] = resctrl && resctrl->has_value();
    j["steal_task"] = !steal                                           ? "error"
                      : steal->state == act::FeatureState::unsupported ? "unsupported"
                      : steal->state == act::FeatureState::on          ? "on"
                                                                       : "off";
    std::puts(json_text(j).c_str());
    return kExitOk;
  }

  bool root = ::geteuid() == 0;
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
  std::printf("resctrl             %s\n", resctrl_text.c_str());
  std::printf("steal_task          %s\n", steal_text.c_str());
  if (!root)
    std::printf("note: not root; BPF loads need CAP_BPF/CAP_PERFMON, so 'no' above may only mean that\n");
  return kExitOk;
}

}  // namespace keel::cli
