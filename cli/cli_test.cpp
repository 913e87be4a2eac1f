// The keel binary as users run it: exit codes, messages, and what it prints.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/usage.h"
#include "host/cgroup.h"
#include "host/sys_roots.h"
#include "tests/support/http.h"
#include "tests/support/scene.h"
#include "tests/support/timing.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using cli::command_usages;
using cli::parse_real;
using cli::parse_whole;
using cli::usage_of;
using testing::run_command;

std::string keel(const std::string& args) { return testing::keel_binary().string() + " " + args; }
std::string src(const std::string& rel) { return (testing::source_dir() / rel).string(); }

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run_command(keel("")).first, 2);
  auto [rc, out] = run_command(keel("frobnicate"));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("unknown command 'frobnicate'"), std::string::npos) << out;
  auto [rc2, out2] = run_command(keel("topology --jsn"));
  EXPECT_EQ(rc2, 2);
  EXPECT_NE(out2.find("unknown option --jsn"), std::string::npos) << out2;
  EXPECT_EQ(run_command(keel("check-config")).first, 2);
  auto [rc3, out3] = run_command(keel("help"));
  EXPECT_EQ(rc3, 0);
  EXPECT_NE(out3.find("check-config FILE"), std::string::npos);
}

// The flags a command's usage line shows are exactly those its parser takes: a switch as "[--x]", a
// flag with a value as "--x VALUE" (each parser reads its FlagSpec from the same table entry).
TEST(Cli, UsageLinesAndFlagSpecsAgree) {
  for (const auto& c : command_usages()) {
    const std::string syn(c.synopsis);
    std::set<std::string> switches, with_value;
    for (size_t at = syn.find("--"); at != std::string::npos; at = syn.find("--", at + 2)) {
      const size_t end = syn.find_first_of(" ]\n", at);
      const std::string flag = syn.substr(at + 2, end - at - 2);
      (end < syn.size() && syn[end] == ' ' ? with_value : switches).insert(flag);
    }
    EXPECT_EQ(switches, c.flags.switches) << c.name << ": " << syn;
    EXPECT_EQ(with_value, c.flags.with_value) << c.name << ": " << syn;
  }
}

// Every command answers --help and -h with its own usage (exit 0), `keel help CMD` prints the same, and
// a usage error names the command's usage line.
TEST(Cli, EveryCommandAnswersHelpWithItsOwnUsage) {
  for (const auto& c : command_usages()) {
    if (c.name == "help") continue;
    const std::string name(c.name);
    for (const char* flag : {"--help", "-h"}) {
      auto [rc, out] = run_command(keel(name + " " + flag));
      EXPECT_EQ(rc, 0) << name << " " << flag << ": " << out;
      EXPECT_EQ(out.rfind("usage: keel " + name + " ", 0), 0u) << out;
    }
    auto [rc, out] = run_command(keel("help " + name));
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, usage_of(c));
  }
  auto [rc, out] = run_command(keel("help frobnicate"));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("no command 'frobnicate'"), std::string::npos) << out;
  auto [rc2, out2] = run_command(keel("topology --jsn"));
  EXPECT_EQ(rc2, 2);
  EXPECT_NE(out2.find("usage: keel topology [--synthetic SPEC] [--json]"), std::string::npos) << out2;
}

