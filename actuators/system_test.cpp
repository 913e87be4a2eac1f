// Sched features (steal_task), IRQ affinity and RPS/XPS. This kernel has no STEAL and debugfs is not
// mounted, and IRQ/queue writes would change the host: those run over temporary trees with the
// kernel's file formats (*Tree.*). /proc/interrupts parsing also runs over this machine's live file.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <stdexcept>

#include "actuators/irq.h"
#include "actuators/restore.h"
#include "actuators/sched_features.h"
#include "actuators/writer.h"
#include "host/cpuset.h"
#include "host/fileio.h"
#include "tests/support/tmp_tree.h"

namespace keel::act {
namespace {

namespace fs = std::filesystem;
using testing::slurp;

CpuSet list(std::string_view s) { return CpuSet::parse_list(s).value(); }
std::string trimmed(const fs::path& p) { return std::string(trim(slurp(p))); }

// A temporary root with a journal in root/state; snapshots leave the journal out.
class TreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_tree(t_.path(), {{"proc/sys/kernel/random/boot_id", "11111111-2222\n"}});
    roots_ = SysRoots::under(t_.path());
  }
  std::map<std::string, std::string> snapshot() { return testing::tree_files(t_.path(), "state"); }
  Journal journal() {
    auto j = Journal::open(t_.path() / "state", read_boot_id(roots_.proc));
    EXPECT_TRUE(j) << j.error().message();
    return std::move(*j);
  }
  fs::path at(const std::string& rel) { return t_.path() / rel; }
  testing::TempDir t_;
  SysRoots roots_;
};

// ---------------------------------------------------------------------------------------------
// Sched features

// As 4.19/5.10 openEuler kernels print it: every feature, NO_ when off, one space after each.
constexpr std::string_view kOpenEulerFeatures =
    "GENTLE_FAIR_SLEEPERS START_DEBIT NO_NEXT_BUDDY LAST_BUDDY CACHE_HOT_BUDDY WAKEUP_PREEMPTION NO_HRTICK "
    "NO_DOUBLE_TICK NONTASK_CAPACITY TTWU_QUEUE NO_SIS_AVG_CPU SIS_PROP NO_WARN_DOUBLE_CLOCK RT_PUSH_IPI "
    "RT_RUNTIME_SHARE NO_LB_MIN ATTACH_AGE_LOAD WA_IDLE WA_WEIGHT WA_BIAS UTIL_EST UTIL_EST_FASTUP NO_STEAL "
    "\n";
// Mainline 6.x: no STEAL.
constexpr std::string_view kMainlineFeatures =
    "PLACE_LAG PLACE_DEADLINE_INITIAL PLACE_REL_DEADLINE RUN_TO_PARITY PREEMPT_SHORT NO_NEXT_BUDDY "
    "PICK_BUDDY "
    "CACHE_HOT_BUDDY DELAY_DEQUEUE DELAY_ZERO WAKEUP_PREEMPTION NO_HRTICK NO_HRTICK_DL NONTASK_CAPACITY "
    "TTWU_QUEUE SIS_UTIL NO_WARN_DOUBLE_CLOCK RT_PUSH_IPI NO_RT_RUNTIME_SHARE NO_LB_MIN ATTACH_AGE_LOAD "
    "WA_IDLE "
    "WA_WEIGHT WA_BIAS UTIL_EST LATENCY_WARN \n";

std::string with_steal_on(std::string_view features) {
  std::string s(features);
  s.replace(s.find("NO_STEAL"), 8, "STEAL");
  return s;
}

using SchedFeaturesTree = TreeTest;

TEST_F(SchedFeaturesTree, OldPathStealOffIsTurnedOnJournaledWithItsOriginalTokenAndNotRewrittenWhenOn) {
  testing::make_tree(t_.path(), {{"sys/kernel/debug/sched_features", std::string(kOpenEulerFeatures)}});
  auto p = probe_sched_feature(roots_, kSteal);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->state, FeatureState::off);
  EXPECT_EQ(p->file.str(), "debugfs:sched_features");

  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto r = set_sched_feature(w, kSteal, true);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, FeatureChange::changed);
  EXPECT_EQ(slurp(at("sys/kernel/debug/sched_features")), "STEAL");  // the one token, as `echo STEAL >`
  ASSERT_EQ(j.entries().size(), 1u);
  EXPECT_EQ(j.entries()[0].kind, EntryKind::sched_feature);
  EXPECT_EQ(j.entries()[0].path.str(), "debugfs:sched_features");
  EXPECT_EQ(j.entries()[0].original, "NO_STEAL");

  // The kernel toggles the one feature and prints the whole line again: on now, so no write.
  std::string kernel_line = with_steal_on(kOpenEulerFeatures);
  testing::make_tree(t_.path(), {{"sys/kernel/debug/sched_features", kernel_line}});
  auto again = set_sched_feature(w, kSteal, true);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, FeatureChange::unchanged);
  EXPECT_EQ(slurp(at("sys/kernel/debug/sched_features")), kernel_line);

  // Turning it off again writes NO_STEAL; the journal keeps the first original.
  auto off = set_sched_feature(w, kSteal, false);
  ASSERT_TRUE(off);
  EXPECT_EQ(*off, FeatureChange::changed);
  EXPECT_EQ(slurp(at("sys/kernel/debug/sched_features")), "NO_STEAL");
  ASSERT_EQ(j.entries().size(), 1u);
  EXPECT_EQ(j.entries()[0].original, "NO_STEAL");
}

