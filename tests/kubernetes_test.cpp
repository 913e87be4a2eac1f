// deploy/kubernetes offline (no cluster here): every manifest validates against the Kubernetes 1.27 and
// Prometheus Operator API schemas (deploy/kubernetes/validate: kubernetes-models' validators and the
// TypeScript compiler's unknown-field check), and the validator does reject a misspelt field, a wrong
// type and a missing required field; the ConfigMap and the PrometheusRule are what generate.sh makes
// from config/keel.toml and the alert rules; the DaemonSet mounts every tree keel reads or writes where
// `keel run --root /host` looks for it, and runs the Dockerfile's command with the unit's capabilities.
// Needs Node.js and the validator's packages (scripts/test.sh runs `npm ci` there); skips otherwise.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "host/sys_roots.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::slurp;

fs::path manifests() { return testing::source_dir() / "deploy/kubernetes"; }

std::string validator_missing() {
  if (run_command("command -v node").first != 0) return "no node (Node.js) on this machine";
  if (!fs::exists(manifests() / "validate/node_modules/kubernetes-models"))
    return "the validator's packages are not installed (cd deploy/kubernetes/validate && npm ci)";
  return "";
}

std::pair<int, std::string> validate(const fs::path& dir) {
  return run_command("node " + (manifests() / "validate/validate.mjs").string() + " " + dir.string());
}