// keel --version: the release, then the git revision, compiler and libbpf in brackets.
// keel(8) and the bash completion are generated from the usage table at build time: the man page names
// every command and option and groff renders it without a warning; completion offers the commands, each
// command's own options, the literal choices of an option and the commands after `help`.
TEST(Cli, ManPageAndCompletionComeFromTheUsageTable) {
  const fs::path man = testing::binary_dir() / "cli" / "keel.8.gz";
  const fs::path completion = testing::binary_dir() / "cli" / "keel.bash-completion";
  ASSERT_TRUE(fs::exists(man) && fs::exists(completion)) << "built by the keel_docs target";
  // groff's warnings go to stderr: none allowed. The page itself, spaces squeezed (justified text).
  auto [wrc, warnings] =
      run_command("MANWIDTH=200 man --warnings -E UTF-8 -l " + man.string() + " 2>&1 >/dev/null");
  EXPECT_EQ(wrc, 0) << warnings;
  EXPECT_EQ(warnings, "") << warnings;
  auto [mrc, page] = run_command("MANWIDTH=200 man -E UTF-8 -l " + man.string() +
                                 " 2>/dev/null | col -b | tr -s ' \t' '  '");
  ASSERT_EQ(mrc, 0) << page;
  auto complete = [&](const std::string& words, int cword) {
    auto [rc, out] = run_command("bash -c 'source " + completion.string() + "; COMP_WORDS=(" + words +
                                 "); COMP_CWORD=" + std::to_string(cword) +
                                 "; _keel; printf \"%s\\n\" \"${COMPREPLY[@]}\" | sort | tr \"\\n\" \" \"'");
    EXPECT_EQ(rc, 0) << out;
    return out;
  };
  std::string all_commands;
  for (const auto& c : command_usages()) {
    EXPECT_NE(page.find("keel " + std::string(c.name)), std::string::npos) << c.name << "\n" << page;
    all_commands += std::string(c.name) + " ";
    if (c.name == "help") continue;
    // Its options, from the synopsis, in the man page and in completion after "--".
    std::set<std::string> opts{"--help"};
    std::string syn(c.synopsis);
    for (size_t at = syn.find("--"); at != std::string::npos; at = syn.find("--", at + 2))
      opts.insert(syn.substr(at, syn.find_first_of(" ]\n", at) - at));
    std::string want;
    for (const auto& o : opts) {
      want += o + " ";
      if (o != "--help") {
        EXPECT_NE(page.find(o), std::string::npos) << o << " of " << c.name;
      }
    }
    EXPECT_EQ(complete("keel " + std::string(c.name) + " --", 2), want) << c.name;
  }
  std::set<std::string> sorted;
  for (const auto& c : command_usages()) sorted.insert(std::string(c.name));
  std::string help_words;
  for (const auto& n : sorted) help_words += n + " ";
  EXPECT_EQ(complete("keel help \"\"", 2), help_words);
  EXPECT_EQ(complete("keel r", 1), "replay restore run ");
  EXPECT_EQ(complete("keel run --bpf-stats \"\"", 3), "always off sampled ");
  EXPECT_EQ(complete("keel run --metrics-listen o", 3), "off ");
}

TEST(Cli, VersionNamesRevisionCompilerAndLibbpf) {
  auto [rc, out] = run_command(keel("--version"));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.rfind("keel ", 0), 0u) << out;
  EXPECT_NE(out.find("(git "), std::string::npos) << out;
  EXPECT_NE(out.find(", g++ "), std::string::npos) << out;
  EXPECT_NE(out.find(", libbpf "), std::string::npos) << out;
  // The revision is the checkout's at configure time: 12 hex digits, or "unknown" outside one.
  const size_t at = out.find("(git ") + 5;
  const std::string rev = out.substr(at, out.find(',', at) - at);
  EXPECT_TRUE(rev == "unknown" ||
              (rev.size() == 12 && rev.find_first_not_of("0123456789abcdef") == std::string::npos))
      << rev;
}

// Garbage after a number is a usage error, never read as the number before it.
TEST(Cli, NumbersInFlagsAreParsedWhole) {
  EXPECT_EQ(parse_real("0.5"), 0.5);
  EXPECT_EQ(parse_real("2"), 2.0);
  EXPECT_FALSE(parse_real("1abc"));
  EXPECT_FALSE(parse_real(""));
  EXPECT_FALSE(parse_real(" 1"));
  EXPECT_FALSE(parse_real("nan"));
  EXPECT_EQ(parse_whole("12"), 12);
  EXPECT_FALSE(parse_whole("3.5"));
  EXPECT_FALSE(parse_whole("7x"));
  auto [rc, out] = run_command(keel("top --interval 1abc"));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--interval takes seconds (e.g. 0.5), got '1abc'"), std::string::npos) << out;
  auto [rc2, out2] = run_command(keel("top --count 3x"));
  EXPECT_EQ(rc2, 2) << out2;
  auto [rc3, out3] = run_command(keel("plan --config /nonexistent --window 2s"));
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("got '2s'"), std::string::npos) << out3;
}

TEST(Cli, TopologyOfSyntheticKunpengLikeHost) {
  auto [rc, out] = run_command(keel("topology --synthetic 'pack:2 numa:2 l3:1 core:32 pu:2'"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("256 PUs"), std::string::npos) << out;
  EXPECT_NE(out.find("4 NUMA nodes"), std::string::npos) << out;
  auto [rcj, json] = run_command(keel("topology --json --synthetic 'pack:2 numa:2 l3:1 core:32 pu:2'"));
  ASSERT_EQ(rcj, 0) << json;
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(count(json, "\"os\":"), 256u) << json.substr(0, 400);
}

TEST(Cli, BadSyntheticSpecIsUsageError) {
  auto [rc, out] = run_command(keel("topology --synthetic 'bogus:3'"));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("bogus:3"), std::string::npos) << out;
}