TEST_F(SchedFeaturesTree, NewPathStealOnIsTurnedOffAndRestoreWritesStealBack) {
  testing::make_tree(t_.path(), {{"sys/kernel/debug/sched/features", with_steal_on(kOpenEulerFeatures)}});
  auto p = probe_sched_feature(roots_, kSteal);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->state, FeatureState::on);
  EXPECT_EQ(p->file.str(), "debugfs:sched/features");
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    auto r = set_sched_feature(w, kSteal, false);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, FeatureChange::changed);
    EXPECT_EQ(slurp(at("sys/kernel/debug/sched/features")), "NO_STEAL");
    ASSERT_EQ(j.entries().size(), 1u);
    EXPECT_EQ(j.entries()[0].original, "STEAL");
  }
  Journal j = journal();
  auto rep = restore(roots_, j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  EXPECT_EQ(rep.restored, 1u);
  EXPECT_EQ(slurp(at("sys/kernel/debug/sched/features")), "STEAL");  // the token restore wrote
  EXPECT_TRUE(j.entries().empty());
}

TEST_F(SchedFeaturesTree, EnforceThenRestoreGivesTheOldPathItsOriginalTokenBack) {
  testing::make_tree(t_.path(), {{"sys/kernel/debug/sched_features", std::string(kOpenEulerFeatures)}});
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    ASSERT_EQ(set_sched_feature(w, kSteal, true).value(), FeatureChange::changed);
  }
  Journal j = journal();
  auto rep = restore(roots_, j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  EXPECT_EQ(rep.restored, 1u);
  EXPECT_EQ(slurp(at("sys/kernel/debug/sched_features")), "NO_STEAL");
  // What the feature reads as now: off, as before keel ran.
  EXPECT_EQ(probe_sched_feature(roots_, kSteal).value().state, FeatureState::off);
}

TEST_F(SchedFeaturesTree, MainlineWithoutStealIsUnsupportedAndNothingIsWritten) {
  testing::make_tree(t_.path(), {{"sys/kernel/debug/sched/features", std::string(kMainlineFeatures)}});
  auto before = snapshot();
  auto p = probe_sched_feature(roots_, kSteal);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->state, FeatureState::unsupported);
  EXPECT_NE(p->why.find("no STEAL sched feature"), std::string::npos) << p->why;
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto r = set_sched_feature(w, kSteal, true);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, FeatureChange::unsupported);
  EXPECT_EQ(snapshot(), before);
  EXPECT_TRUE(j.entries().empty());
  EXPECT_TRUE(w.changes().empty());
  // Whole tokens only: HRTICK is off (NO_HRTICK), not confused with HRTICK_DL; UTIL_EST is on.
  EXPECT_EQ(probe_sched_feature(roots_, "HRTICK").value().state, FeatureState::off);
  EXPECT_EQ(probe_sched_feature(roots_, "UTIL_EST").value().state, FeatureState::on);
  EXPECT_EQ(probe_sched_feature(roots_, "UTIL").value().state, FeatureState::unsupported);
}

TEST_F(SchedFeaturesTree, DebugfsNotMountedIsUnsupportedWithTheReason) {
  // No debugfs directory at all, then the empty mount point an unmounted debugfs leaves.
  for (bool make_dir : {false, true}) {
    if (make_dir) testing::make_tree(t_.path(), {{"sys/kernel/debug/", ""}});
    auto p = probe_sched_feature(roots_, kSteal);
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(p->state, FeatureState::unsupported);
    EXPECT_NE(p->why.find("debugfs is not mounted"), std::string::npos) << p->why;
    KnobWriter w(roots_, Mode::observe, nullptr);
    EXPECT_EQ(set_sched_feature(w, kSteal, true).value(), FeatureChange::unsupported);
    EXPECT_TRUE(w.changes().empty());
  }
  // Mounted, but without a features file (CONFIG_SCHED_DEBUG off): a different reason.
  testing::make_tree(t_.path(), {{"sys/kernel/debug/tracing/", ""}});
  auto p = probe_sched_feature(roots_, kSteal);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->state, FeatureState::unsupported);
  EXPECT_NE(p->why.find("no sched features file"), std::string::npos) << p->why;
}

