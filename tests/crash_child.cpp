// A process that changes real cgroup knobs through keel's actuators in an endless random sequence,
// for the crash-safety test to SIGKILL at random points.
// Usage: keel_crash_child STATE_DIR PATH SEED [progress]
//   PATH: the test's cgroup from the hierarchy root ("/keel-crash-1"), with children a, a/leaf and b:
//   in both the v1 cpu and cpuset hierarchies where the host has them, else in the unified one.
//   progress: a '.' on stdout after each change, so the test can kill it after a number of changes
//   rather than after a time (which depends on how fast the machine is).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "actuators/cgroup_knobs.h"
#include "actuators/session.h"
#include "host/cgroup.h"

int main(int argc, char** argv) {
  using namespace keel;
  using namespace keel::act;
  if (argc != 4 && !(argc == 5 && std::string(argv[4]) == "progress")) {
    std::fprintf(stderr, "usage: keel_crash_child STATE_DIR NAME SEED [progress]\n");
    return 2;
  }
  const bool progress = argc == 5;
  const SysRoots roots = SysRoots::host();
  auto layout = discover(roots);
  if (!layout) {
    std::fprintf(stderr, "%s\n", layout.error().message().c_str());
    return 1;
  }
  const bool v1 = layout->v1_with("cpu") != nullptr && layout->v1_with("cpuset") != nullptr;
  if (!v1 && layout->unified() == nullptr) {
    std::fprintf(stderr, "needs the v1 cpu and cpuset hierarchies or the unified one\n");
    return 1;
  }
  const CgroupHierarchy cpu = v1 ? *layout->v1_with("cpu") : *layout->unified();
  const CgroupHierarchy cpuset = v1 ? *layout->v1_with("cpuset") : *layout->unified();
  // Not Session::start: it would restore a leftover journal, and the test wants keel restore to.
  auto journal = Journal::open(argv[1], read_boot_id(roots.proc));
  if (!journal) {
    std::fprintf(stderr, "%s\n", journal.error().message().c_str());
    return 1;
  }
  KnobWriter w(roots, Mode::enforce, &*journal);
  std::fputs("ready\n", stdout);  // the test times its kill from here, not from a slow start
  std::fflush(stdout);
  const std::string base = argv[2];
  std::mt19937 rng(static_cast<unsigned>(std::stoul(argv[3])));
  auto pick = [&](unsigned n) { return rng() % n; };
  const CpuSet sets[] = {CpuSet::range(0, 0), CpuSet::range(1, 1), CpuSet::range(0, 1)};
  for (;;) {
    switch (pick(5)) {
      case 0:
        (void)set_cpu_weight(w, cpu, base, 2 + pick(8000));
        break;
      case 1:
        (void)set_cpu_weight(w, cpu, base + "/a", 2 + pick(8000));
        break;
      case 2: {
        auto period = std::chrono::microseconds(10000 + pick(90000));
        (void)set_cpu_quota(w, cpu, base + "/a", std::chrono::microseconds(1000 + pick(200000)), period);
        break;
      }
      case 3:
        if (pick(2) == 1) {
          (void)set_cpu_idle(w, cpu, base + "/b", true);
        } else {  // out of idle, then a weight: the kernel's reset weight must not become the original
          (void)set_cpu_idle(w, cpu, base + "/b", false);
          (void)set_cpu_weight(w, cpu, base + "/b", 2 + pick(8000));
        }
        break;
      case 4: {
        // Parent and children together: moves CPUs between siblings, shrinks and grows the parent.
        CpuSet parent = sets[pick(3)];
        CpuSet a = sets[pick(3)] & parent, b = sets[pick(3)] & parent;
        if (a.empty()) a = parent;
        CpuSet leaf = sets[pick(3)] & a;  // a/leaf holds a task: never empty
        if (leaf.empty()) leaf = a;
        (void)apply_cpusets(w, cpuset,
                            {{base, parent, {}},
                             {base + "/a", a, {}},
                             {base + "/a/leaf", leaf, {}},
                             {base + "/b", b.empty() ? parent : b, {}}});
        break;
      }
    }
    if (progress) (void)!::write(STDOUT_FILENO, ".", 1);
  }
}
