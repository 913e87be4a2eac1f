#include "config/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "tests/support/tmp_tree.h"

namespace keel::config {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kSource = testing::source_dir();

// A host as hwloc's synthetic "pack:P numa:1 l3:1 core:C pu:T" (P = nodes) describes it: siblings
// are adjacent, core k = {kT, ..., kT+T-1}, node n = the next C cores.
HostFacts smt_host(unsigned nodes, unsigned cores_per_node, unsigned smt) {
  HostFacts f;
  unsigned cpus = nodes * cores_per_node * smt;
  f.cpus = CpuSet::range(0, cpus - 1);
  f.numa_nodes = nodes;
  for (unsigned n = 0; n < nodes; ++n) {
    unsigned per_node = cores_per_node * smt;
    f.numa_cpus.push_back(CpuSet::range(n * per_node, (n + 1) * per_node - 1));
  }
  for (unsigned k = 0; k < nodes * cores_per_node; ++k)
    f.cores.push_back(CpuSet::range(k * smt, (k + 1) * smt - 1));
  return f;
}

// The host every bad config is checked against: the one cli_test gives the binary,
// --synthetic 'pack:2 numa:1 l3:1 core:16 pu:1' with an 11-way resctrl.
HostFacts corpus_host() {
  HostFacts f = smt_host(2, 16, 1);
  f.l3_ways = 11;
  f.min_cbm_bits = 1;
  f.mba_min = 10;
  return f;
}

HostFacts host_with_cpus(unsigned first, unsigned last, unsigned numa_nodes = 1) {
  HostFacts f;
  f.cpus = CpuSet::range(first, last);
  f.numa_nodes = numa_nodes;
  return f;
}

std::string messages(const Diagnostics& diags) {
  std::string out;
  for (const auto& d : diags) out += d.str() + "\n";
  return out;
}

// Loads text that must be valid; fails the test with every diagnostic otherwise.
Config load_ok(std::string_view text, const HostFacts& facts = {}) {
  auto c = load_string(text, "test.toml", facts);
  EXPECT_TRUE(c.has_value()) << messages(c.error());
  return c ? *c : Config{};
}

Diagnostics load_bad(std::string_view text, const HostFacts& facts = {}) {
  auto c = load_string(text, "test.toml", facts);
  EXPECT_FALSE(c.has_value()) << "expected diagnostics for:\n" << text;
  return c ? Diagnostics{} : c.error();
}

std::string first_message(std::string_view text, const HostFacts& facts = {}) {
  auto diags = load_bad(text, facts);
  return diags.empty() ? "" : diags.front().message;
}

// ---------------------------------------------------------------------------------------------
// The bad-config corpus: each file holds one mistake and states the diagnostic on its first line.

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kSource / "tests/fixtures/bad_configs"))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  std::ranges::sort(files);
  return files;
}

class BadConfig : public ::testing::TestWithParam<fs::path> {};

TEST_P(BadConfig, FirstDiagnosticIsTheExpectedOne) {
  const fs::path& file = GetParam();
  std::ifstream in(file);
  std::string first_line;
  std::getline(in, first_line);
  const std::string kTag = "# expect: ";
  ASSERT_TRUE(first_line.starts_with(kTag)) << file << " must start with '" << kTag << "'";

  auto c = load_file(file, corpus_host());
  ASSERT_FALSE(c.has_value()) << file << " loaded without diagnostics";
  EXPECT_EQ(c.error().front().str(), file.string() + ":" + first_line.substr(kTag.size()));
  // One mistake, one diagnostic: no follow-on noise.
  EXPECT_EQ(c.error().size(), 1u) << messages(c.error());
}

std::string test_name(const ::testing::TestParamInfo<fs::path>& param) {
  std::string name = param.param.stem().string();
  std::ranges::replace_if(
      name, [](unsigned char c) { return !std::isalnum(c); }, '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadConfig, ::testing::ValuesIn(corpus_files()), test_name);

TEST(BadConfigCorpus, HasAtLeast25Files) { EXPECT_GE(corpus_files().size(), 25u); }

// ---------------------------------------------------------------------------------------------
// Shipped configs.

TEST(ShippedConfig, DefaultLoadsOnATwoCpuHost) {
  auto c = load_file(kSource / "config/keel.toml", host_with_cpus(0, 1));
  ASSERT_TRUE(c.has_value()) << messages(c.error());
}

TEST(ShippedConfig, DefaultLoadsWithoutHostFacts) {
  auto c = load_file(kSource / "config/keel.toml", {});
  ASSERT_TRUE(c.has_value()) << messages(c.error());
}

TEST(ShippedConfig, DefaultLoadsOnAOneCpuHost) {
  auto c = load_file(kSource / "config/keel.toml", host_with_cpus(0, 0));
  ASSERT_TRUE(c.has_value()) << messages(c.error());
}

TEST(ShippedConfig, DefaultObservesEveryBusyCgroupUnderTheUsualParents) {
  auto c = load_file(kSource / "config/keel.toml", {});
  ASSERT_TRUE(c.has_value()) << messages(c.error());
  EXPECT_EQ(c->daemon.mode, Mode::observe);
  EXPECT_EQ(c->daemon.period, 1s);
  EXPECT_EQ(c->daemon.metrics_listen, "127.0.0.1:9477");
  EXPECT_TRUE(c->host.reserved_cpus.empty());  // one CPU, reserved, would leave none for workloads
  std::vector<std::string> globs;
  for (const auto& w : c->workloads) {
    EXPECT_EQ(w.klass, WorkloadClass::best_effort) << w.name;
    EXPECT_TRUE(w.match.has_tasks && w.match.each) << w.name;
    EXPECT_FALSE(w.slo.runqueue_p99) << w.name << ": a best-effort SLO is never used";
    globs.push_back(w.match.cgroup);
  }
  for (const char* parent :
       {"/system.slice/**", "/docker/**", "/kubepods/**", "/kubepods.slice/**", "/machine.slice/**"})
    EXPECT_NE(std::ranges::find(globs, parent), globs.end()) << parent;
}

// The commented critical example in keel.toml must stay valid when a user uncomments it.
TEST(ShippedConfig, DefaultsCommentedCriticalExampleIsValid) {
  std::ifstream in(kSource / "config/keel.toml");
  std::stringstream text;
  bool in_example = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "# [[workload]]") in_example = true;
    if (in_example && !line.starts_with("# ")) in_example = false;
    text << (in_example ? line.substr(2) : line) << "\n";
  }
  ASSERT_NE(text.str().find("\nclass = \"critical\""), std::string::npos);
  Config c = load_ok(text.str(), corpus_host());
  ASSERT_FALSE(c.workloads.empty());
  EXPECT_EQ(c.workloads.front().klass, WorkloadClass::critical);
}