TEST_F(SchedFeaturesTree, WhenBothFilesExistTheNewPathIsUsedAndTheOldLeftAlone) {
  // No kernel has both; sched/features is where 5.13+ keeps it, so a stray old file is ignored.
  std::string old_line = with_steal_on(kOpenEulerFeatures);
  testing::make_tree(t_.path(), {{"sys/kernel/debug/sched/features", std::string(kOpenEulerFeatures)},
                                 {"sys/kernel/debug/sched_features", old_line}});
  auto p = probe_sched_feature(roots_, kSteal);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->state, FeatureState::off);  // what sched/features says, not sched_features
  EXPECT_EQ(p->file.str(), "debugfs:sched/features");
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  ASSERT_EQ(set_sched_feature(w, kSteal, true).value(), FeatureChange::changed);
  EXPECT_EQ(slurp(at("sys/kernel/debug/sched/features")), "STEAL");
  EXPECT_EQ(slurp(at("sys/kernel/debug/sched_features")), old_line);
}

TEST_F(SchedFeaturesTree, ObserveModeWritesNothingAndListsTheToggle) {
  testing::make_tree(t_.path(), {{"sys/kernel/debug/sched/features", std::string(kOpenEulerFeatures)}});
  auto before = snapshot();
  KnobWriter w(roots_, Mode::observe, nullptr);
  auto r = set_sched_feature(w, kSteal, true);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, FeatureChange::changed);
  EXPECT_EQ(snapshot(), before);  // byte for byte
  EXPECT_FALSE(fs::exists(at("state")));
  ASSERT_EQ(w.changes().size(), 1u);
  EXPECT_EQ(w.changes()[0].path.str(), "debugfs:sched/features");
  EXPECT_EQ(w.changes()[0].from, "NO_STEAL");
  EXPECT_EQ(w.changes()[0].to, "STEAL");
  EXPECT_FALSE(w.changes()[0].written);
}

TEST_F(SchedFeaturesTree, ABadFeatureNameIsAnErrorAndWritesNothing) {
  testing::make_tree(t_.path(), {{"sys/kernel/debug/sched/features", std::string(kOpenEulerFeatures)}});
  auto before = snapshot();
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  for (std::string_view bad : {"", "NO_STEAL", "steal", "STEAL NO_TTWU_QUEUE", "STEAL\n"}) {
    auto r = set_sched_feature(w, bad, true);
    EXPECT_FALSE(r) << "'" << bad << "'";
  }
  EXPECT_EQ(snapshot(), before);
  EXPECT_TRUE(j.entries().empty());
}

TEST(SchedFeaturesHost, ThisKernelWithoutDebugfsReportsStealUnsupportedNotAnError) {
  SysRoots host = SysRoots::host();
  std::error_code ec;
  bool mounted = fs::is_directory(host.debugfs, ec) &&
                 fs::directory_iterator(host.debugfs, ec) != fs::directory_iterator();
  if (mounted) GTEST_SKIP() << "debugfs is mounted here: the not-mounted case is covered by the trees";
  auto p = probe_sched_feature(host, kSteal);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->state, FeatureState::unsupported);
  EXPECT_NE(p->why.find("debugfs is not mounted at /sys/kernel/debug"), std::string::npos) << p->why;
}

// ---------------------------------------------------------------------------------------------
// /proc/interrupts

// A q35 VM with 4 vCPUs: virtio-net with 4 queue pairs, virtio-blk, virtio-input, a PCIe port.
constexpr std::string_view kVirtioVm = R"(           CPU0       CPU1       CPU2       CPU3       
  0:         33          0          0          0   IO-APIC   2-edge      timer
  1:          0          0          9          0   IO-APIC   1-edge      i8042
  8:          0          0          0          0   IO-APIC   8-edge      rtc0
  9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
 11:          0          0         17          0   IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio3
 24:          0          0          0          0   PCI-MSI 16384-edge      PCIe PME, pciehp
 25:          0          0          0          0   PCI-MSI 49152-edge      virtio0-config
 26:       5012          0          0          0   PCI-MSI 49153-edge      virtio0-input.0
 27:          0        871          0          0   PCI-MSI 49154-edge      virtio0-output.0
 28:          0          0       4410          0   PCI-MSI 49155-edge      virtio0-input.1
 29:          0          0          0         93   PCI-MSI 49156-edge      virtio0-output.1
 30:        120          0          0          0   PCI-MSI 49157-edge      virtio0-input.2
 31:          0          0          0          0   PCI-MSI 49158-edge      virtio0-output.2
 32:          0          0          0       3301   PCI-MSI 49159-edge      virtio0-input.3
 33:          0          0          0          0   PCI-MSI 49160-edge      virtio0-output.3
 34:          0          0          0          0   PCI-MSI 65536-edge      virtio1-config
 35:          0       7781          0          0   PCI-MSI 65537-edge      virtio1-req.0
 36:          0          0          0          0   PCI-MSI 81920-edge      virtio2-config
 37:         42          0          0          0   PCI-MSI 81921-edge      virtio2-input
