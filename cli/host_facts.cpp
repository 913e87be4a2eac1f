#include "cli/host_facts.h"

#include <cstdio>

#include "host/resctrl_info.h"
#include "host/topology.h"

namespace keel::cli {

Result<GatheredFacts> gather_host_facts(const SysRoots& roots, const FactsSource& src) {
  GatheredFacts g;
  auto topo = src.synthetic ? Topology::synthetic(*src.synthetic) : Topology::detect(roots);
  if (!topo) return std::unexpected(topo.error());
  g.facts.cpus = topo->online();
  g.facts.numa_nodes = static_cast<unsigned>(topo->numa_nodes().size());
  for (const auto& n : topo->numa_nodes()) g.facts.numa_cpus.push_back(n.cpus);
  for (const auto& c : topo->cores()) g.facts.cores.push_back(c.cpus);

  // A synthetic host has no resctrl unless one is named; the real host has whatever is mounted.
  std::optional<std::filesystem::path> resctrl_root;
  if (src.resctrl)
    resctrl_root = *src.resctrl;
  else if (!src.synthetic)
    resctrl_root = roots.resctrl;
  if (!resctrl_root) {
    g.notes.push_back(
        "no resctrl described (--resctrl DIR): l3_ways and mba_percent bounds not checked against hardware");
    return g;
  }
  auto info = read_resctrl_info(*resctrl_root);
  if (!info) return std::unexpected(info.error());
  if (!info->has_value()) {
    // A directory the user named must be a resctrl tree: a typo must not turn the checks off.
    if (src.resctrl) return fail("no resctrl info/ directory under --resctrl " + *src.resctrl);
    g.notes.push_back("resctrl is not mounted at " + resctrl_root->string() +
                      ": l3_ways and mba_percent bounds not checked against hardware");
    return g;
  }
  const ResctrlInfo& r = **info;
  if (r.l3) {
    g.facts.l3_ways = r.l3_ways;
    g.facts.min_cbm_bits = r.min_cbm_bits;
  } else {
    g.notes.push_back("resctrl has no L3 allocation: l3_ways bounds not checked");
  }
  if (r.mb)
    g.facts.mba_min = r.min_bandwidth;
  else
    g.notes.push_back("resctrl has no MB allocation: mba_percent bounds not checked");
  return g;
}

std::expected<config::Config, int> load_config_for_host(const std::string& cmd, const std::string& file,
                                                        const SysRoots& roots, const FactsSource& src) {
  auto facts = gather_host_facts(roots, src);
  if (!facts) {
    std::fprintf(stderr, "keel %s: cannot describe the host: %s\n", cmd.c_str(),
                 facts.error().message().c_str());
    return std::unexpected(1);
  }
  auto cfg = config::load_file(file, facts->facts);
  if (!cfg) {
    for (const auto& d : cfg.error()) std::fprintf(stderr, "%s\n", d.str().c_str());
    return std::unexpected(2);
  }
  for (const auto& w : cfg->warnings) std::fprintf(stderr, "keel %s: %s\n", cmd.c_str(), w.str().c_str());
  return *cfg;
}

SysRoots with_state_roots(SysRoots roots, const config::HostSection& host,
                          const std::optional<std::string>& under) {
  for (const auto& r : host.state_roots) {
    std::filesystem::path p = under ? std::filesystem::path(*under) / r.path.relative_path() : r.path;
    if (r.key == "docker_root") roots.docker_state = p;
    if (r.key == "containerd_state") roots.containerd_state = p;
    if (r.key == "crio_state") roots.crio_state = p;
    if (r.key == "podman_store") roots.podman_state = p;
    if (r.key == "libvirt_state") roots.libvirt_state = p;
    if (r.key == "kubelet_root") roots.kubelet_state = p;
  }
  return roots;
}

}  // namespace keel::cli
