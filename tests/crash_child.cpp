// A process that changes real cgroup v1 knobs through keel's actuators in an endless random
// sequence, for the crash-safety test to SIGKILL at random points.
// Usage: keel_crash_child STATE_DIR CPU_GROUP CPUSET_GROUP SEED
//   CPU_GROUP / CPUSET_GROUP: the test's cgroup in the v1 cpu / cpuset hierarchy, relative to the
//   cgroup root (e.g. "cpu,cpuacct/keel-crash-42"), each with children a and b.
#include <cstdio>
#include <random>
#include <string>

#include "actuators/journal.h"
#include "actuators/writer.h"
#include "host/sys_roots.h"

int main(int argc, char** argv) {
  using namespace keel;
  using namespace keel::act;
  if (argc != 5) {
    std::fprintf(stderr, "usage: keel_crash_child STATE_DIR CPU_GROUP CPUSET_GROUP SEED\n");
    return 2;
  }
  const SysRoots roots = SysRoots::host();
  auto journal = Journal::open(argv[1], read_boot_id(roots.proc));
  if (!journal) {
    std::fprintf(stderr, "%s\n", journal.error().message().c_str());
    return 1;
  }
  KnobWriter w(roots, Mode::enforce, &*journal);
  const std::string cpu = argv[2], cpuset = argv[3];
  std::mt19937 rng(static_cast<unsigned>(std::stoul(argv[4])));
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const char* lists[] = {"0", "1", "0-1"};
  for (;;) {
    switch (pick(6)) {
      case 0: (void)w.set({Root::cgroup, cpu + "/cpu.shares"}, std::to_string(2 + pick(4000))); break;
      case 1: (void)w.set({Root::cgroup, cpu + "/a/cpu.shares"}, std::to_string(2 + pick(4000))); break;
      case 2: (void)w.set({Root::cgroup, cpu + "/a/cpu.cfs_quota_us"}, std::to_string(1000 + pick(200000))); break;
      case 3: (void)w.set({Root::cgroup, cpu + "/b/cpu.cfs_period_us"}, std::to_string(10000 + pick(90000))); break;
      // Children first when shrinking, parent first when growing: the order the kernel accepts.
      case 4: {
        std::string l = lists[pick(2)];
        (void)w.set({Root::cgroup, cpuset + "/b/cpuset.cpus"}, l);
        (void)w.set({Root::cgroup, cpuset + "/a/cpuset.cpus"}, l);
        (void)w.set({Root::cgroup, cpuset + "/cpuset.cpus"}, l);
        break;
      }
      case 5:
        (void)w.set({Root::cgroup, cpuset + "/cpuset.cpus"}, "0-1");
        (void)w.set({Root::cgroup, cpuset + "/a/cpuset.cpus"}, lists[pick(3)]);
        (void)w.set({Root::cgroup, cpuset + "/b/cpuset.cpus"}, lists[pick(3)]);
        break;
    }
  }
}