NMI:          0          0          0          0   Non-maskable interrupts
LOC:     912345     803210     755001     699876   Local timer interrupts
SPU:          0          0          0          0   Spurious interrupts
PMI:          0          0          0          0   Performance monitoring interrupts
IWI:          0          0          0          0   IRQ work interrupts
RES:      12001      11876      10990      12345   Rescheduling interrupts
CAL:       4410       3890       4012       3321   Function call interrupts
TLB:        501        499        512        488   TLB shootdowns
ERR:          0
MIS:          0
PIN:          0          0          0          0   Posted-interrupt notification event
)";

// A Kunpeng (arm64, GICv3 + ITS) host with 4 CPUs and a dual-port mlx5 NIC.
constexpr std::string_view kMlx5Host = R"(           CPU0       CPU1       CPU2       CPU3       
  1:          0          0          0          0     GICv3  25 Level     vgic
  3:    8812345    7712345    6612345    5512345     GICv3  30 Level     arch_timer
  4:          0          0          0          0     GICv3  27 Level     kvm guest vtimer
  6:          0          0          0          0     GICv3  23 Level     arm-pmu
 40:          0          0          0          0   ITS-MSI 16384 Edge      PCIe PME, aerdrv
 60:         12          0          0          0   ITS-MSI 524288 Edge      mlx5_async0@pci:0000:01:00.0
 61:     231001          0          0          0   ITS-MSI 524289 Edge      mlx5_comp0@pci:0000:01:00.0
 62:          0     198200          0          0   ITS-MSI 524290 Edge      mlx5_comp1@pci:0000:01:00.0
 63:          0          0     201777          0   ITS-MSI 524291 Edge      mlx5_comp2@pci:0000:01:00.0
 64:          0          0          0     187654   ITS-MSI 524292 Edge      mlx5_comp3@pci:0000:01:00.0
 65:          9          0          0          0   ITS-MSI 526336 Edge      mlx5_async1@pci:0000:01:00.1
 66:       1200          0          0          0   ITS-MSI 526337 Edge      mlx5_comp0@pci:0000:01:00.1
 67:          0       1100          0          0   ITS-MSI 526338 Edge      mlx5_comp1@pci:0000:01:00.1
IPI0:     12345      23456      34567      45678       Rescheduling interrupts
IPI1:       123        234        345        456       Function call interrupts
IPI2:         0          0          0          0       CPU stop interrupts
IPI3:         0          0          0          0       CPU stop (for crash dump) interrupts
IPI4:         0          0          0          0       Timer broadcast interrupts
IPI5:      1111       2222       3333       4444       IRQ work interrupts
Err:          0
)";

const IrqLine& line(const Interrupts& t, std::string_view id) {
  for (const auto& l : t.lines)
    if (l.id == id) return l;
  throw std::runtime_error("no line " + std::string(id));
}

TEST(Interrupts, ParsesAVirtioVmsQueuesSharedLinesAndArchCounters) {
  auto t = parse_interrupts(kVirtioVm);
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ(t->cpus, (std::vector<unsigned>{0, 1, 2, 3}));
  ASSERT_EQ(t->lines.size(), 30u);
  const IrqLine& rx0 = line(*t, "26");
  EXPECT_EQ(rx0.irq, 26);
  EXPECT_EQ(rx0.counts, (std::vector<uint64_t>{5012, 0, 0, 0}));
  EXPECT_EQ(rx0.chip, "PCI-MSI");
  EXPECT_EQ(rx0.hwirq, "49153-edge");
  EXPECT_EQ(rx0.devices, std::vector<std::string>{"virtio0-input.0"});
  EXPECT_EQ(line(*t, "11").hwirq, "11-fasteoi");
  EXPECT_EQ(line(*t, "11").devices, (std::vector<std::string>{"uhci_hcd:usb1", "virtio3"}));
  EXPECT_EQ(line(*t, "24").devices, (std::vector<std::string>{"PCIe PME", "pciehp"}));  // a name with a space
  const IrqLine& nmi = line(*t, "NMI");
  EXPECT_EQ(nmi.irq, -1);
  EXPECT_TRUE(nmi.devices.empty());
  EXPECT_EQ(nmi.counts.size(), 4u);
  EXPECT_EQ(nmi.description, "Non-maskable interrupts");
  EXPECT_EQ(line(*t, "LOC").counts[3], 699876u);
  EXPECT_EQ(line(*t, "ERR").counts, std::vector<uint64_t>{0});  // one system-wide count
  EXPECT_TRUE(line(*t, "ERR").devices.empty());
}

