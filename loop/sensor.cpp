#include "loop/sensor.h"

#include <unistd.h>

namespace keel::loop {

namespace {

class BpfSensor final : public Sensor {
 public:
  explicit BpfSensor(bpf::HostSensor s) : s_(std::move(s)) {}
  Result<bpf::SchedDelta> read() override { return s_.sensor.read(); }
  void tend(const std::function<bpf::Worth(CgroupId)>& worth,
            const std::vector<CgroupId>& critical) override {
    s_.sensor.tend(worth, critical);
  }
  size_t entries() const override { return s_.sensor.entries(); }
  size_t capacity() const override { return s_.sensor.capacity(); }
  std::vector<bpf::ProgStats> prog_stats() const override { return s_.sensor.prog_stats(); }
  std::optional<bpf::BpfCost> cost() const override { return s_.sensor.cost(); }
  bpf::AttachKind attach() const override { return s_.sensor.kind(); }
  bool pmu() const override { return s_.pmu; }
  std::string counters_note() const override { return s_.counters_note; }
  Result<void> watch(const std::vector<bpf::SloWatch>& w) override { return s_.sensor.watch(w); }
  int events_fd() const override { return s_.sensor.events_fd(); }
  std::vector<bpf::SloEvent> take_events() override { return s_.sensor.take_events(); }

 private:
  bpf::HostSensor s_;
};

}  // namespace

Result<std::unique_ptr<Sensor>> open_bpf_sensor(const CgroupHierarchy& hierarchy, const Topology& topo,
                                                bpf::BpfStats stats) {
  auto opened = bpf::open_host_sensor(hierarchy, topo, stats);
  if (!opened)
    return fail(opened.error().message() +
                (::geteuid() != 0 ? " (keel needs root: it loads BPF programs)" : ""));
  return std::unique_ptr<Sensor>(std::make_unique<BpfSensor>(std::move(*opened)));
}

}  // namespace keel::loop
