// The reconciler over a cgroup v2 tree with the kernel's file formats (this machine has no v2
// controllers): a plan's desired values are written through the journaled writer, knobs the plan stops
// setting go back to the values found, an instance that vanished gets its knobs back, and observe mode
// changes no byte.
#include "loop/reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actuators/journal.h"
#include "config/config.h"
#include "host/fileio.h"
#include "tests/support/tmp_tree.h"

namespace keel::loop {

using ctl::KnobState;
using ctl::Plan;
namespace {

using testing::slurp;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

CpuSet L(const char* s) { return *CpuSet::parse_list(s); }

class ReconcilerV2Tree : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::pair<std::string, std::string>> files = {
        {"proc/sys/kernel/random/boot_id", "11111111-2222\n"},
        {"proc/self/mountinfo", "41 23 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"},
        {"proc/cgroups", "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t3\t1\n"},
        {"sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n"},
        {"sys/fs/cgroup/cgroup.procs", "1\n"},
        {"sys/fs/cgroup/cpuset.cpus.effective", "0-7\n"},
        {"sys/fs/cgroup/cpuset.mems.effective", "0\n"},
    };
    for (std::string cg : {"svc", "svc/crit", "svc/batch"}) {
      auto f = testing::cgroup_v2_files("sys/fs/cgroup/" + cg,
                                        cg == "svc"        ? ""
                                        : cg == "svc/crit" ? "100\n"
                                                           : "200\n201\n",
                                        cg == "svc" ? "" : "0-7", "0-7", "0");
      files.insert(files.end(), f.begin(), f.end());
    }
    testing::make_tree(t_.path(), files);
    roots_ = SysRoots::under(t_.path());
    h_.id = 0;
    h_.unified = true;
    h_.controllers = {"cpuset", "cpu", "io", "memory", "pids"};
    h_.mount = roots_.cgroup;
    layout_.mode = CgroupMode::v2;
    layout_.hierarchies = {h_};
    auto topo = Topology::synthetic("pack:1 numa:1 l3:1 core:8 pu:1");
    ASSERT_TRUE(topo) << topo.error().message();
    topo_ = *topo;
    cfg_.actuators.cpuset = cfg_.actuators.cpu_weight = true;
    for (const char* name : {"crit", "batch"}) {
      config::Workload w;
      w.name = name;
      w.klass =
          std::string(name) == "crit" ? config::WorkloadClass::critical : config::WorkloadClass::best_effort;
      w.match.cgroup = std::string("/svc/") + name;
      cfg_.workloads.push_back(w);
    }
    spec_ = config::compile(cfg_, topo_.online());
    inv_ = inventory(spec_);
  }
  std::string file(const std::string& rel) { return slurp(roots_.cgroup / rel); }
  // A journal in the tree's state directory and an enforcing writer over it.
  struct Enforcing {
    Enforcing(const SysRoots& roots, act::Journal j)
        : journal(std::move(j)), writer(roots, act::Mode::enforce, &journal) {}
    act::Journal journal;
    act::KnobWriter writer;
  };
  std::unique_ptr<Enforcing> enforcing_writer() {
    auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
    EXPECT_TRUE(j) << j.error().message();
    return j ? std::make_unique<Enforcing>(roots_, std::move(*j)) : nullptr;
  }
  // The inventory of `spec`'s workloads over the tree, matched as a tick matches it.
  std::unique_ptr<inv::Inventory> inventory(const config::Spec& spec) {
    auto inv = inv::Inventory::open(spec, roots_);
    EXPECT_TRUE(inv) << inv.error().message();
    EXPECT_TRUE(inv->refresh_tree());
    inv->match({});
    return std::make_unique<inv::Inventory>(std::move(*inv));
  }
  // The plan of a victim given CPUs 0-1 and double weight, best-effort work moved to the rest.
  static Plan acting() {
    Plan p;
    p.tick = 1;
    p.desired["crit"] = KnobState{2048, L("0-1"), std::nullopt, std::nullopt};
    p.desired["batch"] = KnobState{512, L("2-7"), std::nullopt, std::nullopt};
    p.critical_cpus = L("0-1");
    return p;
  }
  testing::TempDir t_;
  SysRoots roots_;
  CgroupHierarchy h_;
  CgroupLayout layout_;
  Topology topo_;
  config::Config cfg_;
  config::Spec spec_;
  std::unique_ptr<inv::Inventory> inv_;
};

// A restart that hands over: the first keel's reconciler acts and stops without giving back (its journal
// stays); a second reconciler over the same journal adopts it. A plan that still sets the values writes
// nothing; one that lets go writes back the originals the first keel journaled, not the values it set
// (which is what the files hold now). Without adopt() the give-back would keep the first keel's values.
TEST_F(ReconcilerV2Tree, AnAdoptedJournalGivesBackTheFirstKeelsOriginals) {
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j) << j.error().message();
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  {
    Reconciler first(spec_, topo_, w);
    auto done = first.apply(acting(), *inv_);
    ASSERT_TRUE(done.errors.empty()) << done.errors.front();
    // And a knob no workload covers (as an unmanaged cgroup's or a mechanism's would be).
    ASSERT_TRUE(w.set({act::Root::cgroup, "svc/cpu.weight"}, "77", ValueKind::weight));
    (void)w.take_changes();  // the first keel's log
  }
  ASSERT_EQ(file("svc/crit/cpuset.cpus"), "0-1");
  ASSERT_EQ(file("svc/batch/cpu.weight"), "50");  // 512 shares
  for (bool adopt : {false, true}) {
    Reconciler second(spec_, topo_, w);
    if (adopt) second.adopt();
    auto held = second.apply(acting(), *inv_);
    EXPECT_TRUE(held.changes.empty()) << held.changes.front().path.str();
    if (!adopt) {
      EXPECT_EQ(file("svc/cpu.weight"), "77");
    }
    Plan quiet;
    quiet.tick = 2;
    auto back = second.apply(quiet, *inv_);
    EXPECT_TRUE(back.errors.empty()) << back.errors.front();
    if (adopt) {
      EXPECT_EQ(file("svc/cpu.weight"), "100") << "not adopted: given back at once";
      ASSERT_FALSE(held.notes.empty());
      EXPECT_NE(held.notes.front().find("gave back the 1 others"), std::string::npos) << held.notes.front();
      EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-7");
      EXPECT_EQ(file("svc/batch/cpuset.cpus"), "0-7");
      EXPECT_EQ(file("svc/batch/cpu.weight"), "100");
      EXPECT_EQ(file("svc/crit/cpu.weight"), "100");
    } else {
      EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-1") << "found as the first keel left it";
      EXPECT_EQ(file("svc/batch/cpu.weight"), "50");
    }
  }
}