TEST(Interrupts, ParsesAnArm64Mlx5HostsLevelEdgeColumnsAndIpis) {
  auto t = parse_interrupts(kMlx5Host);
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ(t->cpus.size(), 4u);
  const IrqLine& timer = line(*t, "3");
  EXPECT_EQ(timer.chip, "GICv3");
  EXPECT_EQ(timer.hwirq, "30 Level");
  EXPECT_EQ(timer.counts, (std::vector<uint64_t>{8812345, 7712345, 6612345, 5512345}));
  EXPECT_EQ(timer.devices, std::vector<std::string>{"arch_timer"});
  EXPECT_EQ(line(*t, "4").devices, std::vector<std::string>{"kvm guest vtimer"});
  const IrqLine& comp = line(*t, "62");
  EXPECT_EQ(comp.chip, "ITS-MSI");
  EXPECT_EQ(comp.hwirq, "524290 Edge");
  EXPECT_EQ(comp.devices, std::vector<std::string>{"mlx5_comp1@pci:0000:01:00.0"});
  EXPECT_EQ(line(*t, "40").devices, (std::vector<std::string>{"PCIe PME", "aerdrv"}));
  EXPECT_EQ(line(*t, "IPI3").description, "CPU stop (for crash dump) interrupts");
  EXPECT_EQ(line(*t, "IPI3").irq, -1);
  EXPECT_EQ(line(*t, "Err").counts.size(), 1u);
}

TEST(Interrupts, CountColumnsFollowTheHeadersCpusWhenSomeAreOffline) {
  // CPU1 offline: three columns, for CPUs 0, 2 and 3.
  auto t = parse_interrupts(
      "           CPU0       CPU2       CPU3       \n"
      " 26:       5012         17          4   PCI-MSI 49153-edge      virtio0-input.0\n"
      "NMI:          0          0          0   Non-maskable interrupts\n");
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ(t->cpus, (std::vector<unsigned>{0, 2, 3}));
  EXPECT_EQ(line(*t, "26").counts, (std::vector<uint64_t>{5012, 17, 4}));
  EXPECT_EQ(line(*t, "26").devices, std::vector<std::string>{"virtio0-input.0"});
}

TEST(Interrupts, RejectsMalformedTextWithTheLine) {
  auto short_line = parse_interrupts("  CPU0 CPU1\n 24:  1  PCI-MSI 49153-edge  virtio0-input.0\n");
  ASSERT_FALSE(short_line);
  EXPECT_NE(short_line.error().what.find("line 2"), std::string::npos) << short_line.error().what;
  EXPECT_NE(short_line.error().what.find("1 counts for 2 CPUs"), std::string::npos)
      << short_line.error().what;
  EXPECT_FALSE(parse_interrupts("  24: 1 2 PCI-MSI\n"));        // no header
  EXPECT_FALSE(parse_interrupts(""));                           // empty
  EXPECT_FALSE(parse_interrupts("  CPU0\n 24 1 PCI-MSI x\n"));  // no ':'
}

TEST(InterruptsHost, ParsesThisMachinesLiveFile) {
  SysRoots host = SysRoots::host();
  auto t = read_interrupts(host);
  ASSERT_TRUE(t) << t.error().message();
  // The header names the online CPUs.
  auto online = CpuSet::parse_list(read_file("/sys/devices/system/cpu/online").value());
  ASSERT_TRUE(online);
  EXPECT_EQ(t->cpus, online->cpus());
  size_t numbered = 0, named_dirs = 0;
  for (const auto& l : t->lines) {
    if (l.irq < 0) continue;
    ++numbered;
    EXPECT_EQ(l.counts.size(), t->cpus.size()) << "IRQ " << l.id;
    fs::path dir = host.proc / "irq" / l.id;
    EXPECT_TRUE(fs::is_directory(dir)) << dir;
    // The kernel makes /proc/irq/<n>/<handler name>: the names parsed must be those exactly.
    for (const auto& d : l.devices) {
      if (d.find('/') != std::string::npos) continue;  // not a valid directory name
      EXPECT_TRUE(fs::is_directory(dir / d)) << "IRQ " << l.id << " device '" << d << "'";
      ++named_dirs;
    }
  }
  EXPECT_GT(numbered, 0u);
  EXPECT_GT(named_dirs, 0u);
}