TEST(ShippedConfig, RedisNginxVm) {
  // The seeds' VM: 32 vCPUs, one NUMA node, 16 cores x 2 threads, no resctrl.
  auto c = load_file(kSource / "config/examples/redis-nginx-vm.toml", smt_host(1, 16, 2));
  ASSERT_TRUE(c.has_value()) << messages(c.error());
  EXPECT_EQ(c->daemon.mode, Mode::enforce);
  ASSERT_EQ(c->workloads.size(), 2u);
  const Workload& redis = c->workloads[0];
  EXPECT_EQ(redis.match.docker, "redis");
  EXPECT_EQ(redis.klass, WorkloadClass::critical);
  EXPECT_EQ(c->workloads[1].match.docker, "nginx");
  EXPECT_EQ(c->workloads[1].klass, WorkloadClass::best_effort);
  EXPECT_EQ(c->host.reserved_cpus.to_list(), "0-1");
}

TEST(ShippedConfig, KubernetesGuaranteedPods) {
  // A 64-CPU node with two NUMA nodes: "pack:2 numa:1 l3:1 core:16 pu:2".
  auto c = load_file(kSource / "config/examples/k8s-guaranteed-pods.toml", smt_host(2, 16, 2));
  ASSERT_TRUE(c.has_value()) << messages(c.error());
  int critical_pods = 0;
  for (const auto& w : c->workloads)
    if (w.klass == WorkloadClass::critical && !w.match.pod.empty()) ++critical_pods;
  EXPECT_GE(critical_pods, 1);
}

TEST(ShippedConfig, MpamTwoVms) {
  HostFacts kunpeng = smt_host(4, 32, 2);  // "pack:2 numa:2 l3:1 core:32 pu:2": 4 nodes of 64 CPUs
  kunpeng.l3_ways = 28;
  kunpeng.min_cbm_bits = 1;
  kunpeng.mba_min = 1;
  auto c = load_file(kSource / "config/examples/mpam-two-vms.toml", kunpeng);
  ASSERT_TRUE(c.has_value()) << messages(c.error());
  ASSERT_EQ(c->workloads.size(), 2u);
  const Bounds& vm1 = c->workloads[0].bounds;
  const Bounds& vm2 = c->workloads[1].bounds;
  EXPECT_EQ(c->workloads[0].klass, WorkloadClass::critical);
  EXPECT_EQ(vm1.mba_percent->max, 50);
  EXPECT_EQ(vm1.l3_ways->max, 14);  // 14 x 2 MiB = 28 MiB
  EXPECT_EQ(vm2.mba_percent->max, 20);
  EXPECT_EQ(vm2.l3_ways->max, 7);  // 14 MiB
  EXPECT_TRUE(c->actuators.resctrl);
}

// ---------------------------------------------------------------------------------------------
// Good parses: values land in the structs.

constexpr std::string_view kFull = R"([daemon]
mode = "enforce"
period = "2.5s"
state_dir = "/run/keel"
metrics_listen = "[::1]:9100"
hierarchy = "cpuset"

[host]
reserved_cpus = "0,16"

[[workload]]
name = "redis"
match = { cgroup = "/docker/*", has_tasks = true, each = true }
class = "critical"
slo = { runqueue_p99 = "200us" }
bounds = { cpus = { min = 2, max = 14 }, cpu_pool = "0-15", numa = "single", shares = { min = 1024, max = 8192 }, l3_ways = { min = 2, max = 10 }, mba_percent = { min = 20, max = 100 } }

[[workload]]
name = "batch"
match = { systemd_unit = "batch-*.service" }

[actuators]
cpuset = false
cpu_weight = false
resctrl = true
steal_task = true
irq_affinity = true
irq_names = ["virtio*-input.*", "mlx5_comp*"]
weight_mapping = "runc"
)";

TEST(Load, DaemonAndHostValues) {
  Config c = load_ok(kFull, corpus_host());
  EXPECT_EQ(c.file, "test.toml");
  EXPECT_EQ(c.daemon.mode, Mode::enforce);
  EXPECT_EQ(c.daemon.period, 2500ms);
  EXPECT_EQ(c.daemon.state_dir, "/run/keel");
  EXPECT_EQ(c.daemon.metrics_listen, "[::1]:9100");
  EXPECT_EQ(c.daemon.hierarchy, Hierarchy::cpuset);
  EXPECT_EQ(c.host.reserved_cpus.to_list(), "0,16");
}

TEST(Load, WorkloadValues) {
  Config c = load_ok(kFull, corpus_host());
  ASSERT_EQ(c.workloads.size(), 2u);
  const Workload& w = c.workloads[0];
  EXPECT_EQ(w.name, "redis");
  EXPECT_EQ(w.match.cgroup, "/docker/*");
  EXPECT_TRUE(w.match.has_tasks);
  EXPECT_TRUE(w.match.each);
  EXPECT_EQ(w.klass, WorkloadClass::critical);
  EXPECT_EQ(w.slo.runqueue_p99, 200us);
  ASSERT_TRUE(w.bounds.cpus && w.bounds.cpu_pool && w.bounds.shares && w.bounds.l3_ways &&
              w.bounds.mba_percent);
  EXPECT_EQ(w.bounds.cpus->min, 2);
  EXPECT_EQ(w.bounds.cpus->max, 14);
  EXPECT_EQ(w.bounds.cpu_pool->to_list(), "0-15");
  EXPECT_EQ(w.bounds.numa, NumaPolicy::single);
  EXPECT_EQ(w.bounds.shares->min, 1024);
  EXPECT_EQ(w.bounds.shares->max, 8192);
  EXPECT_EQ(w.bounds.l3_ways->max, 10);
  EXPECT_EQ(w.bounds.mba_percent->min, 20);
}

TEST(Load, DefaultsForWhatIsNotWritten) {
  Config c = load_ok(kFull, corpus_host());
  ASSERT_EQ(c.workloads.size(), 2u);
  const Workload& batch = c.workloads[1];
  EXPECT_EQ(batch.match.systemd_unit, "batch-*.service");
  EXPECT_FALSE(batch.match.has_tasks);
  EXPECT_FALSE(batch.match.each);
  EXPECT_EQ(batch.klass, WorkloadClass::best_effort);  // best-effort may omit the SLO
  EXPECT_FALSE(batch.slo.runqueue_p99);
  EXPECT_FALSE(batch.bounds.cpus || batch.bounds.cpu_pool || batch.bounds.shares);
  EXPECT_EQ(batch.bounds.numa, NumaPolicy::any);
}

TEST(Load, ActuatorValues) {
  Config c = load_ok(kFull, corpus_host());
  EXPECT_FALSE(c.actuators.cpuset);
  EXPECT_FALSE(c.actuators.cpu_weight);
  EXPECT_TRUE(c.actuators.resctrl);
  EXPECT_TRUE(c.actuators.steal_task);
  EXPECT_TRUE(c.actuators.irq_affinity);
  EXPECT_EQ(c.actuators.irq_names, (std::vector<std::string>{"virtio*-input.*", "mlx5_comp*"}));
  EXPECT_EQ(c.actuators.weight_mapping, WeightMapping::runc);
}

TEST(Load, EmptyFileIsAllDefaults) {
  Config c = load_ok("");
  Config defaults;
  EXPECT_EQ(c.daemon.mode, defaults.daemon.mode);
  EXPECT_EQ(c.daemon.period, defaults.daemon.period);
  EXPECT_EQ(c.daemon.state_dir, defaults.daemon.state_dir);
  EXPECT_EQ(c.daemon.metrics_listen, defaults.daemon.metrics_listen);
  EXPECT_EQ(c.daemon.hierarchy, Hierarchy::automatic);
  EXPECT_TRUE(c.host.reserved_cpus.empty());
  EXPECT_TRUE(c.workloads.empty());
  EXPECT_EQ(c.actuators.cpuset, defaults.actuators.cpuset);
  EXPECT_EQ(c.actuators.resctrl, defaults.actuators.resctrl);
}