// The host's own daemons under a best-effort glob (the default config's "system" catch-all on a systemd
// host): a system service and init.scope are measured but never demoted, a container's scope beside
// them is; a service a rule names exactly is a best-effort workload like any. Without the rule journald
// would be put in the idle class, weighed down to 512 shares and moved off the critical CPUs.
TEST_F(ReconcilerV2Tree, AGlobNeverDemotesInitOrASystemServiceButDemotesAContainersScope) {
  std::vector<std::pair<std::string, std::string>> files;
  for (std::string cg : {"system.slice", "system.slice/systemd-journald.service",
                         "system.slice/backup.service", "init.scope", "system.slice/docker-ab12.scope"}) {
    auto f = testing::cgroup_v2_files("sys/fs/cgroup/" + cg, cg == "system.slice" ? "" : "300\n",
                                      cg == "system.slice" ? "" : "0-7", "0-7", "0");
    files.insert(files.end(), f.begin(), f.end());
  }
  testing::make_tree(t_.path(), files);
  config::Workload backup;
  backup.name = "backup";
  backup.match.systemd_unit = "backup.service";
  config::Workload rest;
  rest.name = "system";
  rest.match.cgroup = "/**";
  rest.match.has_tasks = rest.match.each = true;
  cfg_.workloads.push_back(backup);
  cfg_.workloads.push_back(rest);
  spec_ = config::compile(cfg_, topo_.online());
  inv_ = inventory(spec_);
  Plan p = acting();
  for (const inv::Instance& ins : inv_->instances())
    if (!ins.spec->critical && ins.name != "batch")
      p.desired[ins.name] = KnobState{512, L("2-7"), std::nullopt, std::nullopt, true};
  ASSERT_TRUE(p.desired.contains("system/systemd-journald.service"));
  ASSERT_TRUE(p.desired.contains("system/init.scope"));
  auto enforcing = enforcing_writer();
  ASSERT_TRUE(enforcing);
  Reconciler r(spec_, topo_, enforcing->writer);
  auto done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  for (const char* host : {"system.slice/systemd-journald.service", "init.scope"}) {
    EXPECT_EQ(file(std::string(host) + "/cpu.idle"), "0\n") << host;
    EXPECT_EQ(file(std::string(host) + "/cpu.weight"), "100\n") << host;
    EXPECT_EQ(file(std::string(host) + "/cpuset.cpus"), "0-7\n") << host;
  }
  for (const char* be : {"system.slice/docker-ab12.scope", "system.slice/backup.service"}) {
    EXPECT_EQ(file(std::string(be) + "/cpu.idle"), "1") << be;
    EXPECT_EQ(file(std::string(be) + "/cpuset.cpus"), "2-7") << be;
  }
  bool said = false;
  for (const std::string& n : done.notes)
    said = said || n.starts_with(
                       "system/systemd-journald.service (/system.slice/systemd-journald.service) is "
                       "the host's own");
  EXPECT_TRUE(said);
}

// systemd realises its units' cgroups again (daemon-reload writes each unit's CPUWeight, cpu.idle and
// AllowedCPUs back): on a systemd host the reconciler reads a unit's held knobs each tick and, where
// one is back at what keel found, writes keel's value again in that tick (no drift, no lockout), the
// class included. Without it the plan's unchanged values are not looked at again for refresh_ticks,
// and then found as drift and given up for a minute.
TEST_F(ReconcilerV2Tree, AUnitSystemdRealisedAgainIsProtectedAgainInTheNextTick) {
  auto enforcing = enforcing_writer();
  ASSERT_TRUE(enforcing);
  enforcing->writer.set_reapplied_by_owner([](std::string_view path) { return path.starts_with("/svc/"); });
  Reconciler r(spec_, topo_, enforcing->writer);
  Plan p = acting();
  p.desired["batch"].preempt = true;
  auto done = r.apply(p, *inv_);
  ASSERT_TRUE(done.errors.empty()) << done.errors.front();
  ASSERT_EQ(file("svc/crit/cpu.weight"), "200");
  ASSERT_EQ(file("svc/batch/cpu.idle"), "1");
  // daemon-reload: the units' own values back.
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/svc/crit/cpu.weight", "100\n"},
                                 {"sys/fs/cgroup/svc/crit/cpuset.cpus", "0-7\n"},
                                 {"sys/fs/cgroup/svc/batch/cpu.idle", "0\n"},
                                 {"sys/fs/cgroup/svc/batch/cpu.weight", "100\n"}});
  ASSERT_TRUE(inv_->refresh_tree());
  inv_->match({});
  p.tick = 2;
  done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_TRUE(done.drifts.empty()) << done.drifts.front().path.str();
  EXPECT_EQ(file("svc/crit/cpu.weight"), "200");
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-1");
  EXPECT_EQ(file("svc/batch/cpu.idle"), "1");
  EXPECT_GE(done.reapplied.size(), 3u);
}

// A libvirt VM on a tree with libvirt's v2 layout (machine.slice/machine-qemu\x2dN\x2dNAME.scope with
// libvirt/emulator and libvirt/vcpuN inside) and libvirt's status file: matched by its domain name, its
// cpuset written on the scope and every cgroup inside it, with vcpu_pinning = "one_per_core" each vCPU on
// a CPU of its own, one per core before a core's second thread; its weight on the scope only (the
// cgroups inside keep theirs); all of it given back when the plan lets go.
TEST_F(ReconcilerV2Tree, TreeWithLibvirtsLayoutAVmsVcpusArePinnedOnePerCoreAndItsInsideKeepsItsWeights) {
  const std::string scope = "machine.slice/machine-qemu\\x2d3\\x2ddb1.scope";
  std::vector<std::pair<std::string, std::string>> files = {
      {"run/libvirt/qemu/db1.xml",
       "<domstatus state='running' pid='4242'>\n  <domain type='kvm' id='3'>\n"
       "    <name>db1</name>\n  </domain>\n</domstatus>\n"}};
  for (std::string cg : {std::string("machine.slice"), scope, scope + "/libvirt", scope + "/libvirt/emulator",
                         scope + "/libvirt/vcpu0", scope + "/libvirt/vcpu1", scope + "/libvirt/vcpu2",
                         scope + "/libvirt/vcpu3"}) {
    auto f = testing::cgroup_v2_files(
        "sys/fs/cgroup/" + cg, cg.find("/libvirt/") != std::string::npos ? "300\n" : "", "0-7", "0-7", "0");
    files.insert(files.end(), f.begin(), f.end());
  }
  testing::make_tree(t_.path(), files);
  auto topo = Topology::synthetic("pack:1 numa:1 l3:1 core:4 pu:2");  // PUs 0,1 on core 0; 2,3 on core 1...
  ASSERT_TRUE(topo) << topo.error().message();
  topo_ = *topo;
  config::Workload vm;
  vm.name = "db";
  vm.klass = config::WorkloadClass::critical;
  vm.match.vm = "db1";
  vm.bounds.vcpu_pinning = config::VcpuPinning::one_per_core;
  cfg_.workloads = {vm};
  spec_ = config::compile(cfg_, topo_.online());
  inv_ = inventory(spec_);
  auto enforcing = enforcing_writer();
  ASSERT_TRUE(enforcing);
  act::KnobWriter& w = enforcing->writer;
  Reconciler r(spec_, topo_, w);
  Plan p;
  p.tick = 1;
  p.desired["db"] = KnobState{4096, L("0-3"), std::nullopt, std::nullopt};
  auto done = r.apply(p, *inv_);
  ASSERT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file(scope + "/cpuset.cpus"), "0-3");
  EXPECT_EQ(file(scope + "/libvirt/emulator/cpuset.cpus"), "0-3");
  EXPECT_EQ(file(scope + "/libvirt/vcpu0/cpuset.cpus"), "0");
  EXPECT_EQ(file(scope + "/libvirt/vcpu1/cpuset.cpus"), "2");  // the next core, not 0's sibling
  EXPECT_EQ(file(scope + "/libvirt/vcpu2/cpuset.cpus"), "1");
  EXPECT_EQ(file(scope + "/libvirt/vcpu3/cpuset.cpus"), "3");
  EXPECT_EQ(file(scope + "/cpu.weight"), "400");
  EXPECT_EQ(file(scope + "/libvirt/vcpu0/cpu.weight"), "100\n");  // as the tree had it: not written
  // Without the option (a reload) the vCPUs share the VM's CPUs.
  cfg_.workloads[0].bounds.vcpu_pinning = config::VcpuPinning::none;
  spec_ = config::compile(cfg_, topo_.online());
  inv_ = inventory(spec_);
  r.respec(spec_);
  ASSERT_TRUE(r.apply(p, *inv_).errors.empty());
  EXPECT_EQ(file(scope + "/libvirt/vcpu1/cpuset.cpus"), "0-3");
  // Let go: every cgroup as found.
  auto back = r.apply(Plan{}, *inv_);
  ASSERT_TRUE(back.errors.empty()) << back.errors.front();
  for (std::string cg : {scope, scope + "/libvirt/emulator", scope + "/libvirt/vcpu1"})
    EXPECT_EQ(file(cg + "/cpuset.cpus"), "0-7") << cg;
  EXPECT_EQ(file(scope + "/cpu.weight"), "100");
}