TEST(Interrupts, GlobsSelectIrqsByDeviceName) {
  EXPECT_TRUE(glob_match("virtio*-input.*", "virtio0-input.0"));
  EXPECT_FALSE(glob_match("virtio*-input.*", "virtio0-output.0"));
  EXPECT_FALSE(glob_match("virtio*-input.*", "virtio2-input"));  // virtio-input device, not a queue
  EXPECT_TRUE(glob_match("mlx5_comp*", "mlx5_comp10@pci:0000:01:00.0"));
  EXPECT_TRUE(glob_match("virtio0-input.[02]", "virtio0-input.2"));
  EXPECT_FALSE(glob_match("virtio0-input.[02]", "virtio0-input.1"));
  EXPECT_TRUE(glob_match("virtio?-req.?", "virtio1-req.0"));
  EXPECT_FALSE(glob_match("mlx5", "mlx5_comp0"));  // the whole name

  auto vm = parse_interrupts(kVirtioVm).value();
  EXPECT_EQ(match_irqs(vm, {"virtio*-input.*"}), (std::vector<unsigned>{26, 28, 30, 32}));
  EXPECT_EQ(match_irqs(vm, {"virtio0-output.*", "virtio*-input.0"}),
            (std::vector<unsigned>{26, 27, 29, 31, 33}));
  EXPECT_EQ(match_irqs(vm, {"virtio3"}), std::vector<unsigned>{11});  // a shared line's second handler
  EXPECT_TRUE(match_irqs(vm, {"Non-maskable*", "NMI"}).empty());      // counters are not IRQs
  auto host = parse_interrupts(kMlx5Host).value();
  EXPECT_EQ(match_irqs(host, {"mlx5_comp*"}), (std::vector<unsigned>{61, 62, 63, 64, 66, 67}));
  EXPECT_EQ(match_irqs(host, {"mlx5_comp*@pci:0000:01:00.0"}), (std::vector<unsigned>{61, 62, 63, 64}));
}

// ---------------------------------------------------------------------------------------------
// IRQ affinity and RPS/XPS over a tree

// The VM above: /proc/interrupts, /proc/irq/<n>/smp_affinity_list for IRQs 24-37 (all CPUs, as the
// kernel prints them), and eth0 with 4 rx and 2 tx queues on a 40-CPU layout (masks of two words).
class IrqTree : public TreeTest {
 protected:
  void SetUp() override {
    TreeTest::SetUp();
    std::vector<std::pair<std::string, std::string>> files = {{"proc/interrupts", std::string(kVirtioVm)}};
    for (int irq = 24; irq <= 37; ++irq)
      files.push_back({"proc/irq/" + std::to_string(irq) + "/smp_affinity_list", "0-3\n"});
    files.push_back({"proc/irq/31/smp_affinity_list", "3\n"});  // pinned by hand earlier
    for (const char* q : {"rx-0", "rx-1", "rx-2", "rx-10"})
      files.push_back({std::string("sys/class/net/eth0/queues/") + q + "/rps_cpus", "00,00000000\n"});
    files.push_back({"sys/class/net/eth0/queues/tx-0/xps_cpus", "00,00000001\n"});
    files.push_back({"sys/class/net/eth0/queues/tx-1/xps_cpus", "00,00000002\n"});
    testing::make_tree(t_.path(), files);
  }
  fs::path affinity(int irq) { return at("proc/irq/" + std::to_string(irq) + "/smp_affinity_list"); }
  fs::path queue(const std::string& q, const char* file) {
    return at("sys/class/net/eth0/queues/" + q + "/" + file);
  }
  std::vector<unsigned> irqs(const std::vector<std::string>& patterns) {
    auto t = read_interrupts(roots_);
    EXPECT_TRUE(t) << t.error().message();
    return t ? match_irqs(*t, patterns) : std::vector<unsigned>{};
  }
  const CpuSet host4_ = CpuSet::range(0, 3);
  const CpuSet host40_ = CpuSet::range(0, 39);
};

