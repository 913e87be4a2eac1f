#include "host/caps.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "host/fileio.h"

namespace keel {

std::string_view cap_name(Cap c) {
  switch (c) {
    case Cap::dac_override:
      return "CAP_DAC_OVERRIDE";
    case Cap::sys_admin:
      return "CAP_SYS_ADMIN";
    case Cap::sys_nice:
      return "CAP_SYS_NICE";
    case Cap::perfmon:
      return "CAP_PERFMON";
    case Cap::bpf:
      return "CAP_BPF";
  }
  return "CAP_?";
}

Privileges current_privileges(const SysRoots& roots) {
  Privileges p;
  p.euid = ::geteuid();
  p.uid0 = p.euid == 0;
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &head, data) == 0)
    p.effective = data[0].effective | (static_cast<uint64_t>(data[1].effective) << 32);
  // The bounding set answers EINVAL past the kernel's last capability (a 4.19 kernel knows no CAP_BPF).
  unsigned last = 0;
  while (last < 63 && ::prctl(PR_CAPBSET_READ, last + 1, 0, 0, 0) >= 0) ++last;
  p.last_cap = last;
  if (auto text = read_file(roots.proc / "sys/kernel/perf_event_paranoid")) {
    std::string_view t = trim(*text);
    int v = 0;
    if (auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        ec == std::errc() && end == t.data() + t.size())
      p.perf_event_paranoid = v;
  }
  return p;
}

// What the kernel checks, per feature (the sources and the experiments: deploy/README.md).
const std::vector<FeatureRow>& privilege_table() {
  static const std::vector<FeatureRow> table = {
      {Feature::bpf_sensing,
       "bpf_sensing",
       "BPF sensing",
       // bpf(): CAP_BPF for maps and BTF; tracing programs also CAP_PERFMON. Before 5.8: CAP_SYS_ADMIN.
       {{{Cap::bpf, Cap::perfmon}}, {{Cap::sys_admin}}},
       std::nullopt,
       false,
       "keel run, keel top and keel plan cannot sense and stop"},
      {Feature::hw_counters,
       "hw_counters",
       "hardware counters",
       // perf_event_open(pid -1, cpu N): perf_allow_cpu(). At perf_event_paranoid 3 (the default of
       // Debian's and Ubuntu's kernels, whose patch adds it) perf_event_open needs CAP_SYS_ADMIN;
       // upstream takes 3 as 2, where CAP_PERFMON does (this table is the stricter one there).
       {{{Cap::perfmon}, false, 2}, {{Cap::sys_admin}}},
       0,
       false,
       "cache misses, MPKI and IPC are n/a"},
      {Feature::bpf_stats,
       "bpf_stats",
       "BPF run-time stats",
       // bpf(BPF_ENABLE_STATS) checks capable(CAP_SYS_ADMIN) alone.
       {{{Cap::sys_admin}}},
       std::nullopt,
       false,
       "keel's own BPF cost is not measured"},
      {Feature::cgroup_knobs,
       "cgroup_knobs",
       "cgroup knobs",
       // Files owned by root, mode 0644: written by their owner (a delegated subtree: CAP_DAC_OVERRIDE).
       {{{}, true}, {{Cap::dac_override}}},
       std::nullopt,
       false,
       "enforce mode cannot write and stops"},
      {Feature::root_moves,
       "root_moves",
       "moving root's processes",
       // cgroup.procs: euid 0; a cpuset's can_attach: security_task_setscheduler(), which refuses a
       // task whose permitted capabilities are not a subset of the mover's unless it has CAP_SYS_NICE.
       {{{Cap::sys_nice}, true}},
       std::nullopt,
       true,
       "isolate_root_tasks leaves a process that holds capabilities keel lacks in the root cgroup"},
      {Feature::resctrl,
       "resctrl",
       "resctrl writes",
       // Files owned by root; a tasks write checks euid 0 (or the task's uid), no capability.
       {{{}, true}},
       std::nullopt,
       false,
       "the L3-ways and memory-bandwidth steps are off"},
      {Feature::steal_task,
       "steal_task",
       "steal_task writes",
       // debugfs: the directory is root's, 0700, and the features file 0644.
       {{{}, true}, {{Cap::dac_override}}},
       std::nullopt,
       false,
       "the steal_task step is off"},
      {Feature::irq_affinity,
       "irq_affinity",
       "IRQ affinity",
       // /proc/irq/N/smp_affinity_list: root's, 0644; no capability check.
       {{{}, true}, {{Cap::dac_override}}},
       std::nullopt,
       false,
       "IRQs stay where they are"},
  };
  return table;
}

const FeatureRow& privilege_row(Feature f) {
  const auto& t = privilege_table();
  return *std::find_if(t.begin(), t.end(), [f](const FeatureRow& r) { return r.feature == f; });
}

std::vector<Cap> table_caps() {
  std::vector<Cap> out;
  for (const auto& row : privilege_table())
    for (const auto& way : row.ways)
      for (Cap c : way.caps)
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

std::string way_text(const std::vector<Cap>& caps, bool uid0) {
  std::string s = uid0 ? "uid 0" : "";
  for (Cap c : caps) s += (s.empty() ? "" : " and ") + std::string(cap_name(c));
  return s;
}

}  // namespace

Verdict check(Feature f, const Privileges& p) {
  const FeatureRow& row = privilege_row(f);
  Verdict v;
  if (row.paranoid_at_most && p.perf_event_paranoid <= *row.paranoid_at_most) v.held = true;
  std::vector<const Way*> known;  // the ways this kernel has every capability of, at its paranoia
  std::string paranoid_note;
  for (const Way& w : row.ways) {
    if (!std::all_of(w.caps.begin(), w.caps.end(), [&](Cap c) { return p.knows(c); })) continue;
    if (w.paranoid_at_most && p.perf_event_paranoid > *w.paranoid_at_most) {
      paranoid_note = " (" + way_text(w.caps, w.uid0) + " is not enough at kernel.perf_event_paranoid " +
                      std::to_string(p.perf_event_paranoid) + "; it is at " +
                      std::to_string(*w.paranoid_at_most) + " or less)";
      continue;
    }
    known.push_back(&w);
  }
  for (const Way* w : known)
    if ((!w->uid0 || p.uid0) && std::all_of(w->caps.begin(), w->caps.end(), [&](Cap c) { return p.has(c); }))
      v.held = true;
  if (v.held) return v;
  if (known.empty()) {
    v.needs = "a capability this kernel does not know";
    return v;
  }
  // The first way's missing parts, then the other ways whole: "CAP_PERFMON, or CAP_SYS_ADMIN".
  const Way& first = *known.front();
  for (Cap c : first.caps)
    if (!p.has(c)) v.missing.push_back(c);
  v.needs = way_text(v.missing, first.uid0 && !p.uid0);
  v.partial = row.partial && (!first.uid0 || p.uid0);
  for (size_t i = 1; i < known.size(); ++i) v.needs += ", or " + way_text(known[i]->caps, known[i]->uid0);
  if (row.paranoid_at_most)
    v.needs += ", or kernel.perf_event_paranoid <= " + std::to_string(*row.paranoid_at_most) + " (it is " +
               std::to_string(p.perf_event_paranoid) + ")";
  v.needs += paranoid_note;
  return v;
}

std::string describe_held(const Privileges& p) {
  std::string caps;
  for (Cap c : table_caps())
    if (p.knows(c) && p.has(c)) caps += (caps.empty() ? "" : " ") + std::string(cap_name(c));
  return "uid " + std::to_string(p.euid) + ", " + (caps.empty() ? "no capability keel uses" : caps);
}

}  // namespace keel