// Another manager rewrites the critical cpuset keel set (kubelet's CPU manager, docker update): within
// refresh_ticks keel sees it, reports the drift, does not write its CPUs back (no write-war), and when
// the plan lets go it does not give back the value it found first either: the other manager owns it.
TEST_F(ReconcilerV2Tree, ACpusetAnotherManagerRewroteIsReportedAndLeftToIt) {
  auto enforcing = enforcing_writer();
  ASSERT_TRUE(enforcing);
  act::KnobWriter& w = enforcing->writer;
  Reconciler r(spec_, topo_, w);
  ASSERT_TRUE(r.apply(acting(), *inv_).errors.empty());
  ASSERT_EQ(file("svc/crit/cpuset.cpus"), "0-1");
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/svc/crit/cpuset.cpus", "0-3\n"}});
  std::vector<act::Drift> drifts;
  for (int tick = 0; tick < 10 && drifts.empty(); ++tick) {
    ASSERT_TRUE(inv_->refresh_tree());
    inv_->match({});
    auto done = r.apply(acting(), *inv_);
    ASSERT_TRUE(done.errors.empty()) << done.errors.front();
    drifts = done.drifts;
  }
  ASSERT_EQ(drifts.size(), 1u) << "seen within refresh_ticks";
  EXPECT_EQ(drifts[0].wrote, "0-1");
  EXPECT_EQ(drifts[0].now, "0-3");
  EXPECT_EQ(drifts[0].file, CgroupFile::cpus);
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-3\n");
  for (int tick = 0; tick < 10; ++tick) {  // still wanted: not written back during the lockout
    ASSERT_TRUE(inv_->refresh_tree());
    inv_->match({});
    EXPECT_TRUE(r.apply(acting(), *inv_).drifts.empty());
  }
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-3\n");
  auto back = r.apply(Plan{}, *inv_);
  EXPECT_TRUE(back.errors.empty()) << back.errors.front();
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-3\n") << "the 0-7 found first is not keel's to give back now";
  EXPECT_EQ(file("svc/batch/cpuset.cpus"), "0-7");  // the rest goes back as usual
}