TEST(Load, PositionsAreRecorded) {
  Config c = load_ok(kFull, corpus_host());
  ASSERT_EQ(c.workloads.size(), 2u);
  const Workload& w = c.workloads[0];
  EXPECT_EQ(c.daemon.period_pos.line, 3);
  EXPECT_EQ(c.daemon.period_pos.col, 10);
  EXPECT_EQ(c.host.reserved_cpus_pos.line, 9);
  EXPECT_EQ(w.pos.line, 11);  // the [[workload]] header
  EXPECT_EQ(w.pos.col, 1);
  EXPECT_EQ(w.name_pos.line, 12);
  EXPECT_EQ(w.name_pos.col, 8);
  EXPECT_EQ(w.match.pos.line, 13);
  EXPECT_EQ(w.match.selector_pos.col, 20);
  ASSERT_TRUE(w.bounds.cpus);
  EXPECT_EQ(w.bounds.cpus->min_pos.line, 16);
  EXPECT_EQ(w.bounds.cpus->min_pos.col, 27);
  EXPECT_EQ(w.bounds.cpu_pool_pos.col, 53);
  EXPECT_EQ(c.workloads[1].pos.line, 18);
}

TEST(Load, SubtableAndInlineArrayForms) {
  Config a = load_ok(R"(
[[workload]]
name = "redis"
match = { docker = "redis" }
class = "critical"
[workload.slo]
runqueue_p99 = "1ms"
[workload.bounds]
cpus = { min = 1, max = 2 }
)");
  ASSERT_EQ(a.workloads.size(), 1u);
  EXPECT_EQ(a.workloads[0].slo.runqueue_p99, 1ms);
  EXPECT_EQ(a.workloads[0].bounds.cpus->max, 2);

  Config b = load_ok(
      R"(workload = [ { name = "a", match = { pod = "0b9e8d7c-6a5f-4e3d-8c2b-1a0f9e8d7c6b" } }, { name = "b", match = { pid_file = "/run/b.pid" } } ])");
  ASSERT_EQ(b.workloads.size(), 2u);
  EXPECT_EQ(b.workloads[0].match.pod, "0b9e8d7c-6a5f-4e3d-8c2b-1a0f9e8d7c6b");
  EXPECT_EQ(b.workloads[1].match.pid_file, "/run/b.pid");
}

TEST(Load, DockerNameMayCarryDockersLeadingSlash) {
  load_ok(R"(
[[workload]]
name = "web"
match = { docker = "/nginx" }
)");
}

// ---------------------------------------------------------------------------------------------
// Diagnostics.

TEST(Diagnostics, StrIsFileLineColMessage) {
  Diagnostic d{"keel.toml", {3, 7}, "something is wrong"};
  EXPECT_EQ(d.str(), "keel.toml:3:7: something is wrong");
}

TEST(Diagnostics, SeveralAreCollectedInFileOrder) {
  auto diags = load_bad(R"([daemon]
perod = "1s"
mode = "enforcing"
[host]
reserved_cpus = "0-40"
[[workload]]
name = "a"
match = { cgroup = "/a" }
class = "critical"
[[workload]]
name = "a"
match = {}
[actuators]
cpuset = 1
)",
                        corpus_host());
  ASSERT_EQ(diags.size(), 7u) << messages(diags);
  for (size_t i = 1; i < diags.size(); ++i)
    EXPECT_LE(std::tie(diags[i - 1].pos.line, diags[i - 1].pos.col),
              std::tie(diags[i].pos.line, diags[i].pos.col));
  std::vector<int> lines;
  for (const auto& d : diags) lines.push_back(d.pos.line);
  EXPECT_EQ(lines, (std::vector<int>{2, 3, 5, 6, 11, 12, 14}));
  EXPECT_EQ(diags[0].message, "unknown key 'perod' in [daemon] (did you mean 'period'?)");
  EXPECT_EQ(
      diags[3].message,
      "workload 'a': class \"critical\" needs slo.runqueue_p99 (e.g. slo = { runqueue_p99 = \"200us\" })");
  EXPECT_EQ(diags[4].message, "workload 'a': duplicate name, first used on line 7");
}

TEST(Diagnostics, SyntaxErrorIsTheOnlyDiagnostic) {
  auto diags = load_bad("[daemon]\nperiod = 1s\nbogus = 1\n");
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].pos.line, 2);
  EXPECT_TRUE(diags[0].message.starts_with("syntax error")) << diags[0].message;
}

TEST(Diagnostics, UnreadableFile) {
  keel::testing::TempDir tmp;
  fs::path missing = tmp.path() / "nope.toml";
  auto c = load_file(missing, {});
  ASSERT_FALSE(c.has_value());
  ASSERT_EQ(c.error().size(), 1u);
  EXPECT_EQ(c.error()[0].str(), missing.string() + ":1:1: cannot read: No such file or directory");
}

// toml++ 3.3 overflows the stack on a key of 50,000 dotted parts (it walks what it built
// recursively): such input is refused with a position before toml++ sees it, and so are arrays and
// inline tables nested too deep and a file too large.
TEST(Diagnostics, HostileNestingIsRefusedBeforeTomlReadsIt) {
  struct Case {
    std::string text, where, message;
  };
  auto repeat = [](const std::string& s, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += s;
    return out;
  };
  const std::string dotted = "a dotted key of more than 16 parts";
  const std::string nested = "arrays and inline tables nested more than 16 deep";
  const std::vector<Case> cases = {
      {"a" + repeat(".a", 50000) + " = 1\n", "1:32", dotted},
      {"a" + repeat(" . a", 50000) + " = 1\n", "1:63", dotted},
      {"\"a\"" + repeat(".'a'", 50000) + " = 1\n", "1:64", dotted},
      {"[daemon]\n[a" + repeat(".a", 50000) + "]\n", "2:33", dotted},
      {"[[a" + repeat(".a", 50000) + "]]\n", "1:34", dotted},
      {"x = { y" + repeat(".b", 50000) + " = 1 }\n", "1:38", dotted},
      {"x = [{ y = 1 }, { y" + repeat(".b", 50000) + " = 1 }]\n", "1:50", dotted},
      {"a = " + repeat("[", 50000) + "\n", "1:21", nested},
      {"a = " + repeat("{b = ", 50000) + "1" + repeat("}", 50000) + "\n", "1:85", nested},
      {"a = [" + repeat("{b = [", 8) + "1" + repeat("]}", 8) + "]\n", "1:53", nested},
      {std::string(1048577, '#'), "1:1", "the file is 1048577 bytes; a config is at most 1048576 (1 MiB)"},
  };
  for (const Case& c : cases) {
    auto diags = load_bad(c.text);
    ASSERT_EQ(diags.size(), 1u) << c.text.substr(0, 60);
    EXPECT_EQ(diags[0].str(), "test.toml:" + c.where + ": " + c.message) << c.text.substr(0, 60);
  }
}