TEST_F(IrqTree, MovesTheNicsRxQueuesOffCriticalCpusAndComparesAsSets) {
  testing::make_tree(t_.path(),
                     {{"proc/irq/30/smp_affinity_list", "0,1\n"}});  // already off 2-3, not canonical
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto rep = move_irqs_off(w, irqs({"virtio*-input.*"}), list("2-3"), host4_);
  ASSERT_TRUE(rep) << rep.error().message();
  ASSERT_EQ(rep->moved.size(), 3u);
  EXPECT_EQ(rep->unchanged, 1u);
  EXPECT_EQ(rep->moved[0].irq, 26u);
  EXPECT_EQ(rep->moved[0].from, list("0-3"));
  EXPECT_EQ(rep->moved[0].to, list("0-1"));
  EXPECT_TRUE(rep->warning.empty());
  for (int irq : {26, 28, 32}) EXPECT_EQ(trimmed(affinity(irq)), "0-1") << irq;
  EXPECT_EQ(slurp(affinity(30)), "0,1\n");  // no write
  EXPECT_EQ(slurp(affinity(27)), "0-3\n");  // tx queue: not selected
  ASSERT_EQ(j.entries().size(), 3u);
  EXPECT_EQ(j.entries()[0].path.str(), "proc:irq/26/smp_affinity_list");
  EXPECT_EQ(j.entries()[0].original, "0-3");
}

TEST_F(IrqTree, MovingOffEveryCpuAnIrqMayUseIsAnErrorAndWritesNothing) {
  auto before = snapshot();
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  // IRQ 26 alone could move, but 31 may only use CPU 3: the whole request writes nothing.
  auto rep = move_irqs_off(w, {26, 31}, list("3"), host4_);
  ASSERT_FALSE(rep);
  EXPECT_NE(rep.error().what.find("would leave it no CPU"), std::string::npos) << rep.error().message();
  EXPECT_NE(rep.error().path.find("irq/31/smp_affinity_list"), std::string::npos) << rep.error().path;
  EXPECT_EQ(snapshot(), before);
  EXPECT_TRUE(j.entries().empty());
  EXPECT_TRUE(w.changes().empty());
}

TEST_F(IrqTree, CpuListsAreValidatedAgainstTheHostBeforeAnyWrite) {
  auto before = snapshot();
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto off = move_irqs_off(w, {26}, list("2-5"), host4_);
  ASSERT_FALSE(off);
  EXPECT_NE(off.error().what.find("CPUs 4-5 that this host does not have (0-3)"), std::string::npos)
      << off.error().what;
  EXPECT_FALSE(move_irqs_onto(w, {26}, CpuSet{}, host4_));        // never an empty set
  EXPECT_FALSE(move_irqs_onto(w, {26}, list("1,7"), host4_));     // CPU 7 is not here
  EXPECT_FALSE(move_irqs_onto(w, {26}, list("1"), CpuSet{}));     // no host CPUs to check against
  auto missing = move_irqs_onto(w, {26, 99}, list("1"), host4_);  // no IRQ 99
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().what.find("IRQ 99"), std::string::npos) << missing.error().what;
  EXPECT_EQ(snapshot(), before);
  EXPECT_TRUE(j.entries().empty());
}

TEST_F(IrqTree, MovesIrqsOntoACpuSet) {
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto rep = move_irqs_onto(w, irqs({"virtio0-output.*"}), list("1"), host4_);
  ASSERT_TRUE(rep) << rep.error().message();
  EXPECT_EQ(rep->moved.size(), 4u);
  for (int irq : {27, 29, 31, 33}) EXPECT_EQ(trimmed(affinity(irq)), "1") << irq;
  EXPECT_EQ(rep->moved[2].from, list("3"));  // IRQ 31
  // Again: everything is in place, no write.
  auto again = move_irqs_onto(w, irqs({"virtio0-output.*"}), list("1"), host4_);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->moved.empty());
  EXPECT_EQ(again->unchanged, 4u);
}

TEST_F(IrqTree, RpsAndXpsMasksOnA40CpuHostUseTwoWordsAndCompareAsSets) {
  auto rx = net_queues(roots_, "eth0", QueueKind::rx);
  ASSERT_TRUE(rx) << rx.error().message();
  EXPECT_EQ(*rx, (std::vector<unsigned>{0, 1, 2, 10}));
  EXPECT_EQ(net_queues(roots_, "eth0", QueueKind::tx).value(), (std::vector<unsigned>{0, 1}));
  EXPECT_FALSE(net_queues(roots_, "eth9", QueueKind::rx));

  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto r = set_queue_cpus(w, "eth0", QueueKind::rx, 0, list("32-39"), host40_);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(*r);
  EXPECT_EQ(slurp(queue("rx-0", "rps_cpus")), "000000ff,00000000");
  ASSERT_TRUE(set_queue_cpus(w, "eth0", QueueKind::rx, 10, list("0-39"), host40_).value());
  EXPECT_EQ(CpuSet::parse_mask(slurp(queue("rx-10", "rps_cpus"))).value(), list("0-39"));
  // "00,00000002" is CPU 1 in the kernel's width: no write.
  EXPECT_FALSE(set_queue_cpus(w, "eth0", QueueKind::tx, 1, list("1"), host40_).value());
  EXPECT_EQ(slurp(queue("tx-1", "xps_cpus")), "00,00000002\n");
  // An empty set turns steering off for the queue.
  ASSERT_TRUE(set_queue_cpus(w, "eth0", QueueKind::tx, 0, CpuSet{}, host40_).value());
  EXPECT_TRUE(CpuSet::parse_mask(slurp(queue("tx-0", "xps_cpus"))).value().empty());
  EXPECT_EQ(j.entries().size(), 3u);

  auto before = snapshot();
  auto stray = set_queue_cpus(w, "eth0", QueueKind::rx, 1, list("38-40"), host40_);
  ASSERT_FALSE(stray);
  EXPECT_NE(stray.error().what.find("CPUs 40 "), std::string::npos) << stray.error().what;
  EXPECT_FALSE(set_queue_cpus(w, "../eth0", QueueKind::rx, 1, list("1"), host40_));
  EXPECT_FALSE(set_queue_cpus(w, "eth0", QueueKind::rx, 5, list("1"), host40_));  // no rx-5
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(j.entries().size(), 3u);
}