// On v2 a cgroup whose parent's cgroup.subtree_control lacks cpuset and cpu has no such files: the note
// names the parent to fix and how, instead of a failed write.
TEST_F(ReconcilerV2Tree, ASubtreeWithoutTheControllersNamesTheParentToFix) {
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/svc/crit/cgroup.controllers", "memory pids\n"}});
  fs::remove(t_.path() / "sys/fs/cgroup/svc/crit/cpuset.cpus");
  fs::remove(t_.path() / "sys/fs/cgroup/svc/crit/cpu.weight");
  inv_ = inventory(spec_);
  auto enforcing = enforcing_writer();
  ASSERT_TRUE(enforcing);
  act::KnobWriter& w = enforcing->writer;
  Reconciler r(spec_, topo_, w);
  auto done = r.apply(acting(), *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  std::string notes;
  for (const auto& n : done.notes) notes += n + "\n";
  const std::string parent_file = (roots_.cgroup / "svc/cgroup.subtree_control").string();
  EXPECT_NE(notes.find("crit (/svc/crit) has no cpuset.cpus: its parent /svc does not enable the cpuset "
                       "controller for its children (enable it there: echo +cpuset > " +
                       parent_file + ")"),
            std::string::npos)
      << notes;
  EXPECT_NE(
      notes.find("crit (/svc/crit) has no cpu.weight: its parent /svc does not enable the cpu controller"),
      std::string::npos)
      << notes;
  EXPECT_EQ(file("svc/batch/cpuset.cpus"), "2-7");  // the rest still applies
  // What crit's held directories failed to read is said, for sensing's inventory to drop them (the
  // reconciler reads the inventory, never changes it).
  CgroupId crit{};
  for (const auto& ins : inv_->instances())
    if (ins.name == "crit") crit = ins.cgroups.at(0)->dir.id();
  ASSERT_FALSE(done.unheld.empty());
  for (const CgroupId& id : done.unheld) EXPECT_EQ(id, crit) << id.str();
}

// The same for a systemd unit (system.slice enables only memory and pids for its services until a unit
// asks for more): its slice's subtree_control is systemd's, rewritten whenever systemd realises the
// slice, so keel asks systemd for the properties that make it enable the controllers (CPUWeight=100,
// StartupAllowedCPUs=<every CPU>), journaled as not set first, once per unit and controller, and never
// writes cgroup.subtree_control; once systemd realised the units (their files there), keel acts on
// them. Observe mode says it would ask, and asks nothing.
TEST_F(ReconcilerV2Tree, AUnitWithoutTheControllersGetsThemFromSystemdNeverBehindItsBack) {
  const std::string slice = "sys/fs/cgroup/system.slice/";
  std::vector<std::pair<std::string, std::string>> files = {
      {slice + "cgroup.subtree_control", "memory pids\n"},
      {slice + "cgroup.controllers", "cpuset cpu memory pids\n"}};
  for (const char* u : {"crit.service", "batch.service"}) {
    files.push_back({slice + u + "/cgroup.procs", "300\n"});
    files.push_back({slice + u + "/cgroup.controllers", "memory pids\n"});
  }
  testing::make_tree(t_.path(), files);
  cfg_.workloads[0].match.cgroup = "/system.slice/crit.service";
  cfg_.workloads[1].match.cgroup = "/system.slice/batch.service";
  spec_ = config::compile(cfg_, topo_.online());
  inv_ = inventory(spec_);
  std::vector<std::string> asked;
  act::DirOps ops = act::DirOps::real();
  ops.unit_property = [&](const SysRoots&, std::string_view unit, UnitProperty p,
                          std::string_view value) -> Result<void> {
    asked.push_back(std::string(unit) + " " + std::string(to_string(p)) + "=" + std::string(value));
    return {};
  };
  auto systemd_units = [](std::string_view path) { return path.starts_with("/system.slice/"); };
  Plan p = acting();
  p.desired["batch"].preempt = true;
  auto all_notes = [](const Reconciled& done) {
    std::string notes;
    for (const auto& n : done.notes) notes += n + "\n";
    return notes;
  };
  {
    act::KnobWriter w(roots_, act::Mode::observe, nullptr, ops);
    w.set_reapplied_by_owner(systemd_units);
    Reconciler r(spec_, topo_, w);
    auto done = r.apply(p, *inv_);
    EXPECT_TRUE(asked.empty());
    EXPECT_NE(
        all_notes(done).find("crit (/system.slice/crit.service) has no cpuset.cpus: its parent /system.slice "
                             "does not enable the cpuset controller for its children: keel would ask systemd "
                             "to enable it (crit.service StartupAllowedCPUs=0-7 at runtime"),
        std::string::npos)
        << all_notes(done);
  }
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j) << j.error().message();
  act::KnobWriter w(roots_, act::Mode::enforce, &*j, ops);
  w.set_reapplied_by_owner(systemd_units);
  Reconciler r(spec_, topo_, w);
  auto done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  // Asked off the tick thread: the tick says it waits for the answer, a later tick says the answer.
  EXPECT_NE(all_notes(done).find("keel asked systemd to enable it (crit.service CPUWeight=100 at runtime), "
                                 "waiting for its answer"),
            std::string::npos)
      << all_notes(done);
  r.settle();
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked,
            (std::vector<std::string>{"batch.service CPUWeight=100", "batch.service StartupAllowedCPUs=0-7",
                                      "crit.service CPUWeight=100", "crit.service StartupAllowedCPUs=0-7"}));
  ASSERT_EQ(j->entries().size(), 4u);
  for (const auto& e : j->entries()) {
    EXPECT_EQ(e.kind, act::EntryKind::unit_property) << e.path.str();
    EXPECT_EQ(e.original, "") << e.path.str();
  }
  EXPECT_EQ(file("system.slice/cgroup.subtree_control"), "memory pids\n");
  asked.clear();
  p.tick = 2;
  done = r.apply(p, *inv_);
  EXPECT_NE(
      all_notes(done).find("keel asked systemd to enable it (crit.service CPUWeight=100 at runtime, given "
                           "back when keel stops"),
      std::string::npos)
      << all_notes(done);
  EXPECT_EQ(all_notes(done).find("echo +"), std::string::npos) << all_notes(done);
  // Asked once: the ticks before systemd realised the units ask nothing more.
  p.tick = 3;
  done = r.apply(p, *inv_);
  r.settle();
  EXPECT_TRUE(asked.empty());
  // systemd realised them: the controllers' files are there, and keel acts on them.
  for (const char* u : {"crit.service", "batch.service"}) {
    auto f = testing::cgroup_v2_files(slice + u, "300\n", "", "0-7", "0");
    f.push_back({slice + u + "/cgroup.controllers", "cpuset cpu memory pids\n"});
    testing::make_tree(t_.path(), f);
  }
  testing::make_tree(t_.path(), {{slice + "cgroup.subtree_control", "cpuset cpu memory pids\n"}});
  ASSERT_TRUE(inv_->refresh_tree());
  inv_->match({});
  p.tick = 4;
  done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("system.slice/crit.service/cpuset.cpus"), "0-1");
  EXPECT_EQ(file("system.slice/crit.service/cpu.weight"), "200");
  EXPECT_EQ(file("system.slice/batch.service/cpu.idle"), "1");
  EXPECT_TRUE(asked.empty());
}

// A question systemd did not answer in time (a reload, a wedged bus: host/systemd.h's deadline) is
// asked again at a later tick; one systemd refused is said and not asked again.
TEST_F(ReconcilerV2Tree, AUnitPropertySystemdDidNotAnswerIsAskedAgainARefusedOneIsNot) {
  const std::string slice = "sys/fs/cgroup/system.slice/";
  std::vector<std::pair<std::string, std::string>> files = {
      {slice + "cgroup.subtree_control", "memory pids\n"},
      {slice + "cgroup.controllers", "cpuset cpu memory pids\n"}};
  for (const char* u : {"crit.service", "batch.service"}) {
    files.push_back({slice + u + "/cgroup.procs", "300\n"});
    files.push_back({slice + u + "/cgroup.controllers", "memory pids\n"});
  }
  testing::make_tree(t_.path(), files);
  cfg_.workloads[0].match.cgroup = "/system.slice/crit.service";
  cfg_.workloads[1].match.cgroup = "/system.slice/batch.service";
  spec_ = config::compile(cfg_, topo_.online());
  inv_ = inventory(spec_);
  std::vector<std::string> asked;
  bool answering = false;
  act::DirOps ops = act::DirOps::real();
  ops.unit_property = [&](const SysRoots&, std::string_view unit, UnitProperty p,
                          std::string_view) -> Result<void> {
    asked.push_back(std::string(unit) + " " + std::string(to_string(p)));
    if (unit == "batch.service") return fail("Access denied", "/run/systemd/private", EPERM);
    if (!answering)
      return fail("systemd's manager did not answer within 5 s", "/run/systemd/private", ETIMEDOUT);
    return {};
  };
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j) << j.error().message();
  act::KnobWriter w(roots_, act::Mode::enforce, &*j, ops);
  w.set_reapplied_by_owner([](std::string_view path) { return path.starts_with("/system.slice/"); });
  Reconciler r(spec_, topo_, w);
  Plan p = acting();
  p.desired["batch"].preempt = true;
  r.apply(p, *inv_);  // asked
  r.settle();
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked, (std::vector<std::string>{"batch.service CPUWeight", "batch.service StartupAllowedCPUs",
                                             "crit.service CPUWeight", "crit.service StartupAllowedCPUs"}));
  asked.clear();
  answering = true;
  for (uint64_t tick : {2, 3}) {  // the answers taken, then the timed-out ones asked again
    p.tick = tick;
    r.apply(p, *inv_);
    r.settle();
  }
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked, (std::vector<std::string>{"crit.service CPUWeight", "crit.service StartupAllowedCPUs"}));
  asked.clear();
  for (uint64_t tick : {4, 5}) {
    p.tick = tick;
    r.apply(p, *inv_);
    r.settle();
  }
  EXPECT_TRUE(asked.empty());
}