// What looks like nesting inside strings, comments and values is none: the bounds count keys and
// brackets only where TOML has them.
TEST(Diagnostics, BoundsIgnoreStringsCommentsAndValues) {
  const std::string brackets(100, '[');
  const std::string dots = "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s";
  load_ok("# " + brackets + " " + dots + "\n[daemon]  # " + brackets + "\nstate_dir = \"/" + brackets + dots +
          "\"\n[host]\ndocker_root = '/" + brackets + dots +
          "'\n[[workload]]\nname = \"w\"\nmatch = { cgroup = \"\"\"/" + dots +
          "\\\"\"\"\" }\n[[workload]]\nname = \"v\"\nmatch = { cgroup = '''/" + dots + "'''' }  # ]]]]\n");
  // A key of exactly 16 parts and 16 levels of nesting are within the bounds: toml++ reads them.
  auto diags = load_bad("a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p = [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]\n");
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].message,
            "unknown key 'a' at the top level (known keys: daemon, host, workload, actuators)");
}

TEST(Diagnostics, TheIssuesSketchNeedsOneLineInlineTables) {
  // TOML 1.0 inline tables cannot span lines; the message says what to do instead.
  auto diags = load_bad(
      "[[workload]]\nname = \"r\"\nmatch = { cgroup = \"/r\" }\nbounds = { cpus = { min = 1, max = 2 },\n"
      "  numa = \"single\" }\n");
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_NE(diags[0].message.find("must fit on one line"), std::string::npos) << diags[0].message;
}

TEST(Diagnostics, TypoOfARequiredKeyIsReportedOnce) {
  auto diags = load_bad("[[workload]]\nnme = \"redis\"\nmatch = { docker = \"redis\" }\n");
  ASSERT_EQ(diags.size(), 1u) << messages(diags);
  EXPECT_EQ(diags[0].message, "workload #1: unknown key 'nme' in [[workload]] (did you mean 'name'?)");
}

TEST(Diagnostics, UnknownTopLevelKey) {
  EXPECT_EQ(first_message("mode = \"observe\"\n"),
            "unknown key 'mode' at the top level (known keys: daemon, host, workload, actuators)");
}

TEST(Diagnostics, WrongTypeOfASection) {
  EXPECT_EQ(first_message("daemon = \"observe\"\n"), "daemon must be a table, got string");
}

// ---------------------------------------------------------------------------------------------
// Validation rules not in the corpus, and facts that are unknown.

constexpr std::string_view kL3Workload = R"(
[[workload]]
name = "batch"
match = { cgroup = "/batch" }
bounds = { l3_ways = { min = 1, max = 4 } }
)";

TEST(Validate, L3WaysBelowMinCbmBits) {
  HostFacts f;
  f.l3_ways = 11;
  f.min_cbm_bits = 2;
  EXPECT_EQ(first_message(kL3Workload, f),
            "workload 'batch': bounds.l3_ways.min = 1 is below resctrl's min_cbm_bits 2");
}

TEST(Validate, UnknownHostFactsSkipTheirChecks) {
  load_ok(R"(
[host]
reserved_cpus = "0-200"
[[workload]]
name = "big"
match = { cgroup = "/big" }
bounds = { cpus = { min = 150, max = 190 }, cpu_pool = "0-400", numa = "single", l3_ways = { min = 1, max = 64 }, mba_percent = { min = 1, max = 100 } }
)");
}

TEST(Validate, ReservedCpusDoNotMakeCriticalPoolsOverlap) {
  load_ok(R"(
[host]
reserved_cpus = "0"
[[workload]]
name = "a"
match = { cgroup = "/a" }
class = "critical"
slo = { runqueue_p99 = "100us" }
bounds = { cpu_pool = "0-7" }
[[workload]]
name = "b"
match = { cgroup = "/b" }
class = "critical"
slo = { runqueue_p99 = "100us" }
bounds = { cpu_pool = "0,8-15" }
)",
          corpus_host());
}

TEST(Validate, BestEffortPoolsMayOverlapCriticalOnes) {
  load_ok(R"(
[[workload]]
name = "a"
match = { cgroup = "/a" }
class = "critical"
slo = { runqueue_p99 = "100us" }
bounds = { cpu_pool = "0-7" }
[[workload]]
name = "b"
match = { cgroup = "/b" }
bounds = { cpu_pool = "0-15" }
)",
          corpus_host());
}

TEST(Validate, CpusMaxAgainstHostMinusReservedWithoutAPool) {
  EXPECT_EQ(first_message(R"(
[host]
reserved_cpus = "0-1"
[[workload]]
name = "a"
match = { cgroup = "/a" }
bounds = { cpus = { min = 1, max = 31 } }
)",
                          corpus_host()),
            "workload 'a': bounds.cpus.max = 31 is more than the 30 usable CPUs of this host "
            "(host.reserved_cpus 0-1 are never given out)");
}

TEST(Validate, PeriodLimits) {
  load_ok("[daemon]\nperiod = \"10ms\"\n");
  load_ok("[daemon]\nperiod = \"60m\"\n");
  EXPECT_EQ(first_message("[daemon]\nperiod = \"2h\"\n"),
            "daemon.period must be between 10ms and 1h, got 2h");
}

TEST(Validate, MetricsListen) {
  load_ok("[daemon]\nmetrics_listen = \"0.0.0.0:1\"\n");
  load_ok("[daemon]\nmetrics_listen = \"localhost:65535\"\n");
  load_ok("[daemon]\nmetrics_listen = \":9477\"\n");  // every address
  EXPECT_EQ(first_message("[daemon]\nmetrics_listen = \":\"\n"),
            "daemon.metrics_listen = \":\": missing port after ':' (write e.g. \"127.0.0.1:9477\")");
  EXPECT_EQ(first_message("[daemon]\nmetrics_listen = \"127.0.0.1:0\"\n"),
            "daemon.metrics_listen = \"127.0.0.1:0\": the port must be a number in 1..65535");
  EXPECT_EQ(
      first_message("[daemon]\nmetrics_listen = \"[]:80\"\n"),
      "daemon.metrics_listen = \"[]:80\": the brackets hold no IPv6 address (write e.g. \"[::1]:9477\")");
}

TEST(Validate, PidFileMustBeAbsolute) {
  EXPECT_EQ(first_message("[[workload]]\nname = \"a\"\nmatch = { pid_file = \"run/a.pid\" }\n"),
            "workload 'a': match.pid_file = \"run/a.pid\" must be an absolute path");
}

TEST(Validate, MetricsMaxWorkloadsIsBounded) {
  EXPECT_EQ(first_message("[daemon]\nmetrics_max_workloads = 10001\n"),
            "daemon.metrics_max_workloads must be between 0 and 10000 (about 90 series each), got 10001");
  EXPECT_EQ(first_message("[daemon]\nmetrics_max_workloads = -1\n"),
            "daemon.metrics_max_workloads must be between 0 and 10000 (about 90 series each), got -1");
  EXPECT_EQ(first_message("[daemon]\nmetrics_max_workloads = \"many\"\n"),
            "daemon.metrics_max_workloads must be an integer, got string");
  load_ok("[daemon]\nmetrics_max_workloads = 0\n");  // every instance under "other"
}