TEST_F(IrqTree, ObserveModeWritesNothingAndListsEveryMove) {
  auto before = snapshot();
  KnobWriter w(roots_, Mode::observe, nullptr);
  auto rep = move_irqs_off(w, irqs({"virtio*-input.*"}), list("2-3"), host4_);
  ASSERT_TRUE(rep) << rep.error().message();
  EXPECT_EQ(rep->moved.size(), 4u);
  ASSERT_TRUE(set_queue_cpus(w, "eth0", QueueKind::rx, 0, list("32-39"), host40_).value());
  // A queue that does not exist is an error in observe mode too, not a change to a file made later.
  EXPECT_FALSE(set_queue_cpus(w, "eth0", QueueKind::rx, 5, list("1"), host40_));
  EXPECT_EQ(snapshot(), before);  // byte for byte
  EXPECT_FALSE(fs::exists(at("state")));
  ASSERT_EQ(w.changes().size(), 5u);
  EXPECT_EQ(w.changes()[0].path.str(), "proc:irq/26/smp_affinity_list");
  EXPECT_EQ(w.changes()[0].from, "0-3");
  EXPECT_EQ(w.changes()[0].to, "0-1");
  EXPECT_EQ(w.changes()[4].path.str(), "sys:class/net/eth0/queues/rx-0/rps_cpus");
  EXPECT_EQ(w.changes()[4].to, "000000ff,00000000");
  for (const auto& c : w.changes()) EXPECT_FALSE(c.written) << c.path.str();
}

TEST_F(IrqTree, RestoreBringsAffinityAndRpsMasksBack) {
  auto before = snapshot();
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    ASSERT_TRUE(move_irqs_off(w, irqs({"virtio*-input.*"}), list("2-3"), host4_));
    ASSERT_TRUE(move_irqs_onto(w, {31}, list("0"), host4_));
    ASSERT_TRUE(set_queue_cpus(w, "eth0", QueueKind::rx, 0, list("32-39"), host40_));
    ASSERT_TRUE(set_queue_cpus(w, "eth0", QueueKind::tx, 1, list("4-7"), host40_));
    EXPECT_EQ(j.entries().size(), 7u);
  }
  EXPECT_NE(snapshot(), before);
  Journal j = journal();  // as `keel restore` would
  auto rep = restore(roots_, j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  EXPECT_EQ(rep.restored, 7u);
  for (const auto& [file, content] : before) EXPECT_EQ(trimmed(at(file)), std::string(trim(content))) << file;
  EXPECT_TRUE(j.entries().empty());
}

TEST_F(IrqTree, WarnsWhenIrqbalanceRuns) {
  testing::make_tree(t_.path(), {{"proc/1/comm", "systemd\n"},
                                 {"proc/640/comm", "irqbalanced\n"},  // not the same name
                                 {"proc/700/", ""}});                 // exited: no comm
  EXPECT_TRUE(irqbalance_pids(roots_).empty());
  KnobWriter w(roots_, Mode::observe, nullptr);
  auto quiet = move_irqs_off(w, {26}, list("3"), host4_);
  ASSERT_TRUE(quiet);
  EXPECT_TRUE(quiet->warning.empty());

  testing::make_tree(t_.path(), {{"proc/812/comm", "irqbalance\n"}, {"proc/self/comm", "irqbalance\n"}});
  EXPECT_EQ(irqbalance_pids(roots_), std::vector<int>{812});
  auto rep = move_irqs_off(w, {26}, list("3"), host4_);
  ASSERT_TRUE(rep);
  EXPECT_NE(rep->warning.find("irqbalance is running (pid 812)"), std::string::npos) << rep->warning;
}

}  // namespace
}  // namespace keel::act