// The question to systemd is asked off the tick thread: a systemd that takes long to answer (here: not
// until the test lets it) holds no tick; the answer is said at the tick after it came.
TEST_F(ReconcilerV2Tree, ASystemdThatTakesLongToAnswerHoldsNoTick) {
  const std::string slice = "sys/fs/cgroup/system.slice/";
  testing::make_tree(t_.path(), {{slice + "cgroup.subtree_control", "memory pids\n"},
                                 {slice + "cgroup.controllers", "cpuset cpu memory pids\n"},
                                 {slice + "crit.service/cgroup.procs", "300\n"},
                                 {slice + "crit.service/cgroup.controllers", "memory pids\n"}});
  cfg_.workloads[0].match.cgroup = "/system.slice/crit.service";
  spec_ = config::compile(cfg_, topo_.online());
  inv_ = inventory(spec_);
  std::promise<void> answer;
  std::shared_future<void> answered = answer.get_future().share();
  std::atomic<int> asked{0};
  act::DirOps ops = act::DirOps::real();
  ops.unit_property = [&](const SysRoots&, std::string_view unit, UnitProperty,
                          std::string_view) -> Result<void> {
    if (unit != "crit.service") return {};
    ++asked;
    answered.wait();
    return {};
  };
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j) << j.error().message();
  act::KnobWriter w(roots_, act::Mode::enforce, &*j, ops);
  w.set_reapplied_by_owner([](std::string_view path) { return path.starts_with("/system.slice/"); });
  Reconciler r(spec_, topo_, w);
  Plan p = acting();
  auto notes = [](const Reconciled& done) {
    std::string all;
    for (const auto& n : done.notes) all += n + "\n";
    return all;
  };
  for (uint64_t tick : {1, 2}) {
    p.tick = tick;
    // A hang guard, not a timing test: asked on the tick thread, this apply would wait for the answer.
    auto done = std::async(std::launch::async, [&] { return r.apply(p, *inv_); });
    if (done.wait_for(30s) != std::future_status::ready) {
      answer.set_value();  // lets the tick end, so the test fails rather than hangs
      FAIL() << "the tick waited for systemd";
    }
    const Reconciled got = done.get();
    EXPECT_TRUE(got.errors.empty()) << got.errors.front();
    if (tick == 1) {
      EXPECT_NE(notes(got).find("waiting for its answer"), std::string::npos) << notes(got);
    }
  }
  EXPECT_GE(asked.load(), 1);
  // The journal holds the property before systemd is asked.
  EXPECT_EQ(std::ranges::count_if(j->entries(),
                                  [](const act::JournalEntry& e) {
                                    return e.kind == act::EntryKind::unit_property &&
                                           e.path.str().find("crit.service") != std::string::npos;
                                  }),
            2);
  answer.set_value();
  r.settle();
  p.tick = 3;
  const Reconciled after = r.apply(p, *inv_);
  EXPECT_NE(
      notes(after).find("keel asked systemd to enable it (crit.service CPUWeight=100 at runtime, given back"),
      std::string::npos)
      << notes(after);
  EXPECT_EQ(asked.load(), 2);  // CPUWeight and StartupAllowedCPUs, each once
}

// kubelet's static CPU manager on a tree with its exact files (kubelet does not run here):
// cpu_manager_state gives CPUs 2-3 to a Guaranteed pod's container, config.yaml reserves CPU 0. A plan
// that hands those to keel's workloads loses them (with a note), and the Guaranteed pod's own cpuset
// is never rewritten, though a workload matches it and the plan sets it.
TEST_F(ReconcilerV2Tree, TreeWithKubeletsCpuManagerStateItsCpusAndItsPodsAreNotKeels) {
  const std::string uid = "6f1c2a9e-3b7d-4e52-9a81-0c4d5e6f7a8b";
  std::vector<std::pair<std::string, std::string>> files = {
      {"var/lib/kubelet/cpu_manager_state",
       R"({"policyName":"static","defaultCpuSet":"0-1,4-7","entries":{")" + uid +
           R"(":{"engine":"2-3"}},"checksum":2781604322})"},
      {"var/lib/kubelet/config.yaml",
       "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n"
       "reservedSystemCPUs: \"0\"\nkubeReserved:\n  cpu: 500m\n"}};
  for (std::string cg : {std::string("kubepods"), "kubepods/pod" + uid, "kubepods/pod" + uid + "/c1"}) {
    auto f = testing::cgroup_v2_files("sys/fs/cgroup/" + cg, cg.ends_with("c1") ? "400\n" : "",
                                      cg.find("pod") != std::string::npos ? "2-3" : "0-7", "0-7", "0");
    files.insert(files.end(), f.begin(), f.end());
  }
  testing::make_tree(t_.path(), files);
  config::Workload pod;
  pod.name = "engine";
  pod.klass = config::WorkloadClass::best_effort;
  pod.match.pod = uid;
  cfg_.workloads.push_back(pod);
  spec_ = config::compile(cfg_, topo_.online());
  inv_ = inventory(spec_);
  auto enforcing = enforcing_writer();
  ASSERT_TRUE(enforcing);
  act::KnobWriter& w = enforcing->writer;
  Reconciler r(spec_, topo_, w);
  Plan p = acting();  // crit 0-1, batch 2-7
  p.desired["engine"] = KnobState{std::nullopt, L("4-7"), std::nullopt, std::nullopt};
  auto done = r.apply(p, *inv_);
  ASSERT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "1");     // not the reserved CPU 0
  EXPECT_EQ(file("svc/batch/cpuset.cpus"), "4-7");  // not the pod's exclusive 2-3
  EXPECT_EQ(file("kubepods/pod" + uid + "/cpuset.cpus"), "2-3\n");
  EXPECT_EQ(file("kubepods/pod" + uid + "/c1/cpuset.cpus"), "2-3\n");
  std::string notes;
  for (const auto& n : done.notes) notes += n + "\n";
  EXPECT_NE(
      notes.find("CPUs 2-3 are kubelet's (exclusive to Guaranteed pods or reserved): not given to batch, "
                 "which gets 4-7"),
      std::string::npos)
      << notes;
  EXPECT_NE(notes.find("kubelet's static CPU manager gave this pod CPUs of its own"), std::string::npos)
      << notes;
}

TEST_F(ReconcilerV2Tree, WritesThePlanThenGivesBackWhatThePlanNoLongerSets) {
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j) << j.error().message();
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  Reconciler r(config::compile(cfg_, topo_.online()), topo_, w);
  auto done = r.apply(acting(), *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-1");
  EXPECT_EQ(file("svc/batch/cpuset.cpus"), "2-7");
  EXPECT_EQ(file("svc/crit/cpu.weight"), "200");  // systemd's mapping: 2048 * 100 / 1024
  EXPECT_EQ(file("svc/batch/cpu.weight"), "50");
  EXPECT_EQ(done.changes.size(), 4u);
  EXPECT_EQ(j->entries().size(), 4u);  // each original journaled before its write
  // The same plan again writes nothing.
  EXPECT_TRUE(r.apply(acting(), *inv_).changes.empty());

  // The victim's weight is given back; its CPUs stay.
  Plan p = acting();
  p.desired["crit"].shares.reset();
  auto back = r.apply(p, *inv_);
  ASSERT_EQ(back.changes.size(), 1u);
  EXPECT_EQ(back.changes[0].path.str(), "cgroup:svc/crit/cpu.weight");
  EXPECT_EQ(file("svc/crit/cpu.weight"), "100");
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-1");

  // Nothing desired: every knob as found, with the host running on (the journal stays for exit).
  auto none = r.apply(Plan{}, *inv_);
  EXPECT_TRUE(none.errors.empty()) << none.errors.front();
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-7");
  EXPECT_EQ(file("svc/batch/cpuset.cpus"), "0-7");
  EXPECT_EQ(file("svc/batch/cpu.weight"), "100");
  EXPECT_EQ(none.changes.size(), 3u);
}