TEST(Validate, RollbackIsAutoOrNotOnExit) {
  EXPECT_EQ(load_ok("").daemon.rollback, Rollback::automatic);
  EXPECT_EQ(load_ok("[daemon]\nrollback = \"not_on_exit\"\n").daemon.rollback, Rollback::not_on_exit);
  EXPECT_EQ(load_ok("[daemon]\nrollback = \"auto\"\n").daemon.rollback, Rollback::automatic);
  auto diags = load_bad("[daemon]\nrollback = \"never\"\n");
  ASSERT_FALSE(diags.empty());
  EXPECT_EQ(diags.front().pos.line, 2u);
  EXPECT_NE(diags.front().message.find("daemon.rollback"), std::string::npos) << diags.front().message;
  EXPECT_NE(diags.front().message.find("not_on_exit"), std::string::npos) << diags.front().message;
}

// keel judges only critical workloads against an SLO: a best-effort workload's slo is accepted with a
// warning at its position (it was silently ignored), a critical one's and a best-effort one without
// slo give none; the shipped config has no warning.
TEST(Validate, ABestEffortSloIsAcceptedWithAWarningAtItsPosition) {
  auto c = load_ok(
      "[[workload]]\nname = \"batch\"\nmatch = { cgroup = \"/b\" }\nclass = \"best-effort\"\n"
      "slo = { runqueue_p99 = \"5ms\" }\n"
      "[[workload]]\nname = \"web\"\nmatch = { cgroup = \"/w\" }\nclass = \"critical\"\n"
      "slo = { runqueue_p99 = \"200us\" }\n"
      "[[workload]]\nname = \"other-be\"\nmatch = { cgroup = \"/o\" }\n");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0].pos.line, 5u);
  EXPECT_EQ(c.warnings[0].str(),
            "test.toml:5:7: warning: workload 'batch': slo is ignored: keel judges only critical workloads "
            "against an SLO (drop it, or make the workload class = \"critical\")");
  EXPECT_TRUE(load_ok("[[workload]]\nname = \"b\"\nmatch = { cgroup = \"/b\" }\n[workload.slo]\nmpki = 3\n")
                  .warnings.size() == 1);
  auto shipped = load_file(kSource / "config/keel.toml", {});
  ASSERT_TRUE(shipped);
  EXPECT_TRUE(shipped->warnings.empty());
}

TEST(Validate, TheMetricsLabelsOtherAndHostAreNoWorkloadNames) {
  EXPECT_EQ(first_message("[[workload]]\nname = \"host\"\nmatch = { cgroup = \"/a\" }\n"),
            "workload 'host': name \"host\" is reserved (the metrics' label for host-wide knobs)");
  load_ok("[[workload]]\nname = \"others\"\nmatch = { cgroup = \"/a\" }\n");
}

// The same check for an address given on keel run's command line.
TEST(Validate, ListenAddressProblemIsTheConfigsCheck) {
  EXPECT_EQ(listen_address_problem("127.0.0.1:9477"), std::nullopt);
  EXPECT_EQ(listen_address_problem("127.0.0.1:0"), "the port must be a number in 1..65535");
  EXPECT_EQ(listen_address_problem("127.0.0.1:99999"), "the port must be a number in 1..65535");
  EXPECT_EQ(listen_address_problem("127.0.0.1:9477s"), "the port must be a number in 1..65535");
}

TEST(Validate, MetricsListenHosts) {
  for (const char* ok : {"127.0.0.1:9477", "0.0.0.0:1", "localhost:9477", "metrics-1.example.com:80",
                         "[::1]:9477", "[::]:9477", "[fe80::1%eth0]:9477", "[2001:db8::42]:65535"})
    load_ok("[daemon]\nmetrics_listen = \"" + std::string(ok) + "\"\n");
  auto msg = [](std::string_view address) {
    return first_message("[daemon]\nmetrics_listen = \"" + std::string(address) + "\"\n");
  };
  EXPECT_EQ(msg("not a host!:9477"),
            "daemon.metrics_listen = \"not a host!:9477\": \"not a host!\" is not a host name or IP address "
            "(a host name has only letters, digits, '-' and '.')");
  EXPECT_EQ(msg("[zz]:9477"), "daemon.metrics_listen = \"[zz]:9477\": \"zz\" is not an IPv6 address");
  EXPECT_EQ(msg("[::1]"), "daemon.metrics_listen = \"[::1]\": missing port (write e.g. \"[::1]:9477\")");
  EXPECT_EQ(msg("localhost"),
            "daemon.metrics_listen = \"localhost\": missing port (write e.g. \"localhost:9477\")");
  EXPECT_EQ(msg("127.0.0.1:"),
            "daemon.metrics_listen = \"127.0.0.1:\": missing port after ':' (write e.g. \"127.0.0.1:9477\")");
  EXPECT_EQ(msg("[::1:9477"),
            "daemon.metrics_listen = \"[::1:9477\": the '[' of an IPv6 host has no closing ']' (write e.g. "
            "\"[::1]:9477\")");
  EXPECT_EQ(msg("[::1]9477"),
            "daemon.metrics_listen = \"[::1]9477\": expected ':' and a port after ']', got \"9477\"");
  EXPECT_EQ(msg("127.0.0.256:80"),
            "daemon.metrics_listen = \"127.0.0.256:80\": \"127.0.0.256\" is not an IPv4 address");
  EXPECT_EQ(msg("-bad-.example:80"),
            "daemon.metrics_listen = \"-bad-.example:80\": \"-bad-.example\" is not a host name (each part "
            "between dots is 1 to 63 letters, digits or '-', and does not start or end with '-')");
  EXPECT_EQ(msg("a..b:80").find("is not a host name"),
            std::string("daemon.metrics_listen = \"a..b:80\": \"a..b\" ").size());
  EXPECT_EQ(msg("fe80::1:9477"),
            "daemon.metrics_listen = \"fe80::1:9477\": an IPv6 host must be written in brackets, e.g. "
            "\"[::1]:9477\"");
}

// ---------------------------------------------------------------------------------------------
// Match selectors: exactly one, not empty, and one that can match something.

std::string match_message(std::string_view match) {
  return first_message("[[workload]]\nname = \"a\"\nmatch = " + std::string(match) + "\n");
}

