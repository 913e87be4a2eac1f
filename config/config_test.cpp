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

const fs::path kSource = KEEL_SOURCE_DIR;

// The host every bad config is checked against.
HostFacts corpus_host() {
  HostFacts f;
  f.cpus = CpuSet::range(0, 31);
  f.numa_nodes = 2;
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
  EXPECT_EQ(c->host.reserved_cpus.to_list(), "0");
  std::vector<std::string> globs;
  for (const auto& w : c->workloads) {
    EXPECT_EQ(w.klass, WorkloadClass::best_effort) << w.name;
    EXPECT_TRUE(w.match.has_tasks && w.match.each) << w.name;
    EXPECT_EQ(w.slo.runqueue_p99, 5ms) << w.name;
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
  // The seeds' VM: 32 vCPUs, one NUMA node, no resctrl.
  auto c = load_file(kSource / "config/examples/redis-nginx-vm.toml", host_with_cpus(0, 31, 1));
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
  // A 64-CPU node with two NUMA nodes.
  auto c = load_file(kSource / "config/examples/k8s-guaranteed-pods.toml", host_with_cpus(0, 63, 2));
  ASSERT_TRUE(c.has_value()) << messages(c.error());
  int critical_pods = 0;
  for (const auto& w : c->workloads)
    if (w.klass == WorkloadClass::critical && !w.match.pod.empty()) ++critical_pods;
  EXPECT_GE(critical_pods, 1);
}

TEST(ShippedConfig, MpamTwoVms) {
  HostFacts kunpeng = host_with_cpus(0, 255, 4);
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
      R"(workload = [ { name = "a", match = { pod = "0b9e8d7c-6a5f" } }, { name = "b", match = { pid_file = "/run/b.pid" } } ])");
  ASSERT_EQ(b.workloads.size(), 2u);
  EXPECT_EQ(b.workloads[0].match.pod, "0b9e8d7c-6a5f");
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
  EXPECT_EQ(first_message("[daemon]\nmetrics_listen = \":9477\"\n"),
            "daemon.metrics_listen = \":9477\": the host part is empty (write e.g. \"127.0.0.1:9477\")");
  EXPECT_EQ(first_message("[daemon]\nmetrics_listen = \"127.0.0.1:0\"\n"),
            "daemon.metrics_listen = \"127.0.0.1:0\": the port must be a number in 1..65535");
  EXPECT_EQ(
      first_message("[daemon]\nmetrics_listen = \"[]:80\"\n"),
      "daemon.metrics_listen = \"[]:80\": an IPv6 host must be written in brackets, e.g. \"[::1]:9477\"");
}

TEST(Validate, PidFileMustBeAbsolute) {
  EXPECT_EQ(first_message("[[workload]]\nname = \"a\"\nmatch = { pid_file = \"run/a.pid\" }\n"),
            "workload 'a': match.pid_file = \"run/a.pid\" must be an absolute path");
}

// ---------------------------------------------------------------------------------------------
// Durations and names.

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
  EXPECT_EQ(parse_duration("100").error(), "no unit (write e.g. \"100ms\"; units: ns, us, ms, s, m, h)");
  EXPECT_EQ(parse_duration("1x").error(), "unknown unit 'x' (units: ns, us, ms, s, m, h)");
  EXPECT_EQ(parse_duration("0s").error(), "must be greater than 0");
  EXPECT_EQ(parse_duration("0.1ns").error(), "must be greater than 0");
  EXPECT_EQ(parse_duration("ms").error(), "expected a number and a unit, e.g. \"200us\"");
  EXPECT_EQ(parse_duration("-1s").error(), "expected a number and a unit, e.g. \"200us\"");
  EXPECT_EQ(parse_duration("1.s").error(), "expected digits after '.'");
  EXPECT_EQ(parse_duration("99999999999999h").error(), "too large");
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

}  // namespace
}  // namespace keel::config