TEST_F(ReconcilerV2Tree, AVanishedInstancesKnobsGoBackWhileItsCgroupRemains) {
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j);
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  Reconciler r(config::compile(cfg_, topo_.online()), topo_, w);
  ASSERT_TRUE(r.apply(acting(), *inv_).errors.empty());
  // batch no longer matches (its config rule changed, or it is between containers): the plan and the
  // snapshot lose it, its cgroup is still there.
  Plan p = acting();
  p.desired.erase("batch");
  config::Config only_crit = cfg_;
  only_crit.workloads.pop_back();
  const config::Spec spec = config::compile(only_crit, topo_.online());
  auto without_batch = inventory(spec);
  auto done = r.apply(p, *without_batch);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/batch/cpuset.cpus"), "0-7");
  EXPECT_EQ(file("svc/batch/cpu.weight"), "100");
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-1");
}

// The preemption class on batch: cpu.idle written on its own cgroup only (not the parent /svc, not
// crit), its weight journaled first and left alone while it is in the class (the kernel refuses a
// weight there), and on leaving the weight it had comes back (the kernel puts the default meanwhile).
TEST_F(ReconcilerV2Tree, TheClassGoesOnTheInstancesOwnCgroupAndComesOffWithItsWeight) {
  std::ofstream(roots_.cgroup / "svc/batch/cpu.weight") << "40\n";
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j);
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  Reconciler r(config::compile(cfg_, topo_.online()), topo_, w);
  Plan p;
  p.tick = 1;
  p.desired["batch"].preempt = true;
  p.desired["batch"].shares = 512;  // not the controller's way (it leaves a classed weight), still safe
  auto done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/batch/cpu.idle"), "1");
  EXPECT_EQ(file("svc/crit/cpu.idle"), "0\n");
  EXPECT_EQ(file("svc/cpu.idle"), "0\n");
  EXPECT_EQ(file("svc/batch/cpu.weight"), "40\n") << "no weight written into the class";
  bool weight_journaled = false, idle_journaled = false;
  for (const auto& e : j->entries()) {
    weight_journaled |= e.path.str().ends_with("svc/batch/cpu.weight") && e.original == "40";
    idle_journaled |= e.path.str().ends_with("svc/batch/cpu.idle") && e.original == "0";
  }
  EXPECT_TRUE(weight_journaled && idle_journaled);
  // What the kernel does meanwhile: an idle group's weight reads as its minimum.
  std::ofstream(roots_.cgroup / "svc/batch/cpu.weight") << "1\n";
  p.tick = 2;
  p.desired["batch"].preempt = false;
  p.desired["batch"].shares.reset();
  done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/batch/cpu.idle"), "0");
  EXPECT_EQ(file("svc/batch/cpu.weight"), "40") << "the weight from before the class";
}

// openEuler's cpu.qos_level (a tree with its file, no cpu.idle): -1 while in the class, 0 after.
TEST_F(ReconcilerV2Tree, TreeWithOpenEulerQosLevelIsTheClassWhereThereIsNoCpuIdle) {
  fs::remove(roots_.cgroup / "svc/batch/cpu.idle");
  std::ofstream(roots_.cgroup / "svc/batch/cpu.qos_level") << "0\n";
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j);
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  Reconciler r(config::compile(cfg_, topo_.online()), topo_, w);
  Plan p;
  p.desired["batch"].preempt = true;
  auto done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/batch/cpu.qos_level"), "-1");
  EXPECT_EQ(file("svc/batch/cpu.weight"), "100\n");
  p.desired.clear();
  done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/batch/cpu.qos_level"), "0");
}

// Anolis' cpu.bvt_warp_ns the same way; with none of the three, the minimum weight stands for the
// class (said once) and the weight found comes back after.
TEST_F(ReconcilerV2Tree, TreeWithAnolisBvtWarpOrNoClassAtAllUsesTheMinimumWeight) {
  fs::remove(roots_.cgroup / "svc/batch/cpu.idle");
  fs::remove(roots_.cgroup / "svc/crit/cpu.idle");
  std::ofstream(roots_.cgroup / "svc/crit/cpu.bvt_warp_ns") << "0\n";
  config::Config cfg = cfg_;
  cfg.workloads[0].klass = config::WorkloadClass::best_effort;  // both best-effort, both in the class
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j);
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  Reconciler r(config::compile(cfg, topo_.online()), topo_, w);
  Plan p;
  p.desired["batch"].preempt = true;
  p.desired["crit"].preempt = true;
  auto done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/crit/cpu.bvt_warp_ns"), "-1");
  EXPECT_EQ(file("svc/crit/cpu.weight"), "100\n");
  EXPECT_EQ(file("svc/batch/cpu.weight"), "1") << "shares 2, the kernel's minimum weight";
  ASSERT_EQ(done.notes.size(), 1u);
  EXPECT_NE(done.notes[0].find("the minimum weight stands for the preemption class"), std::string::npos);
  p.desired.clear();
  done = r.apply(p, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/crit/cpu.bvt_warp_ns"), "0");
  EXPECT_EQ(file("svc/batch/cpu.weight"), "100");
}

// An instance in the class that vanishes from the plan and the inventory while its cgroup stays
// leaves the class.
TEST_F(ReconcilerV2Tree, AVanishedInstanceLeavesTheClass) {
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j);
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  Reconciler r(config::compile(cfg_, topo_.online()), topo_, w);
  Plan p;
  p.desired["batch"].preempt = true;
  ASSERT_TRUE(r.apply(p, *inv_).errors.empty());
  ASSERT_EQ(file("svc/batch/cpu.idle"), "1");
  config::Config only_crit = cfg_;
  only_crit.workloads.pop_back();
  auto without_batch = inventory(config::compile(only_crit, topo_.online()));
  auto done = r.apply(Plan{}, *without_batch);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("svc/batch/cpu.idle"), "0");
}