TEST(Match, PodsByNamespaceAndNameContainersPodmanAndVmsByName) {
  auto ok = [](const std::string& match, const std::string& rest = "") {
    load_ok("[[workload]]\nname = \"a\"\nmatch = " + match + "\n" + rest);
  };
  ok(R"({ pod = "trading/matching-engine-*" })");
  ok(R"({ pod = "*/*", container = "redis" })");
  ok(R"({ podman = "web" })");
  ok(R"({ vm = "db1" })", "[workload.bounds]\nvcpu_pinning = \"one_per_core\"\n");
  auto says = [](const std::string& match, const std::string& what, const std::string& rest = "") {
    const std::string got = first_message("[[workload]]\nname = \"a\"\nmatch = " + match + "\n" + rest);
    EXPECT_NE(got.find(what), std::string::npos) << match << rest << ": " << got;
  };
  says(R"({ pod = "trading/" })", "is not NAMESPACE/NAME");
  says(R"({ pod = "a/b/c" })", "is not NAMESPACE/NAME");
  says(R"({ pod = "Trading/x" })", "is not NAMESPACE/NAME");
  says(R"({ cgroup = "/a", container = "redis" })",
       "match.container names a container in a pod: it needs match.pod");
  says(R"({ pod = "6f1c2a9e-3b7d-4e52-9a81-0c4d5e6f7a8b", container = "redis" })",
       "match.container needs the pod as NAMESPACE/NAME");
  says(R"({ pod = "*/*", container = "Redis!" })", "is not a container name");
  // A critical rule's namespace is written out: any tenant could make a pod of that name elsewhere.
  const std::string critical = "class = \"critical\"\nslo = { runqueue_p99 = \"200us\" }\n";
  ok(R"({ pod = "trading/matching-engine-*" })", critical);
  says(R"({ pod = "*/redis-0" })", "takes pods from any namespace that fits the glob", critical);
  says(R"({ pod = "trad?ng/redis-0", container = "redis" })", "a critical workload needs its namespace",
       critical);
  ok(R"({ pod = "*/redis-0" })");  // best-effort: a glob takes nothing from anyone
  says(R"({ vm = "a/b" })", "is not a libvirt domain name");
  says(R"({ podman = "-x" })", "is not a container name or id");
  says(R"({ cgroup = "/a" })", "bounds.vcpu_pinning places a VM's vCPU threads: it needs match.vm",
       "[workload.bounds]\nvcpu_pinning = \"one_per_core\"\n");
  says(R"({ vm = "db1" })", "vcpu_pinning", "[workload.bounds]\nvcpu_pinning = \"spread\"\n");
}

TEST(Host, RuntimeStateRootsAreAbsolutePaths) {
  auto c = load_ok("[host]\ndocker_root = \"/srv/docker\"\nlibvirt_state = \"/run/libvirt/qemu\"\n");
  ASSERT_EQ(c.host.state_roots.size(), 2u);
  EXPECT_EQ(c.host.state_roots[0].key, "docker_root");
  EXPECT_EQ(c.host.state_roots[0].path, "/srv/docker");
  for (const char* bad : {"srv/docker", "/srv/../docker"}) {
    const std::string got = first_message("[host]\ndocker_root = \"" + std::string(bad) + "\"\n");
    EXPECT_NE(got.find("host.docker_root = \"" + std::string(bad) + "\" must be an absolute, normal path"),
              std::string::npos)
        << got;
  }
}

TEST(Match, PodMustBeAKubernetesUid) {
  for (const char* uid : {"6f1c2a9e-3b7d-4e52-9a81-0c4d5e6f7a8b", "6f1c2a9e_3b7d_4e52_9a81_0c4d5e6f7a8b",
                          "6F1C2A9E-3B7D-4E52-9A81-0C4D5E6F7A8B"})
    load_ok("[[workload]]\nname = \"a\"\nmatch = { pod = \"" + std::string(uid) + "\" }\n");
  for (const char* bad :
       {"-", "0b9e8d7c-6a5f", "6f1c2a9e-3b7d-4e52-9a81-0c4d5e6f7a8", "6f1c2a9e-3b7d-4e52-9a81-0c4d5e6f7a8b0",
        "6f1c2a9e3b7d4e529a810c4d5e6f7a8b", "6f1c2a9e-3b7d-4e52-9a81-0c4d5e6f7a8g",
        "6f1c2a9e-3b7d-4e52-9a8-10c4d5e6f7a8b", "pod6f1c2a9e-3b7d-4e52-9a81-0c4d5e6f7a8b"})
    EXPECT_NE(match_message("{ pod = \"" + std::string(bad) + "\" }")
                  .find("is neither NAMESPACE/NAME nor a Kubernetes pod uid"),
              std::string::npos)
        << bad;
}

TEST(Match, SystemdUnitWithASlashCanNeverMatch) {
  EXPECT_EQ(
      match_message("{ systemd_unit = \"/system.slice/redis*.service\" }"),
      "workload 'a': match.systemd_unit = \"/system.slice/redis*.service\" can never match: it is compared "
      "with the unit name only (the last element of a cgroup path); to match a cgroup path write cgroup = "
      "\"/system.slice/redis*.service\"");
  load_ok("[[workload]]\nname = \"a\"\nmatch = { systemd_unit = \"machine-qemu*vm2*.scope\" }\n");
}

TEST(Match, EmptyNameAndSelectorAreValueErrors) {
  EXPECT_EQ(first_message("[[workload]]\nname = \"\"\nmatch = { docker = \"a\" }\n"),
            "workload #1: name must not be empty");
  EXPECT_EQ(match_message("{ pid_file = \"\" }"), "workload 'a': match.pid_file must not be empty");
}

TEST(Match, AnEmptySelectorStillCountsAsOne) {
  EXPECT_EQ(match_message("{ docker = \"\", cgroup = \"/a\" }"),
            "workload 'a': match has several selectors (cgroup, docker); use exactly one");
}

TEST(Match, ASelectorOfTheWrongTypeIsReportedOnce) {
  auto diags = load_bad("[[workload]]\nname = \"a\"\nmatch = { docker = 1 }\n");
  ASSERT_EQ(diags.size(), 1u) << messages(diags);
  EXPECT_EQ(diags[0].message, "workload 'a': match.docker must be a string, got integer 1");
  auto name = load_bad("[[workload]]\nname = 7\nmatch = { docker = \"a\" }\n");
  ASSERT_EQ(name.size(), 1u) << messages(name);
  EXPECT_EQ(name[0].message, "workload #1: name must be a string, got integer 7");
}

TEST(Match, AMatchThatIsNotATableIsReportedOnce) {
  auto diags = load_bad("[[workload]]\nname = \"a\"\nmatch = \"redis\"\n");
  ASSERT_EQ(diags.size(), 1u) << messages(diags);
  EXPECT_EQ(diags[0].message, "workload 'a': match must be a table, got string");
}

// ---------------------------------------------------------------------------------------------
// What the CPU planner can place: critical workloads get whole cores (host/cpu_planner.h).

std::string critical_with(std::string_view reserved, std::string_view bounds) {
  return "[host]\nreserved_cpus = \"" + std::string(reserved) +
         "\"\n[[workload]]\nname = \"redis\"\nmatch = { docker = \"redis\" }\nclass = \"critical\"\n"
         "slo = { runqueue_p99 = \"200us\" }\nbounds = " +
         std::string(bounds) + "\n";
}

TEST(Room, CriticalNeedsWholeCoresInOneNode) {
  // One node, cores {0,1} {2,3} {4,5} {6,7}; CPU 4 reserved leaves {2,3} as the pool's only whole core.
  EXPECT_EQ(
      first_message(
          critical_with("4", R"({ cpu_pool = "2-5", cpus = { min = 3, max = 3 }, numa = "single" })"),
          smt_host(1, 4, 2)),
      "workload 'redis': bounds.cpus.min = 3 needs 2 whole cores in one NUMA node (numa = \"single\"), but "
      "the most whole cores any node has in cpu_pool 2-5 outside reserved_cpus is 1 (node 0)");
}

