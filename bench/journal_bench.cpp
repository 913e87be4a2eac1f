// What journaling a new knob costs as the journal grows, and whether the writer's per-call cost stays
// flat over a long run. Two tables, each with its baseline measured in the same run:
//  1. a new knob journaled by an append (this keel) against a rewrite of the whole journal (what every
//     new knob cost before: format 2 replaced the file with two fsyncs), at N entries already there;
//  2. KnobWriter::set in observe mode on one knob, alternating two values, 20,000 calls without anyone
//     taking the changes: microseconds per call over the last 1,000 calls against the first 1,000.
//   build/bench/keel_journal_bench [STATE_PARENT]   (default $TMPDIR or /tmp: put it on the disk keel's
//   state lives on, the fsyncs are most of the cost)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "actuators/journal.h"
#include "actuators/writer.h"

namespace {

namespace fs = std::filesystem;
using keel::act::EntryKind;
using keel::act::Journal;
using keel::act::JournalEntry;
using keel::act::Root;
using Clock = std::chrono::steady_clock;

JournalEntry entry(size_t i) {
  return {EntryKind::file,
          {Root::cgroup, "cpu/c" + std::to_string(i) + "/cpu.shares"},
          "1024",
          keel::ValueKind::weight,
          1000 + i};
}

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TMPDIR");
  fs::path parent = argc > 1 ? fs::path(argv[1]) : fs::path(tmp && *tmp ? tmp : "/tmp");
  fs::path dir = parent / ("keel-journal-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);

  std::printf("## a new knob journaled, N entries already there (%s)\n\n", parent.c_str());
  std::printf("| N | append us | rewrite us (before) | rewrite / append |\n|---|---|---|---|\n");
  constexpr size_t kNew = 40;
  for (size_t n : {100u, 1000u, 10000u, 100000u}) {
    fs::remove_all(dir / "state");
    auto j = Journal::open(dir / "state", "bench-boot");
    if (!j) {
      std::fprintf(stderr, "%s\n", j.error().message().c_str());
      return 1;
    }
    std::vector<JournalEntry> base;
    for (size_t i = 0; i < n; ++i) base.push_back(entry(i));
    if (auto r = j->replace(base); !r) {
      std::fprintf(stderr, "%s\n", r.error().message().c_str());
      return 1;
    }
    auto t = Clock::now();
    for (size_t i = 0; i < kNew; ++i) (void)j->record(entry(n + i));
    const double append = us_since(t) / kNew;
    // Before: every new knob rewrote the whole journal (temp file, fsync, rename, fsync of the dir).
    std::vector<JournalEntry> all = j->entries();
    t = Clock::now();
    for (size_t i = 0; i < kNew; ++i) {
      all.push_back(entry(n + kNew + i));
      (void)j->replace(all);
    }
    const double rewrite = us_since(t) / kNew;
    std::printf("| %zu | %.0f | %.0f | %.1fx |\n", n, append, rewrite, rewrite / append);
  }

  std::printf("\n## KnobWriter::set, observe mode, 20000 calls, changes never taken\n\n");
  fs::create_directories(dir / "tree/sys/fs/cgroup/cpu/be");
  std::ofstream(dir / "tree/sys/fs/cgroup/cpu/be/cpu.shares") << "1024\n";
  keel::act::KnobWriter w(keel::SysRoots::under(dir / "tree"), keel::act::Mode::observe, nullptr);
  const keel::act::KnobPath k{Root::cgroup, "cpu/be/cpu.shares"};
  std::vector<double> per_k;
  for (int block = 0; block < 20; ++block) {
    auto t = Clock::now();
    for (int i = 0; i < 1000; ++i) (void)w.set(k, (i % 2) != 0 ? "2048" : "512", keel::ValueKind::weight);
    per_k.push_back(us_since(t) / 1000);
  }
  std::printf("| calls | us per call | vs the first 1000 |\n|---|---|---|\n");
  for (int block : {0, 4, 9, 14, 19})
    std::printf("| %d-%d | %.2f | %.2fx |\n", block * 1000 + 1, (block + 1) * 1000, per_k[block],
                per_k[block] / per_k[0]);
  std::printf("\npending changes held: %zu (bound %zu), dropped untaken: %zu\n", w.changes().size(),
              keel::act::KnobWriter::kMaxPendingChanges, w.dropped_changes());
  fs::remove_all(dir);
  return 0;
}