TEST_F(ReconcilerV2Tree, ObserveComputesTheWritesAndChangesNoByte) {
  auto before = testing::tree_files(t_.path());
  act::KnobWriter w(roots_, act::Mode::observe, nullptr);
  Reconciler r(config::compile(cfg_, topo_.online()), topo_, w);
  auto done = r.apply(acting(), *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  ASSERT_EQ(done.changes.size(), 4u);
  for (const auto& c : done.changes) EXPECT_FALSE(c.written) << c.path.str();
  EXPECT_EQ(testing::tree_files(t_.path()), before);
  // The same plan tick after tick: observe sees its own earlier writes and records nothing again (a
  // would-be write logged once, not every tick); the writer holds nothing more than it did.
  for (uint64_t tick = 2; tick < 200; ++tick) {
    auto again = r.apply(acting(), *inv_);
    ASSERT_TRUE(again.changes.empty()) << "tick " << tick << ": " << again.changes.front().path.str();
  }
  EXPECT_TRUE(w.changes().empty());
  EXPECT_EQ(w.dropped_changes(), 0u);
  EXPECT_EQ(testing::tree_files(t_.path()), before);
}

// actuators.isolate_unmanaged over the v2 tree: a top-level cgroup no workload is in (cpuset.cpus not
// set: its parent's CPUs) is kept off the CPUs the critical instance is given; its children are not
// written (v2 keeps a child's effective CPUs within its parent's); observe mode computes it and changes
// no byte; when the critical CPUs move, it follows from its CPUs as found (not from keel's own value);
// when the plan gives the CPUs back it reads as found again (not set), and the managed top-level cgroup
// is never touched. A value another writer put there meanwhile is left as it is.
TEST_F(ReconcilerV2Tree, UnmanagedTopLevelCgroupsLeaveTheCriticalCpusAndComeBackAsFound) {
  std::vector<std::pair<std::string, std::string>> files;
  for (auto [cg, procs, cpus, eff] :
       std::vector<std::array<std::string, 4>>{{"system.slice", "", "", "0-7"},
                                               {"system.slice/sshd.service", "300\n", "", "0-7"},
                                               {"system.slice/pinned.service", "301\n", "4-7", "4-7"}}) {
    auto f = testing::cgroup_v2_files("sys/fs/cgroup/" + cg, procs, cpus, eff, "0");
    files.insert(files.end(), f.begin(), f.end());
  }
  testing::make_tree(t_.path(), files);
  config::Config cfg = cfg_;
  cfg.actuators.isolate_unmanaged = true;
  {
    auto before = testing::tree_files(t_.path());
    act::KnobWriter w(roots_, act::Mode::observe, nullptr);
    Reconciler r(config::compile(cfg, topo_.online()), topo_, w);
    auto done = r.apply(acting(), *inv_);
    EXPECT_TRUE(done.errors.empty()) << done.errors.front();
    bool would = false;
    for (const auto& c : done.changes)
      would |= c.path.str() == "cgroup:system.slice/cpuset.cpus" && c.to == "2-7" && !c.written;
    EXPECT_TRUE(would);
    EXPECT_EQ(testing::tree_files(t_.path()), before);
  }
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j);
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  Reconciler r(config::compile(cfg, topo_.online()), topo_, w);
  auto done = r.apply(acting(), *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("system.slice/cpuset.cpus"), "2-7");
  EXPECT_EQ(file("system.slice/sshd.service/cpuset.cpus"), "\n") << "v2: the parent's CPUs bound it";
  EXPECT_EQ(file("system.slice/pinned.service/cpuset.cpus"), "4-7\n");
  EXPECT_EQ(file("svc/cpuset.cpus"), "\n") << "a workload's top-level cgroup is not unmanaged";
  EXPECT_TRUE(j->has(act::KnobPath{act::Root::cgroup, "system.slice/cpuset.cpus"}));

  // The critical instance moves to CPUs 2-3: the unmanaged cgroup gets 0-1 back.
  Plan moved = acting();
  moved.desired["crit"].cpus = L("2-3");
  moved.desired["batch"].cpus = L("0-1,4-7");
  moved.critical_cpus = L("2-3");
  done = r.apply(moved, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(file("system.slice/cpuset.cpus"), "0-1,4-7");

  Plan back = acting();
  back.desired["crit"].cpus.reset();
  back.desired["batch"].cpus.reset();
  back.critical_cpus = CpuSet();
  done = r.apply(back, *inv_);
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(trim(file("system.slice/cpuset.cpus")), "");
  EXPECT_EQ(file("system.slice/pinned.service/cpuset.cpus"), "4-7\n");

  // Isolated again, then another writer sets the cgroup's CPUs: the give-back leaves its value.
  done = r.apply(acting(), *inv_);
  ASSERT_EQ(file("system.slice/cpuset.cpus"), "2-7");
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/system.slice/cpuset.cpus", "3-7\n"}});
  done = r.apply(back, *inv_);
  EXPECT_EQ(file("system.slice/cpuset.cpus"), "3-7\n");
  bool said = false;
  for (const auto& n : done.notes) said |= n.find("changed by another writer") != std::string::npos;
  EXPECT_TRUE(said);
}

// A cpuset the rules refuse is reported and left as it is, alone: the critical instance's own change
// is not lost with it (all of them were, every tick).
TEST_F(ReconcilerV2Tree, ACpusetTheRulesRefuseIsReportedAndTheOthersApply) {
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j);
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  Reconciler r(config::compile(cfg_, topo_.online()), topo_, w);
  Plan p = acting();
  p.desired["batch"].cpus = CpuSet();  // empty for a cgroup with tasks: refused
  auto done = r.apply(p, *inv_);
  ASSERT_EQ(done.errors.size(), 1u);
  EXPECT_NE(done.errors.front().find("cpuset /svc/batch left as it is: cannot take every CPU"),
            std::string::npos)
      << done.errors.front();
  EXPECT_EQ(file("svc/crit/cpuset.cpus"), "0-1");
  EXPECT_EQ(file("svc/batch/cpuset.cpus"), "0-7\n");
  EXPECT_EQ(file("svc/crit/cpu.weight"), "200");  // the weights, independent of it, still apply
  // The next tick tries it again (nothing recorded as set), and says so again.
  done = r.apply(p, *inv_);
  ASSERT_EQ(done.errors.size(), 1u);
  EXPECT_NE(done.errors.front().find("/svc/batch"), std::string::npos);
}