TEST(Room, CriticalNeedsWholeCoresInItsPool) {
  auto diags =
      load_bad(critical_with("4", R"({ cpu_pool = "2-5", cpus = { min = 3, max = 3 } })"), smt_host(1, 4, 2));
  ASSERT_EQ(diags.size(), 1u) << messages(diags);
  EXPECT_EQ(
      diags[0].message,
      "workload 'redis': bounds.cpus.min = 3 needs 2 whole cores, but cpu_pool 2-5 outside reserved_cpus "
      "has only 1 whole core (CPUs 2-3)");
  EXPECT_EQ(diags[0].pos.line, 8);
  // The same pool without the reservation has two whole cores.
  load_ok(critical_with("", R"({ cpu_pool = "2-5", cpus = { min = 3, max = 3 } })"), smt_host(1, 4, 2));
  // Best-effort work is not given whole cores: 3 CPUs of the pool are enough.
  load_ok(
      "[host]\nreserved_cpus = \"4\"\n[[workload]]\nname = \"b\"\nmatch = { docker = \"b\" }\n"
      "bounds = { cpu_pool = \"2-5\", cpus = { min = 3, max = 3 } }\n",
      smt_host(1, 4, 2));
}

TEST(Room, CriticalWithoutCpusNeedsOneWholeCore) {
  EXPECT_EQ(
      first_message(critical_with("", R"({ cpu_pool = "1-2" })"), smt_host(1, 4, 2)),
      "workload 'redis': class \"critical\" needs at least 1 whole core, but cpu_pool 1-2 has no whole core "
      "(a critical workload gets whole cores: every SMT sibling in the pool, none reserved)");
  auto diags = load_bad(critical_with("0,2,4,6", R"({ shares = { min = 2, max = 4 } })"), smt_host(1, 4, 2));
  ASSERT_EQ(diags.size(), 1u) << messages(diags);
  EXPECT_EQ(diags[0].pos.line, 3);  // the [[workload]] header
  EXPECT_EQ(
      diags[0].message,
      "workload 'redis': class \"critical\" needs at least 1 whole core, but this host outside reserved_cpus "
      "has no whole core (a critical workload gets whole cores: every SMT sibling in the pool, none "
      "reserved)");
}

TEST(Room, WholeHostWithoutAPool) {
  // 2 nodes x 2 cores x 2 threads; reserving CPU 0 and 4 breaks one core in each node.
  EXPECT_EQ(
      first_message(critical_with("0,4", R"({ cpus = { min = 3, max = 4 }, numa = "single" })"),
                    smt_host(2, 2, 2)),
      "workload 'redis': bounds.cpus.min = 3 needs 2 whole cores in one NUMA node (numa = \"single\"), but "
      "the most whole cores any node has outside reserved_cpus is 1 (node 0)");
  load_ok(critical_with("0,4", R"({ cpus = { min = 3, max = 4 } })"), smt_host(2, 2, 2));
  EXPECT_EQ(
      first_message(critical_with("0,4", R"({ cpus = { min = 5, max = 6 } })"), smt_host(2, 2, 2)),
      "workload 'redis': bounds.cpus.min = 5 needs 3 whole cores, but this host outside reserved_cpus has "
      "only 2 whole cores (CPUs 2-3,6-7)");
}

TEST(Room, BestEffortWithSingleNumaNeedsTheCpusInOneNode) {
  EXPECT_EQ(
      first_message("[[workload]]\nname = \"b\"\nmatch = { docker = \"b\" }\n"
                    "bounds = { cpu_pool = \"14-17\", cpus = { min = 3, max = 4 }, numa = \"single\" }\n",
                    corpus_host()),
      "workload 'b': bounds.cpus.min = 3 needs 3 CPUs in one NUMA node (numa = \"single\"), but the most "
      "CPUs any node has in cpu_pool 14-17 is 2 (node 0)");
}

TEST(Room, NodeSizeIsCheckedFirstAndOnce) {
  auto diags =
      load_bad(critical_with("0-1", R"({ cpus = { min = 20, max = 24 }, numa = "single" })"), corpus_host());
  ASSERT_EQ(diags.size(), 1u) << messages(diags);
  EXPECT_EQ(
      diags[0].message,
      "workload 'redis': bounds.numa = \"single\" but bounds.cpus.min = 20 is more than the 16 CPUs of one "
      "NUMA node");
}

TEST(Room, UnevenNodesAreMeasuredByTheLargest) {
  HostFacts f = smt_host(1, 8, 1);
  f.numa_cpus = {CpuSet::range(0, 5), CpuSet::range(6, 7)};
  f.numa_nodes = 2;
  EXPECT_EQ(
      first_message(critical_with("", R"({ cpus = { min = 7, max = 8 }, numa = "single" })"), f),
      "workload 'redis': bounds.numa = \"single\" but bounds.cpus.min = 7 is more than the 6 CPUs of the "
      "largest NUMA node");
}

TEST(Room, UnknownCoresAndNodesSkipTheCheck) {
  // CPUs known, cores and nodes not: nothing to say about whole cores.
  load_ok(critical_with("4", R"({ cpu_pool = "2-5", cpus = { min = 3, max = 3 }, numa = "single" })"),
          host_with_cpus(0, 7));
  load_ok(critical_with("4", R"({ cpu_pool = "2-5", cpus = { min = 3, max = 3 }, numa = "single" })"), {});
}

TEST(Room, ReservedCoveringTheHost) {
  EXPECT_EQ(first_message(
                "[host]\nreserved_cpus = \"0-7\"\n[[workload]]\nname = \"a\"\nmatch = { docker = \"a\" }\n",
                smt_host(1, 4, 2)),
            "host.reserved_cpus covers every CPU; nothing is left for workloads");
  // Without workloads there is nobody to leave CPUs to.
  load_ok("[host]\nreserved_cpus = \"0-7\"\n", smt_host(1, 4, 2));
  // One diagnostic, not one more for each workload that then has no room.
  auto diags = load_bad(critical_with("0-7", R"({ cpu_pool = "0-3", cpus = { min = 2, max = 4 } })") +
                            "[[workload]]\nname = \"b\"\nmatch = { docker = \"b\" }\nbounds = { cpus = { min "
                            "= 1, max = 2 } }\n",
                        smt_host(1, 4, 2));
  ASSERT_EQ(diags.size(), 1u) << messages(diags);
  EXPECT_EQ(diags[0].pos.line, 2);
}

// ---------------------------------------------------------------------------------------------
// Critical workloads' pools; without a cpu_pool the pool is the whole host.

std::string two_critical(std::string_view bounds_a, std::string_view bounds_b) {
  std::string out = "[host]\nreserved_cpus = \"0-1\"\n";
  for (auto [name, bounds] : {std::pair{"a", bounds_a}, std::pair{"b", bounds_b}}) {
    out += "[[workload]]\nname = \"" + std::string(name) + "\"\nmatch = { docker = \"" + name +
           "\" }\nclass = \"critical\"\nslo = { runqueue_p99 = \"200us\" }\n";
    if (!bounds.empty()) out += "bounds = " + std::string(bounds) + "\n";
  }
  return out;
}