TEST(Cli, TopologyOfThisHostMatchesOnlineCpus) {
  auto [rc, out] = run_command(keel("topology --json"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(count(out, "\"os\":"), static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN)));
}

// Every file of the bad-config corpus: exit 2, and the first line is FILE:LINE:COL: message as
// the file's "# expect:" header says.
TEST(Cli, CheckConfigRejectsTheBadConfigCorpusWithExactPositions) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(testing::source_dir() / "tests/fixtures/bad_configs")) {
    if (e.path().extension() != ".toml") continue;
    std::ifstream in(e.path());
    std::string header;
    std::getline(in, header);
    ASSERT_TRUE(header.starts_with("# expect: ")) << e.path();
    std::string expected = e.path().string() + ":" + header.substr(10);
    // A fixed synthetic host (32 CPUs, 2 nodes) and an 11-way resctrl, so the result does not
    // depend on the machine the tests run on.
    testing::TempDir rt;
    testing::make_tree(rt.path(), {{"info/L3/cbm_mask", "7ff\n"},
                                   {"info/L3/min_cbm_bits", "1\n"},
                                   {"info/L3/num_closids", "16\n"},
                                   {"info/MB/min_bandwidth", "10\n"},
                                   {"info/MB/bandwidth_gran", "10\n"}});
    auto [rc, out] =
        run_command(keel("check-config " + e.path().string() +
                         " --synthetic 'pack:2 numa:1 l3:1 core:16 pu:1' --resctrl " + rt.path().string()));
    EXPECT_EQ(rc, 2) << e.path() << "\n" << out;
    EXPECT_EQ(out.substr(0, out.find('\n')), expected);
    ++n;
  }
  EXPECT_GE(n, 25u);
}

// check-config accepts a best-effort workload's slo (exit 0) and says, with its position, that it is ignored.
TEST(Cli, CheckConfigWarnsThatABestEffortSloIsIgnored) {
  testing::TempDir dir;
  std::ofstream(dir.path() / "k.toml") << "[[workload]]\nname = \"batch\"\nmatch = { cgroup = \"/b\" }\n"
                                          "slo = { runqueue_p99 = \"5ms\" }\n";
  auto [rc, out] = run_command(keel("check-config " + (dir.path() / "k.toml").string()));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find((dir.path() / "k.toml").string() + ":4:7: warning: workload 'batch': slo is ignored"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(": ok (mode observe, 1 workload)"), std::string::npos) << out;
}

struct Example {
  const char* file;
  const char* synthetic;
  bool mpam;
};

TEST(Cli, ShippedExamplesPassOnTheirTargetHosts) {
  testing::TempDir rt;  // Kunpeng 920 MPAM: 28 ways, MB in steps of 1 from 1
  testing::make_tree(rt.path(), {{"info/L3/cbm_mask", "fffffff\n"},
                                 {"info/L3/min_cbm_bits", "1\n"},
                                 {"info/L3/num_closids", "32\n"},
                                 {"info/MB/min_bandwidth", "1\n"},
                                 {"info/MB/bandwidth_gran", "1\n"}});
  for (auto ex :
       {Example{"config/examples/redis-nginx-vm.toml", "pack:1 numa:1 l3:1 core:16 pu:2", false},
        Example{"config/examples/k8s-guaranteed-pods.toml", "pack:2 numa:1 l3:1 core:16 pu:2", false},
        Example{"config/examples/mpam-two-vms.toml", "pack:2 numa:2 l3:1 core:32 pu:2", true}}) {
    std::string cmd = keel("check-config " + src(ex.file) + " --synthetic '" + ex.synthetic + "'");
    if (ex.mpam) cmd += " --resctrl " + rt.path().string();
    auto [rc, out] = run_command(cmd);
    EXPECT_EQ(rc, 0) << ex.file << "\n" << out;
    EXPECT_NE(out.find(": ok ("), std::string::npos) << out;
  }
  // The same Kunpeng config is refused on an Intel box with 11 ways: the hardware cannot give 14.
  testing::TempDir intel;
  testing::make_tree(intel.path(), {{"info/L3/cbm_mask", "7ff\n"},
                                    {"info/L3/min_cbm_bits", "1\n"},
                                    {"info/L3/num_closids", "16\n"},
                                    {"info/MB/min_bandwidth", "10\n"},
                                    {"info/MB/bandwidth_gran", "10\n"}});
  auto [rc, out] =
      run_command(keel("check-config " + src("config/examples/mpam-two-vms.toml") +
                       " --synthetic 'pack:2 numa:2 l3:1 core:32 pu:2' --resctrl " + intel.path().string()));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("l3_ways"), std::string::npos) << out;
  // And the 32-vCPU VM config does not fit this 2-CPU shape: CPUs outside the host.
  auto [rc2, out2] = run_command(keel("check-config " + src("config/examples/redis-nginx-vm.toml") +
                                      " --synthetic 'pack:1 numa:1 l3:1 core:2 pu:1'"));
  EXPECT_EQ(rc2, 2) << out2;
}