// The lines of `text` from the one after `start` up to (not including) the first that does not begin
// with `prefix`: a YAML block list as the manifests write it.
std::vector<std::string> list_after(const std::string& text, const std::string& start,
                                    const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text.substr(text.find(start) + start.size()));
  std::string line;
  std::getline(in, line);  // the rest of the start line
  while (std::getline(in, line) && line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
  return out;
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(Kubernetes, EveryManifestValidatesAgainstTheApiSchemas) {
  if (auto why = validator_missing(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
  auto [rc, out] = validate(manifests());
  EXPECT_EQ(rc, 0) << out;
  for (const char* kind :
       {"v1/Namespace", "v1/ServiceAccount", "v1/ConfigMap", "apps/v1/DaemonSet", "v1/Service",
        "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"})
    EXPECT_NE(out.find(std::string(" ") + kind + " "), std::string::npos) << kind << " in\n" << out;
  EXPECT_NE(out.find("all 7 documents valid"), std::string::npos) << out;
}

TEST(Kubernetes, TheValidatorRejectsAMisspeltFieldAWrongTypeAndAMissingRequiredOne) {
  if (auto why = validator_missing(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
  testing::TempDir dir;
  for (const auto& e : fs::directory_iterator(manifests()))
    if (e.path().extension() == ".yaml") fs::copy_file(e.path(), dir.path() / e.path().filename());
  auto edit = [&](const std::string& file, const std::string& from, const std::string& to) {
    std::string text = slurp(dir.path() / file);
    ASSERT_NE(text.find(from), std::string::npos) << from << " in " << file;
    std::ofstream(dir.path() / file) << replace_once(text, from, to);
  };
  edit("daemonset.yaml", "mountPropagation: HostToContainer", "mountPropogation: HostToContainer");
  edit("daemonset.yaml", "containerPort: 9477", "containerPort: \"9477\"");
  edit("servicemonitor.yaml", "  selector:\n", "  selectr:\n");
  auto [rc, out] = validate(dir.path());
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("'\"mountPropogation\"' does not exist in type 'IVolumeMount'"), std::string::npos)
      << out;
  EXPECT_NE(out.find("/spec/template/spec/containers/0/ports/0/containerPort must be integer"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find(
          "servicemonitor.yaml#0: monitoring.coreos.com/v1/ServiceMonitor keel: /spec must have required "
          "property selector"),
      std::string::npos)
      << out;
  // The untouched ones stay valid: only the edited documents are named.
  EXPECT_EQ(out.find("error: service.yaml"), std::string::npos) << out;
  EXPECT_EQ(out.find("error: configmap.yaml"), std::string::npos) << out;
}

TEST(Kubernetes, TheConfigMapAndPrometheusRuleAreGeneratedFromTheirSources) {
  testing::TempDir dir;
  auto [rc, out] = run_command("bash " + (manifests() / "generate.sh").string() + " " + dir.path().string());
  ASSERT_EQ(rc, 0) << out;
  for (const char* f : {"configmap.yaml", "prometheusrule.yaml"})
    EXPECT_EQ(slurp(dir.path() / f), slurp(manifests() / f))
        << "deploy/kubernetes/" << f << " is stale: run deploy/kubernetes/generate.sh";
  // The ConfigMap holds the shipped config, and keel accepts it as it comes out of the ConfigMap.
  const std::string cm = slurp(manifests() / "configmap.yaml");
  std::istringstream lines(cm.substr(cm.find("  keel.toml: |")));
  std::string l, rebuilt;
  std::getline(lines, l);
  while (std::getline(lines, l)) rebuilt += (l.size() >= 4 ? l.substr(4) : "") + "\n";
  EXPECT_EQ(rebuilt, slurp(testing::source_dir() / "config/keel.toml"));
  std::ofstream(dir.path() / "keel.toml") << rebuilt;
  auto [crc, cout] =
      run_command(testing::keel_binary().string() + " check-config " + (dir.path() / "keel.toml").string());
  EXPECT_EQ(crc, 0) << cout;
  // Every alert of the rule file is in the PrometheusRule, with the same expression.
  const std::string rules = slurp(testing::source_dir() / "dashboards/rules/keel-alerts.yml");
  const std::string pr = slurp(manifests() / "prometheusrule.yaml");
  auto expr_after = [](const std::string& text, size_t at) {  // the alert's `expr:` line, trimmed
    const size_t e = text.find("expr:", at);
    return e == std::string::npos ? std::string() : text.substr(e, text.find('\n', e) - e);
  };
  size_t alerts = 0;
  const std::string rule = "\n      - alert: ";
  for (size_t at = rules.find(rule); at != std::string::npos; at = rules.find(rule, at + 1), ++alerts) {
    const size_t dash = rules.find("- alert: ", at);
    const std::string name = rules.substr(dash, rules.find('\n', dash) - dash);
    const size_t in_pr = pr.find(name + "\n");
    ASSERT_NE(in_pr, std::string::npos) << name;
    EXPECT_EQ(expr_after(pr, in_pr), expr_after(rules, at)) << name;
  }
  EXPECT_GE(alerts, 10u);
}

TEST(Kubernetes, TheDaemonSetLaysOutTheHostTreesWhereKeelRunRootHostReadsThem) {
  const std::string ds = slurp(manifests() / "daemonset.yaml");
  // The command: the Dockerfile's entrypoint, its --root /host, the unit's config and state paths.
  const std::string dockerfile = slurp(testing::source_dir() / "deploy/docker/Dockerfile");
  EXPECT_NE(dockerfile.find("ENTRYPOINT [\"/usr/sbin/keel\"]"), std::string::npos);
  EXPECT_NE(dockerfile.find(
                "CMD [\"run\", \"--root\", \"/host\", \"--config\", \"/etc/keel/keel.toml\", \"--state\", "
                "\"/var/lib/keel/state\"]"),
            std::string::npos);
  const auto args = list_after(ds, "          args:", "            - ");
  const std::vector<std::string> want = {"run",
                                         "--root",
                                         "/host",
                                         "--config",
                                         "/etc/keel/keel.toml",
                                         "--state",
                                         "/var/lib/keel/state",
                                         "--metrics-listen",
                                         "$(NODE_IP):9477",
                                         "--health-listen",
                                         "127.0.0.1:9478"};
  EXPECT_EQ(args, want);
  // Every probe on the health listener, which the metrics port's clients cannot starve.
  for (const char* probe : {"startupProbe:", "readinessProbe:", "livenessProbe:"}) {
    const size_t at = ds.find(probe);
    ASSERT_NE(at, std::string::npos) << probe;
    const std::string block = ds.substr(at, ds.find("Seconds:", at) - at);
    EXPECT_NE(block.find("host: 127.0.0.1"), std::string::npos) << block;
    EXPECT_NE(block.find("port: 9478"), std::string::npos) << block;
  }
  const std::string unit = slurp(testing::source_dir() / "deploy/systemd/keel.service");
  EXPECT_NE(unit.find("--config /etc/keel/keel.toml --state /var/lib/keel"), std::string::npos);

  // Every mount path of the pod, and the host path of every volume.
  std::set<std::string> mounts;
  for (size_t at = ds.find("mountPath: "); at != std::string::npos; at = ds.find("mountPath: ", at + 1))
    mounts.insert(ds.substr(at + 11, ds.find('\n', at) - at - 11));
  std::set<std::string> host_paths;
  for (size_t at = ds.find("hostPath:\n            path: "); at != std::string::npos;
       at = ds.find("hostPath:\n            path: ", at + 1)) {
    size_t v = at + std::string("hostPath:\n            path: ").size();
    host_paths.insert(ds.substr(v, ds.find('\n', v) - v));
  }
  // The kernel trees of SysRoots::under("/host") (docker's state is optional: a comment says how).
  for (const char* tree :
       {"/sys", "/sys/fs/cgroup", "/sys/fs/resctrl", "/sys/kernel/debug", "/sys/kernel/btf", "/proc"}) {
    EXPECT_TRUE(mounts.count(std::string("/host") + tree)) << "/host" << tree << " mounted";
    EXPECT_TRUE(host_paths.count(tree)) << tree << " from the host";
  }
  // The runtimes' state, for pods by name: SysRoots' containerd and CRI-O roots under /host.
  const SysRoots under_host = SysRoots::under("/host");
  for (const auto& [root, host] : {std::pair{under_host.containerd_state, SysRoots::host().containerd_state},
                                   std::pair{under_host.crio_state, SysRoots::host().crio_state},
                                   std::pair{under_host.kubelet_state, SysRoots::host().kubelet_state}}) {
    EXPECT_TRUE(mounts.count(root.string())) << root << " mounted";
    EXPECT_TRUE(host_paths.count(host.string())) << host << " from the host";
  }
  EXPECT_TRUE(mounts.count("/etc/keel"));
  EXPECT_TRUE(mounts.count("/var/lib/keel"));
  EXPECT_TRUE(host_paths.count("/var/lib/keel")) << "the journal must outlive the pod";
  for (const char* field : {"hostPID: true", "priorityClassName: system-node-critical",
                            "tolerations:", "livenessProbe:", "readinessProbe:", "path: /healthz",
                            "path: /readyz", "readOnlyRootFilesystem: true", "runAsUser: 0", "drop: [ALL]"})
    EXPECT_NE(ds.find(field), std::string::npos) << field;
  // The capabilities are the unit's bounding set.
  std::string caps = testing::between(unit, "\nCapabilityBoundingSet=", "\n");
  EXPECT_EQ(caps, "CAP_BPF CAP_PERFMON");
  EXPECT_NE(ds.find("add: [BPF, PERFMON]"), std::string::npos);
  // The Service's name is the scrape job the rules select on.
  EXPECT_NE(slurp(manifests() / "service.yaml").find("  name: keel\n"), std::string::npos);
  EXPECT_NE(slurp(testing::source_dir() / "dashboards/rules/keel-alerts.yml").find("up{job=\"keel\"}"),
            std::string::npos);
}

}  // namespace
}  // namespace keel
