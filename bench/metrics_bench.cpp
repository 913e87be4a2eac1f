// What the metrics cost keel: per tick, publishing N workload instances' signals; per scrape,
// rendering the exposition; and the memory and bytes that come with them. Printed as a table with
// ratios against the smallest case (one instance) measured in the same run.
//   build/bench/keel_metrics_bench [ticks]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bpf/sched_sensor.h"
#include "metrics/metrics.h"

namespace {

using keel::metrics::Metrics;
using keel::metrics::TickReport;
using keel::metrics::WorkloadReport;

double rss_bytes() {
  std::ifstream in("/proc/self/statm");
  double size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

keel::metrics::Setup setup() {
  keel::metrics::Setup s;
  s.mode = "observe";
  s.version = "bench";
  for (unsigned i = 0; i < KEEL_HIST_BUCKETS; ++i)
    s.latency_bucket_upper_s.push_back(keel::bpf::RqHistogram::bucket_upper_us(i) / 1e6);
  s.sensors = {{"runqueue", true}, {"hardware_counters", false}};
  return s;
}

// A tick of n instances (every 8th critical, with an SLO view), each with ~200 waits spread over the
// layout as a run-queue latency distribution spreads (most short, a tail), plus "other".
TickReport tick(size_t n, std::mt19937& rng) {
  std::lognormal_distribution<double> wait_us(3.0, 1.2);
  TickReport t;
  for (size_t i = 0; i <= n; ++i) {
    WorkloadReport w;
    w.workload = i == n ? "other" : "w" + std::to_string(i);
    w.klass = i == n ? "other" : i % 8 == 0 ? "critical" : "best_effort";
    w.rq_buckets.assign(KEEL_HIST_BUCKETS, 0);
    for (int k = 0; k < 200; ++k) {
      double us = wait_us(rng);
      w.rq_buckets[keel::bpf::RqHistogram::bucket_of_us(us)] += 1;
      w.rq_sum_s += us / 1e6;
    }
    w.migrations = 10;
    w.cpu_seconds = 0.1;
    if (w.klass == "critical") {
      w.p99_s = 1e-4;
      w.slo_target_s = 2e-4;
      w.slack = 0.5;
    }
    if (i != n) w.knobs = {{"cpus", 2}, {"shares", 1024}};
    t.workloads.push_back(std::move(w));
  }
  t.health.programs = {{"switch", 1000, 10}, {"wakeup", 1000, 10}};
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int ticks = argc > 1 ? std::atoi(argv[1]) : 200;
  std::mt19937 rng(42);
  std::printf(
      "metrics cost per tick and per scrape (%d ticks each; series cap 256: instances past it fold into "
      "\"other\")\n\n",
      ticks);
  std::printf("%10s %9s %12s %12s %12s %12s %11s %10s %10s\n", "instances", "series", "publish us",
              "render us", "scrape KiB", "memory KiB", "us/instance", "publish x", "render x");
  double base_pub = 0, base_render = 0;
  for (size_t n : {1, 16, 64, 256, 1024}) {
    std::vector<TickReport> reports;
    for (int i = 0; i < 8; ++i) reports.push_back(tick(n, rng));
    double rss0 = rss_bytes();  // the exporter's memory only, not the reports'
    auto m = std::make_unique<Metrics>(setup());
    m->publish(reports[0]);  // series created outside the timing
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < ticks; ++i) m->publish(reports[static_cast<size_t>(i) % reports.size()]);
    auto t1 = std::chrono::steady_clock::now();
    std::string text;
    const int scrapes = std::max(5, ticks / 10);
    for (int i = 0; i < scrapes; ++i) text = m->render();
    auto t2 = std::chrono::steady_clock::now();
    double rss1 = rss_bytes();
    double pub = std::chrono::duration<double, std::micro>(t1 - t0).count() / ticks;
    double render = std::chrono::duration<double, std::micro>(t2 - t1).count() / scrapes;
    size_t series = 0;
    for (size_t at = 0; (at = text.find('\n', at)) != std::string::npos; ++at)
      if (at + 1 < text.size() && text[at + 1] != '#') ++series;
    if (n == 1) {
      base_pub = pub;
      base_render = render;
    }
    std::printf("%10zu %9zu %12.1f %12.1f %12.1f %12.0f %11.2f %10.1f %10.1f\n", n, series, pub, render,
                static_cast<double>(text.size()) / 1024, (rss1 - rss0) / 1024, pub / static_cast<double>(n),
                pub / base_pub, render / base_render);
  }
  return 0;
}