TEST(Cli, CheckConfigHostDescriptionErrorsAreUsageErrors) {
  auto [rc, out] = run_command(keel("check-config " + src("config/keel.toml") + " --synthetic bogus:1"));
  EXPECT_EQ(rc, 2) << out;
  testing::TempDir t;  // exists, but is no resctrl tree: a typo must not silently skip the checks
  auto [rc2, out2] = run_command(keel("check-config " + src("config/keel.toml") +
                                      " --synthetic pu:4 --resctrl " + (t.path() / "typo").string()));
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("no resctrl info/ directory"), std::string::npos) << out2;
}

// A FIFO where check-config reads a file (the config, or a file of the --resctrl tree) is refused at
// once; opening it without O_NONBLOCK waited for a writer forever. `timeout` turns a hang into 124.
TEST(Cli, CheckConfigRefusesAFifoInsteadOfWaitingOnIt) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"rt/info/L3/min_cbm_bits", "1\n"}, {"rt/info/L3/num_closids", "16\n"}});
  ASSERT_EQ(::mkfifo((t.path() / "rt/info/L3/cbm_mask").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((t.path() / "keel.toml").c_str(), 0600), 0);
  auto [rc, out] =
      run_command("timeout 20 " + keel("check-config " + src("config/keel.toml") +
                                       " --synthetic pu:4 --resctrl " + (t.path() / "rt").string()));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find((t.path() / "rt/info/L3/cbm_mask").string() + ": not a regular file"), std::string::npos)
      << out;
  auto [rc2, out2] = run_command(
      "timeout 20 " + keel("check-config " + (t.path() / "keel.toml").string() + " --synthetic pu:4"));
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find((t.path() / "keel.toml").string() + ":1:1: cannot read: not a regular file"),
            std::string::npos)
      << out2;
}