TEST(CriticalPools, APoolOverlapsACriticalWorkloadWithout) {
  auto diags = load_bad(two_critical("", R"({ cpu_pool = "8-15" })"), corpus_host());
  ASSERT_EQ(diags.size(), 1u) << messages(diags);
  EXPECT_EQ(diags[0].pos.line, 13);
  EXPECT_EQ(
      diags[0].message,
      "workload 'b': bounds.cpu_pool shares CPUs 8-15 with critical workload 'a' (line 3), which has no "
      "cpu_pool (the whole host); pools of critical workloads must not overlap");
}

TEST(CriticalPools, TwoWithoutPools) {
  for (const HostFacts& f : {corpus_host(), HostFacts{}}) {
    auto diags = load_bad(two_critical("", R"({ cpus = { min = 1, max = 2 } })"), f);
    ASSERT_EQ(diags.size(), 1u) << messages(diags);
    EXPECT_EQ(diags[0].pos.line, 13);  // b's bounds
    EXPECT_EQ(diags[0].message,
              "workload 'b': has no bounds.cpu_pool (the whole host), and neither has critical workload 'a' "
              "(line 3); pools of critical workloads must not overlap (give each critical workload its own "
              "cpu_pool)");
  }
}

TEST(CriticalPools, WithoutHostFactsAPoolStillOverlapsTheWholeHost) {
  EXPECT_EQ(
      first_message(two_critical(R"({ cpu_pool = "0-7" })", "")),
      "workload 'b': has no bounds.cpu_pool (the whole host), so it shares CPUs 2-7 with critical workload "
      "'a' (line 3); pools of critical workloads must not overlap (give each critical workload its own "
      "cpu_pool)");
}

TEST(CriticalPools, DisjointPoolsAndOneCriticalWithoutAPoolAreFine) {
  load_ok(two_critical(R"({ cpu_pool = "0-15" })", R"({ cpu_pool = "16-31" })"), corpus_host());
  load_ok(two_critical(R"({ cpu_pool = "0-1,2-15" })", R"({ cpu_pool = "0-1,16-31" })"), corpus_host());
  load_ok(critical_with("0-1", "{ shares = { min = 2, max = 4 } }") +
              "[[workload]]\nname = \"b\"\nmatch = { docker = \"b\" }\nbounds = { cpu_pool = \"2-31\" }\n",
          corpus_host());
}

TEST(CriticalPools, AnUnreadablePoolIsNotTheWholeHost) {
  auto diags = load_bad(two_critical(R"({ cpu_pool = "2-15" })", R"({ cpu_pool = "x" })"), corpus_host());
  ASSERT_EQ(diags.size(), 1u) << messages(diags);
  EXPECT_NE(diags[0].message.find("is not a valid CPU list"), std::string::npos) << diags[0].message;
}

// ---------------------------------------------------------------------------------------------
// Durations and names.

// Why the text is not a duration; "(parsed)" when it is one.
std::string duration_error(std::string_view text) {
  auto d = parse_duration(text);
  return d ? "(parsed)" : d.error().what;
}

TEST(Duration, Parses) {
  EXPECT_EQ(parse_duration("1s"), 1s);
  EXPECT_EQ(parse_duration("200us"), 200us);
  EXPECT_EQ(parse_duration("1.5ms"), 1500us);
  EXPECT_EQ(parse_duration("0.25s"), 250ms);
  EXPECT_EQ(parse_duration("2m"), 120s);
  EXPECT_EQ(parse_duration("1h"), 3600s);
  EXPECT_EQ(parse_duration("750ns"), 750ns);
  EXPECT_EQ(parse_duration(" 5ms "), 5ms);
}

TEST(Duration, Rejects) {
  EXPECT_EQ(duration_error("100"), "no unit (write e.g. \"100ms\"; units: ns, us, ms, s, m, h)");
  EXPECT_EQ(duration_error("1x"), "unknown unit 'x' (units: ns, us, ms, s, m, h)");
  EXPECT_EQ(duration_error("0s"), "must be greater than 0");
  EXPECT_EQ(duration_error("0.1ns"), "must be greater than 0");
  EXPECT_EQ(duration_error("ms"), "expected a number and a unit, e.g. \"200us\"");
  EXPECT_EQ(duration_error("-1s"), "expected a number and a unit, e.g. \"200us\"");
  EXPECT_EQ(duration_error("1.s"), "expected digits after '.'");
  EXPECT_EQ(duration_error("99999999999999h"), "too large");
  EXPECT_EQ(duration_error("99999999999999999999ns"), "too large");
}

TEST(Duration, LargestValues) {
  // The fraction can carry a whole part that fits over the top.
  EXPECT_EQ(duration_error("2562047.9h"), "too large");
  EXPECT_EQ(parse_duration("2562047h"), std::chrono::hours(2562047));
  EXPECT_EQ(parse_duration("153722867.28m"), 153722867min + 16800ms);
  EXPECT_EQ(parse_duration("9223372036854775807ns"), std::chrono::nanoseconds::max());
  EXPECT_EQ(duration_error("9223372036854775808ns"), "too large");
  EXPECT_EQ(parse_duration("9223372036.854775807s"), std::chrono::nanoseconds::max());
  EXPECT_EQ(duration_error("9223372036.854775808s"), "too large");
  EXPECT_EQ(duration_error("153722867.281m"), "too large");
}

TEST(Duration, TooLargeInAConfig) {
  EXPECT_EQ(first_message("[daemon]\nperiod = \"2562047.9h\"\n"),
            "daemon.period: bad duration \"2562047.9h\": too large");
}

TEST(Duration, Formats) {
  EXPECT_EQ(format_duration(1s), "1s");
  EXPECT_EQ(format_duration(1500us), "1500us");
  EXPECT_EQ(format_duration(10ms), "10ms");
  EXPECT_EQ(format_duration(1h), "1h");
  EXPECT_EQ(format_duration(90s), "90s");
  EXPECT_EQ(format_duration(7ns), "7ns");
}

TEST(Names, ToString) {
  EXPECT_STREQ(to_string(Mode::observe), "observe");
  EXPECT_STREQ(to_string(Mode::enforce), "enforce");
  EXPECT_STREQ(to_string(Hierarchy::automatic), "auto");
  EXPECT_STREQ(to_string(Hierarchy::unified), "unified");
  EXPECT_STREQ(to_string(WorkloadClass::best_effort), "best-effort");
  EXPECT_STREQ(to_string(WorkloadClass::critical), "critical");
  EXPECT_STREQ(to_string(NumaPolicy::single), "single");
}

TEST(Load, UnmanagedIsolationIsOffByDefaultAndReadWhenSet) {
  const char* base = R"([daemon]
mode = "enforce"

[[workload]]
name = "be"
match = { cgroup = "/batch" }
class = "best-effort"
)";
  Config off = load_ok(base, corpus_host());
  EXPECT_FALSE(off.actuators.isolate_unmanaged);
  EXPECT_FALSE(off.actuators.isolate_root_tasks);
  Config on =
      load_ok(std::string(base) + "\n[actuators]\nisolate_unmanaged = true\nisolate_root_tasks = true\n",
              corpus_host());
  EXPECT_TRUE(on.actuators.isolate_unmanaged);
  EXPECT_TRUE(on.actuators.isolate_root_tasks);
}

}  // namespace
}  // namespace keel::config