// actuators.irq_affinity: the NIC's queue IRQs leave the CPUs the critical instance holds, keeping the
// rest of their affinity, and go back as found when it holds none; other IRQs are not touched.
TEST_F(ReconcilerV2Tree, NamedIrqsLeaveCriticalCpusAndComeBack) {
  testing::make_tree(t_.path(), {
                                    {"proc/interrupts",
                                     "            CPU0       CPU1       CPU2       CPU3       CPU4       "
                                     "CPU5       CPU6       CPU7       \n"
                                     "  24:          0          0          0          0          0          "
                                     "0          0          0   PCI-MSI 49152-edge      virtio0-config\n"
                                     "  25:      12000          0          0          0          0          "
                                     "0          0          0   PCI-MSI 49153-edge      virtio0-input.0\n"
                                     "  26:          0      11000          0          0          0          "
                                     "0          0          0   PCI-MSI 49154-edge      virtio0-output.0\n"
                                     "  27:          0          0       9000          0          0          "
                                     "0          0          0   PCI-MSI 49155-edge      nvme0q1\n"
                                     " NMI:          0          0          0          0          0          "
                                     "0          0          0   Non-maskable interrupts\n"},
                                    {"proc/irq/24/smp_affinity_list", "0-7\n"},
                                    {"proc/irq/25/smp_affinity_list", "0-3\n"},
                                    {"proc/irq/26/smp_affinity_list", "1\n"},
                                    {"proc/irq/27/smp_affinity_list", "0-7\n"},
                                });
  cfg_.actuators.irq_affinity = true;
  cfg_.actuators.irq_names = {"virtio0-input.*", "virtio0-output.*"};
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j);
  act::KnobWriter w(roots_, act::Mode::enforce, &*j);
  Reconciler r(config::compile(cfg_, topo_.online()), topo_, w);
  auto done = r.apply(acting(), *inv_);  // crit holds 0-1
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  auto irq = [&](int n) {
    return std::string(trim(slurp(roots_.proc / "irq" / std::to_string(n) / "smp_affinity_list")));
  };
  EXPECT_EQ(irq(25), "2-3");  // its own CPUs minus the critical ones
  EXPECT_EQ(irq(26), "2-7");  // only critical CPUs left: every other CPU
  EXPECT_EQ(irq(24), "0-7");  // not named
  EXPECT_EQ(irq(27), "0-7");
  auto back = r.apply(Plan{}, *inv_);
  EXPECT_TRUE(back.errors.empty()) << back.errors.front();
  EXPECT_EQ(irq(25), "0-3");
  EXPECT_EQ(irq(26), "1");
}

}  // namespace
}  // namespace keel::loop

namespace keel::loop {
namespace {

// Churn with resctrl (a tree with the kernel's resctrl files: this machine has none; the writer's
// DirOps populate a group on mkdir as the kernel does): 300 ticks in which best-effort instances (one
// per cgroup under /svc/batch, named batch/job-N) come and go, five alive at a time, each given a
// memory-bandwidth cap (its own resctrl group) and its threads moved into it. A group is removed when
// its instance's cgroup goes, even while the plan still asks for it; at no tick are there more groups
// than instances alive (16 CLOSIDs: a leak would run out of them), and after the last one no keel-*
// group and no journal entry of one is left.
TEST_F(ReconcilerV2Tree, TreeWithResctrlGroupsOfInstancesThatComeAndGoNoGroupIsLeftBehind) {
  const fs::path rc = roots_.resctrl;
  testing::make_tree(rc, {{"info/last_cmd_status", "ok\n"},
                          {"info/L3/cbm_mask", "7ff\n"},
                          {"info/L3/min_cbm_bits", "1\n"},
                          {"info/L3/num_closids", "16\n"},
                          {"info/L3/shareable_bits", "0\n"},
                          {"info/L3/sparse_masks", "0\n"},
                          {"info/MB/min_bandwidth", "10\n"},
                          {"info/MB/bandwidth_gran", "10\n"},
                          {"info/MB/num_closids", "8\n"},
                          {"info/MB/delay_linear", "1\n"},
                          {"schemata", "    L3:0=7ff\n    MB:0=100\n"},
                          {"tasks", "1\n"}});
  testing::make_tree(t_.path(), {{"proc/self/mountinfo",
                                  "41 23 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n40 25 0:36 / " +
                                      rc.string() + " rw,relatime - resctrl resctrl rw\n"}});
  auto groups = [&] {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(rc)) n += e.path().filename().string().starts_with("keel-");
    return n;
  };
  auto j = act::Journal::open(t_.path() / "state", act::read_boot_id(roots_.proc));
  ASSERT_TRUE(j) << j.error().message();
  act::DirOps dirs{[](const fs::path& p) {
                     if (::mkdir(p.c_str(), 0755) != 0) return -1;
                     testing::make_tree(p, {{"schemata", "    L3:0=7ff\n    MB:0=100\n"}, {"tasks", ""}});
                     return 0;
                   },
                   [](const fs::path& p) {
                     std::error_code ec;
                     if (!fs::is_directory(p, ec)) return errno = ENOENT, -1;
                     fs::remove_all(p, ec);
                     return ec ? -1 : 0;
                   }};
  act::KnobWriter w(roots_, act::Mode::enforce, &*j, dirs);
  config::Config cfg = cfg_;
  cfg.actuators.resctrl = true;
  cfg.workloads[1].match.cgroup = "/svc/batch/*";
  cfg.workloads[1].match.each = true;
  const config::Spec spec = config::compile(cfg, topo_.online());
  auto inv = inv::Inventory::open(spec, roots_);
  ASSERT_TRUE(inv) << inv.error().message();
  Reconciler r(spec, topo_, w);
  const fs::path batch = roots_.cgroup / "svc/batch";
  auto job = [](uint64_t k) { return "job-" + std::to_string(k); };
  size_t most = 0;
  size_t moved = 0;  // tasks files a job's thread was written to
  for (uint64_t tick = 1; tick <= 300; ++tick) {
    // Jobs tick/3 .. tick/3+4 alive (none from tick 290), the others' cgroups removed.
    std::set<std::string> alive;
    for (uint64_t k = tick / 3; k < tick / 3 + 5 && tick < 290; ++k) alive.insert(job(k));
    std::vector<fs::path> gone;
    for (const auto& e : fs::directory_iterator(batch))
      if (e.is_directory() && !alive.contains(e.path().filename().string())) gone.push_back(e.path());
    for (const auto& g : gone) fs::remove_all(g);
    Plan plan;
    plan.tick = tick;
    for (const auto& name : alive) {
      if (!fs::exists(batch / name)) {
        const std::string tid = std::to_string(1000 + tick) + "\n";
        testing::make_tree(batch, testing::cgroup_v2_files(name, tid, "0-7", "0-7", "0"));
      }
      plan.desired["batch/" + name].mba_percent = 50;
    }
    // The plan still asks for the job that just went (the sample it was made from saw it): no group.
    if (tick >= 3) plan.desired["batch/" + job(tick / 3 - 1)].mba_percent = 50;
    ASSERT_TRUE(inv->refresh_tree()) << "tick " << tick;
    inv->match({});
    auto done = r.apply(plan, *inv);
    ASSERT_TRUE(done.errors.empty()) << "tick " << tick << ": " << done.errors.front();
    most = std::max(most, groups());
    ASSERT_LE(groups(), 5u) << "tick " << tick << ": groups of gone instances stay";
    for (const auto& e : fs::directory_iterator(rc))
      if (e.path().filename().string().starts_with("keel-")) moved += slurp(e.path() / "tasks").size() > 0;
  }
  EXPECT_EQ(most, 5u) << "the instances never got their groups (the test saw nothing)";
  EXPECT_GT(moved, 0u) << "no job's thread was moved into its group";
  EXPECT_EQ(groups(), 0u);
  for (const auto& e : j->entries())
    EXPECT_FALSE(e.path.root == act::Root::resctrl && e.path.rel.string().starts_with("keel-"))
        << e.path.str();
}

}  // namespace
}  // namespace keel::loop