TEST(Cli, DefaultConfigPassesOnThisHost) {
  auto [rc, out] = run_command(keel("check-config " + src("config/keel.toml")));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ok (mode observe"), std::string::npos) << out;
}

// Real cgroups (privileged; v1, or v2 under systemd below a delegated scope of the test's own): a
// cgroup with a process is listed with its inode and its workload.
TEST(CliPriv, WorkloadsListsARealCgroupWithItsIdAndWorkload) {
  KEEL_REQUIRE_ROOT();
  std::string why;
  if (!testing::host_layout(&why)) GTEST_SKIP() << "skipped: " << why;
  testing::DelegatedTree tree("keel-cli-test-" + std::to_string(getpid()));
  ASSERT_EQ(tree.error(), "");
  ASSERT_TRUE(tree.make("w"));
  const std::string name = tree.path().substr(1) + "/w";
  const fs::path cg = tree.dir("cpu") / "w";
  struct stat st {};
  ASSERT_EQ(stat(cg.c_str(), &st), 0);
  pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  ASSERT_GT(child, 0);
  std::ofstream(cg / "cgroup.procs") << child << std::flush;

  testing::TempDir t;
  testing::make_tree(t.path(),
                     {{"k.toml", std::string("[daemon]\nhierarchy = \"") + (tree.v2() ? "unified" : "cpu") +
                                     "\"\n[host]\nreserved_cpus = \"0\"\n"
                                     "[[workload]]\nname = \"probe\"\nmatch = { cgroup = \"/" +
                                     name + "\", has_tasks = true }\nclass = \"best-effort\"\n"}});
  auto [rc, out] = run_command(keel("workloads --json --config " + (t.path() / "k.toml").string()));
  auto [rct, text] = run_command(keel("workloads --config " + (t.path() / "k.toml").string()));

  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  ASSERT_EQ(rc, 0) << out;
  ASSERT_EQ(rct, 0) << text;
  // The id BPF will see: the cgroup directory's inode.
  EXPECT_NE(out.find(std::to_string(st.st_ino)), std::string::npos) << out;
  EXPECT_NE(out.find("\"/" + name + "\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"probe\""), std::string::npos) << out;
  EXPECT_NE(text.find("/" + name), std::string::npos) << text;
  EXPECT_NE(text.find("probe"), std::string::npos) << text;
}

TEST(Cli, TopRejectsBadIntervalAndCount) {
  EXPECT_EQ(run_command(keel("top --interval 0")).first, 2);
  EXPECT_EQ(run_command(keel("top --interval abc")).first, 2);
  EXPECT_EQ(run_command(keel("top --count 0")).first, 2);
  auto [rc, out] = run_command(keel("top --bpf-stats sometimes"));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--bpf-stats takes sampled"), std::string::npos) << out;
}

// keel run and keel plan refuse bad usage and bad configs with exit 2, before anything is loaded or
// written: the state directory a bad config names is never created.
TEST(Cli, RunAndPlanRefuseBadUsageAndBadConfigsBeforeTouchingAnything) {
  testing::TempDir t;
  const std::string state = (t.path() / "state").string();
  testing::make_tree(t.path(), {{"bad.toml", "[daemon]\nstate_dir = \"" + state + "\"\nperiod = \"soon\"\n"},
                                {"good.toml", "[daemon]\nstate_dir = \"" + state + "\"\n"}});
  auto [rc, out] = run_command(keel("run"));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("needs --config FILE"), std::string::npos) << out;
  auto [rc2, out2] = run_command(keel("run --config " + (t.path() / "bad.toml").string()));
  EXPECT_EQ(rc2, 2);
  EXPECT_NE(out2.find("bad.toml:3:"), std::string::npos) << out2;
  EXPECT_FALSE(std::filesystem::exists(state));
  auto [rc3, out3] =
      run_command(keel("run --config " + (t.path() / "good.toml").string() + " --bpf-stats sometimes"));
  EXPECT_EQ(rc3, 2);
  EXPECT_NE(out3.find("--bpf-stats takes sampled"), std::string::npos) << out3;
  EXPECT_EQ(run_command(keel("run --config " + (t.path() / "good.toml").string() + " extra")).first, 2);
  EXPECT_EQ(run_command(keel("plan")).first, 2);
  auto [rc4, out4] = run_command(keel("plan --window 0 --config " + (t.path() / "good.toml").string()));
  EXPECT_EQ(rc4, 2);
  EXPECT_NE(out4.find("--window must be"), std::string::npos) << out4;
  EXPECT_EQ(run_command(keel("plan --config " + (t.path() / "bad.toml").string())).first, 2);
  EXPECT_FALSE(std::filesystem::exists(state));
}

// A metrics port another process holds stops keel run before it changes anything (no state directory,
// no journal), with the address and the reason; --metrics-listen overrides the config's address.
TEST(Cli, RunRefusesATakenMetricsPortBeforeTouchingAnything) {
  testing::TempDir t;
  const std::string state = (t.path() / "state").string();
  uint16_t port = 0;
  int fd = testing::listen_on_loopback(&port);
  ASSERT_GE(fd, 0);
  const std::string taken = "127.0.0.1:" + std::to_string(port);
  testing::make_tree(t.path(), {{"keel.toml", "[daemon]\nstate_dir = \"" + state + "\"\nmetrics_listen = \"" +
                                                  taken + "\"\n"},
                                {"other.toml", "[daemon]\nstate_dir = \"" + state + "\"\n"}});
  auto [rc, out] = run_command(keel("run --config " + (t.path() / "keel.toml").string()));
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("run: metrics: daemon.metrics_listen = \"" + taken + "\": cannot listen on " + taken +
                     ": Address already in use"),
            std::string::npos)
      << out;
  auto [rc2, out2] =
      run_command(keel("run --config " + (t.path() / "other.toml").string() + " --metrics-listen " + taken));
  EXPECT_EQ(rc2, 1) << out2;
  EXPECT_NE(out2.find("cannot listen on " + taken), std::string::npos) << out2;
  ::close(fd);
  // An address the config would refuse is refused from the command line too, as bad usage.
  auto [rc3, out3] = run_command(
      keel("run --config " + (t.path() / "other.toml").string() + " --metrics-listen 127.0.0.1:0"));
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("--metrics-listen 127.0.0.1:0: the port must be a number in 1..65535"),
            std::string::npos)
      << out3;
  EXPECT_FALSE(std::filesystem::exists(state));
}

// The health listener the same way: a taken port stops keel run before it changes anything, and a bad
// address is bad usage.
TEST(Cli, RunRefusesATakenHealthPortBeforeTouchingAnything) {
  testing::TempDir t;
  const std::string state = (t.path() / "state").string();
  uint16_t port = 0;
  int fd = testing::listen_on_loopback(&port);
  ASSERT_GE(fd, 0);
  const std::string taken = "127.0.0.1:" + std::to_string(port);
  testing::make_tree(t.path(), {{"keel.toml", "[daemon]\nstate_dir = \"" + state + "\"\nhealth_listen = \"" +
                                                  taken + "\"\n"}});
  auto [rc, out] =
      run_command(keel("run --config " + (t.path() / "keel.toml").string() + " --metrics-listen off"));
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("run: health: daemon.health_listen = \"" + taken + "\": cannot listen on " + taken +
                     ": Address already in use"),
            std::string::npos)
      << out;
  ::close(fd);
  auto [rc2, out2] = run_command(
      keel("run --config " + (t.path() / "keel.toml").string() + " --health-listen 127.0.0.1:99999"));
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("--health-listen 127.0.0.1:99999: the port must be a number in 1..65535"),
            std::string::npos)
      << out2;
  EXPECT_FALSE(std::filesystem::exists(state));
}

// keel top on the real kernel: a 1 ms sleeper in its own cgroup shows up as a row of its own with
// a wait per wake-up (about 1000/s), fields named with their units, MPKI null without a PMU (never 0), and
// keel's own cost per BPF event.
TEST(CliPriv, TopShowsARealCgroupWithItsWaits) {
  KEEL_REQUIRE_ROOT();
  std::string why;
  if (!testing::host_layout(&why)) GTEST_SKIP() << "skipped: " << why;
  testing::DelegatedTree tree("keel-top-test-" + std::to_string(getpid()));
  ASSERT_EQ(tree.error(), "");
  ASSERT_TRUE(tree.make("w"));
  const std::string name = tree.path().substr(1) + "/w";
  const fs::path cg = tree.dir("cpu") / "w";
  pid_t child = fork();
  if (child == 0) {
    for (;;) {
      timespec ts{0, 1'000'000};
      nanosleep(&ts, nullptr);
    }
  }
  ASSERT_GT(child, 0);
  std::ofstream(cg / "cgroup.procs") << child << std::flush;
  const testing::TaskCounts k0 = testing::task_counts(child);
  const uint64_t t0 = testing::now_ns();
  auto [rc, out] = run_command(keel("top --json --count 3 --interval 0.5"));
  // The sleeper's wake-ups per second over keel top's run, as the kernel counted them.
  const double wakes_per_s = static_cast<double>(testing::task_counts(child).since(k0).voluntary) /
                             (static_cast<double>(testing::now_ns() - t0) / 1e9);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  ASSERT_EQ(rc, 0) << out;
  auto last_line = out.substr(out.rfind('{', out.rfind("\"rows\"")));
  auto row = last_line.find("\"cgroup\":\"/" + name + "\"");
  ASSERT_NE(row, std::string::npos) << out;
  std::string rest = last_line.substr(row);
  auto at = rest.find("\"rq_waits_per_s\":");
  ASSERT_NE(at, std::string::npos) << rest;
  double waits = std::stod(rest.substr(at + 17));
  // A wait per wake-up: the last interval's rate near the sleeper's rate over the whole run (about
  // 1000/s, less on a slow VM timer or an emulator).
  EXPECT_GT(wakes_per_s, 0.0);
  EXPECT_GT(waits, 0.3 * wakes_per_s) << wakes_per_s << " wake-ups/s\n" << rest;
  EXPECT_LT(waits, 1.5 * wakes_per_s) << wakes_per_s << " wake-ups/s\n" << rest;
  EXPECT_NE(rest.find("\"rq_p99_us\":"), std::string::npos);
  // Hardware counters: numbers with a PMU, null (never 0) without one.
  if (last_line.find("\"hw_pmu\":false") != std::string::npos) {
    EXPECT_NE(rest.find("\"mpki\":null"), std::string::npos) << rest;
    EXPECT_NE(rest.find("\"cache_misses_per_s\":null"), std::string::npos) << rest;
  } else {
    EXPECT_EQ(rest.find("\"cache_misses_per_s\":null"), std::string::npos) << rest;
  }
  // What the cgroup map holds and what keel evicted from it, by reason.
  for (const char* f : {"\"map_entries\":", "\"map_capacity\":4096", "\"evicted_gone\":", "\"evicted_idle\":",
                        "\"evicted_unmatched\":", "\"evicted_best_effort\":"})
    EXPECT_NE(last_line.find(f), std::string::npos) << f << " in " << last_line;
  // keel's own cost, measured in the second interval (BPF stats sampled), is in the third line too.
  auto cost = last_line.find("\"bpf_ns_per_event\":");
  ASSERT_NE(cost, std::string::npos) << last_line;
  EXPECT_GT(std::stod(last_line.substr(cost + 19)), 0.0) << last_line;
}

TEST(CliPriv, ProbeReportsThisKernel) {
  KEEL_REQUIRE_ROOT();
  auto [rc, out] = run_command(keel("probe --json"));
  ASSERT_EQ(rc, 0) << out;
  bool btf = fs::exists(SysRoots::host().sys / "kernel/btf/vmlinux");
  EXPECT_NE(out.find(std::string("\"btf\":") + (btf ? "true" : "false")), std::string::npos) << out;
  EXPECT_NE(out.find("\"cgroup_mode\":"), std::string::npos) << out;
  auto [rct, text] = run_command(keel("probe"));
  EXPECT_EQ(rct, 0);
  EXPECT_NE(text.find("hardware PMU"), std::string::npos) << text;
  // STEAL exists only on openEuler kernels; elsewhere (this machine) it is unsupported, with the reason.
  const auto debugfs = SysRoots::host().debugfs;
  bool features = fs::exists(debugfs / "sched/features") || fs::exists(debugfs / "sched_features");
  if (!features) {
    EXPECT_NE(out.find("\"steal_task\":\"unsupported\""), std::string::npos) << out;
    EXPECT_NE(text.find("steal_task          unsupported ("), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace keel

namespace keel {
namespace {

namespace fs = std::filesystem;
using testing::keel_binary;
using testing::run_command;

// keel restore over a tree (--root), from a journal written here by hand in its documented format:
// values come back, vanished cgroups count as gone, the journal goes, and a second run has nothing
// to do.
TEST(CliTree, RestoreFromAJournalPutsTheTreeBack) {
  testing::TempDir t;
  testing::make_tree(t.path(), {
                                   {"proc/sys/kernel/random/boot_id", "abc-1\n"},
                                   {"sys/fs/cgroup/cpu/batch/cpu.shares", "2\n"},
                                   {"sys/fs/cgroup/cpu/batch/cpu.cfs_quota_us", "50000\n"},
                                   {"proc/irq/24/smp_affinity_list", "1\n"},
                                   {"state/journal",
                                    "keel-journal 1 boot_id=abc-1\n"
                                    "file cgroup cpu/batch/cpu.shares 1024\n"
                                    "file cgroup cpu/batch/cpu.cfs_quota_us -1\n"
                                    "file cgroup cpu/gone/cpu.shares 1024\n"
                                    "file proc irq/24/smp_affinity_list 0-1\n"},
                               });
  fs::permissions(t.path() / "state", fs::perms::owner_all);  // keel's alone, as keel makes it
  std::string cmd = keel_binary().string() + " restore --json --root " + t.path().string() + " --state " +
                    (t.path() / "state").string();
  auto [rc, out] = run_command(cmd);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"entries\":4,\"restored\":3,\"unchanged\":0,\"gone\":1,\"kept\":0,\"failed\":[]"),
            std::string::npos)
      << out;
  EXPECT_EQ(testing::slurp(t.path() / "sys/fs/cgroup/cpu/batch/cpu.shares"), "1024");
  EXPECT_EQ(testing::slurp(t.path() / "sys/fs/cgroup/cpu/batch/cpu.cfs_quota_us"), "-1");
  EXPECT_EQ(testing::slurp(t.path() / "proc/irq/24/smp_affinity_list"), "0-1");
  EXPECT_FALSE(fs::exists(t.path() / "state/journal"));
  auto [rc2, out2] = run_command(keel_binary().string() + " restore --root " + t.path().string() +
                                 " --state " + (t.path() / "state").string());
  EXPECT_EQ(rc2, 0);
  EXPECT_NE(out2.find("nothing to restore"), std::string::npos) << out2;
}

TEST(CliTree, RestoreRefusesAJournalItCannotReadAndKeepsIt) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"state/journal", "not a journal\n"}});
  fs::permissions(t.path() / "state", fs::perms::owner_all);
  auto [rc, out] = run_command(keel_binary().string() + " restore --root " + t.path().string() + " --state " +
                               (t.path() / "state").string());
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("not a keel journal"), std::string::npos) << out;
  EXPECT_EQ(testing::slurp(t.path() / "state/journal"), "not a journal\n");
}

}  // namespace
}  // namespace keel

namespace keel {
namespace {

// keel replay over a hand-written trace: a critical workload far over its SLO next to a hog on the
// same two CPUs. The decisions name the victim and the antagonist, start with weights, revert what did
// not help, and two replays print the same.
TEST(CliTree, ReplayPrintsTheSameDecisionsEveryTime) {
  testing::TempDir t;
  std::string trace;
  for (int tick = 1; tick <= 8; ++tick)
    trace += "{\"tick\":" + std::to_string(tick) +
             ",\"period_s\":1,\"workloads\":["
             "{\"instance\":\"svc\",\"workload\":\"svc\",\"critical\":true,\"cgroups\":[\"/"
             "svc\"],\"rq_waits\":500,"
             "\"rq_p50_us\":800,\"rq_p99_us\":5000,\"cpu_usage\":0.4,\"cpus\":\"0-1\",\"shares\":1024},"
             "{\"instance\":\"hog\",\"workload\":\"hog\",\"critical\":false,\"cgroups\":[\"/"
             "hog\"],\"rq_waits\":10,"
             "\"rq_p50_us\":100,\"rq_p99_us\":300,\"cpu_usage\":1.6,\"cpus\":\"0-1\",\"shares\":1024}]}\n";
  testing::make_tree(t.path(), {{"trace.jsonl", trace},
                                {"keel.toml",
                                 "[[workload]]\nname = \"svc\"\nmatch = { cgroup = \"/svc\" }\n"
                                 "class = \"critical\"\nslo = { runqueue_p99 = \"500us\" }\n"
                                 "[[workload]]\nname = \"hog\"\nmatch = { cgroup = \"/hog\" }\n"
                                 "class = \"best-effort\"\n"
                                 // The weight rung's steps on the hog: the class would take its place.
                                 "[actuators]\npreempt_class = \"off\"\n"}});
  std::string cmd = keel_binary().string() + " replay " + (t.path() / "trace.jsonl").string() + " --config " +
                    (t.path() / "keel.toml").string() + " --synthetic 'pack:1 numa:1 l3:1 core:2 pu:1'";
  auto [rc, out] = run_command(cmd);
  ASSERT_EQ(rc, 0) << out;
  // p99 ten times the SLO over 500 waits is severe: keel acts on the first tick, and jumps to whole
  // cores (the class is off in this config).
  EXPECT_NE(
      out.find("tick 1 act svc cpus (as found) -> 0: rq p99 5000 us vs SLO 500 us (slack -9.00) (severe"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("many times the SLO: whole cores at once"), std::string::npos) << out;
  EXPECT_NE(out.find("antagonist hog"), std::string::npos) << out;
  EXPECT_NE(out.find("tick 1 act hog cpus (as found) -> 1: best-effort off critical CPUs 0"),
            std::string::npos)
      << out;
  // The trace does not respond (recorded signals): no improvement, so the cores are reverted (and the
  // rung locked out) and the ladder goes on with weights.
  EXPECT_NE(out.find("tick 4 revert svc cpus 0 -> (as found): no improvement after 3 ticks"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("act hog shares (as found) -> 512"), std::string::npos) << out;
  EXPECT_NE(out.find("keel replay: 8 ticks"), std::string::npos) << out;
  auto [rc2, out2] = run_command(cmd);
  EXPECT_EQ(rc2, 0);
  EXPECT_EQ(out2, out);
  auto [rc3, out3] = run_command(keel_binary().string() + " replay " + (t.path() / "keel.toml").string() +
                                 " --config " + (t.path() / "keel.toml").string());
  EXPECT_EQ(rc3, 1) << out3;  // not a trace: the line is named
  EXPECT_NE(out3.find("keel.toml:1: trace line"), std::string::npos) << out3;
}

}  // namespace
}  // namespace keel
