#include "actuators/irq.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "host/fileio.h"

namespace keel::act {

std::string irq_affinity_unwritable(const SysRoots& roots) {
  const auto irq = roots.proc / "irq";
  if (::access((irq / "default_smp_affinity").c_str(), W_OK) != 0 && errno == EROFS)
    return irq.string() + " is read-only here (a sandbox: systemd's ProtectKernelTunables=)";
  return {};
}

namespace fs = std::filesystem;

namespace {

struct Token {
  std::string_view text;
  size_t at;  // offset in the line
};

std::vector<Token> tokens(std::string_view line, size_t from) {
  std::vector<Token> out;
  size_t i = from;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back({line.substr(start, i - start), start});
  }
  return out;
}

std::string line_no(size_t n) { return "/proc/interrupts line " + std::to_string(n) + ": "; }

// After the counts of a numbered line the kernel prints the chip, the hardware IRQ (with the flow
// name appended, "49153-edge", or as a Level/Edge word on arm64), then two spaces and the handler
// names separated by ", " (a name may itself hold spaces: "PCIe PME").
void parse_irq_tail(std::string_view line, const std::vector<Token>& t, size_t i, IrqLine& out) {
  if (i < t.size()) out.chip = std::string(t[i++].text);
  auto numeric_hwirq = [](std::string_view s) {
    size_t dash = s.find('-');
    return all_digits(s.substr(0, dash));
  };
  if (i < t.size() && numeric_hwirq(t[i].text)) out.hwirq = std::string(t[i++].text);
  if (i < t.size() && (t[i].text == "Level" || t[i].text == "Edge"))
    out.hwirq += (out.hwirq.empty() ? "" : " ") + std::string(t[i++].text);
  if (i < t.size() && t[i].text.starts_with('-'))  // the flow name without a hwirq ("xen-dyn -event")
    out.hwirq += (out.hwirq.empty() ? "" : " ") + std::string(t[i++].text);
  if (i >= t.size()) return;
  std::string_view names = trim(line.substr(t[i].at));
  for (size_t pos = 0; pos <= names.size();) {
    size_t comma = names.find(", ", pos);
    std::string_view name =
        trim(names.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    if (!name.empty()) out.devices.emplace_back(name);
    if (comma == std::string_view::npos) break;
    pos = comma + 2;
  }
}

Result<CpuSet> read_affinity(const SysRoots& roots, const KnobPath& k, unsigned irq) {
  auto text = read_file(k.abs(roots));
  if (!text) {
    if (text.error().err == ENOENT)
      return fail("IRQ " + std::to_string(irq) + " has no affinity file (no such IRQ?)",
                  k.abs(roots).string(), ENOENT);
    return std::unexpected(text.error());
  }
  auto set = CpuSet::parse_list(*text);
  if (!set) return fail("unreadable affinity: " + set.error().what, k.abs(roots).string());
  return *set;
}

Result<void> check_on_host(const CpuSet& cpus, const CpuSet& host_cpus, const std::string& what) {
  if (host_cpus.empty()) return fail("the host's CPU set is empty: cannot validate " + what);
  CpuSet stray = cpus - host_cpus;
  if (!stray.empty())
    return fail(what + " names CPUs " + stray.to_list() + " that this host does not have (" +
                host_cpus.to_list() + ")");
  return {};
}

std::string irqbalance_warning(const SysRoots& roots) {
  auto pids = irqbalance_pids(roots);
  if (pids.empty()) return {};
  return "irqbalance is running (pid " + std::to_string(pids.front()) +
         ") and rewrites IRQ affinities on its own: it may undo these moves (stop it, or ban these IRQs with "
         "--banirq / their CPUs with IRQBALANCE_BANNED_CPULIST)";
}

struct Planned {
  unsigned irq;
  KnobPath path;
  CpuSet from, to;
};

// Writes a plan computed (and checked) in full beforehand.
Result<IrqReport> write_plan(KnobWriter& w, const std::vector<Planned>& plan) {
  IrqReport rep;
  rep.warning = irqbalance_warning(w.roots());
  for (const auto& p : plan) {
    auto r = w.set(p.path, p.to.to_list(), ValueKind::cpu_list);
    if (!r) {
      Error e = r.error();
      if (e.err == EIO) e.what += " (a kernel-managed IRQ: its affinity is fixed by the driver)";
      return std::unexpected(std::move(e));
    }
    if (*r)
      rep.moved.push_back({p.irq, p.from, p.to});
    else
      ++rep.unchanged;
  }
  return rep;
}

std::vector<unsigned> unique_sorted(std::vector<unsigned> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

KnobPath irq_affinity_knob(unsigned irq) {
  return {Root::proc, fs::path("irq") / std::to_string(irq) / "smp_affinity_list"};
}

namespace {

Result<void> check_dev(std::string_view dev) {
  if (dev.empty() || dev == "." || dev == ".." || dev.find('/') != std::string_view::npos)
    return fail(quoted(dev) + " is not a network device name");
  return {};
}

const char* queue_prefix(QueueKind k) { return k == QueueKind::rx ? "rx-" : "tx-"; }

// Each IRQ's affinity as `target` makes it from the current one, every IRQ read and checked before
// the first write (a target that fails writes nothing).
template <class Target>
Result<IrqReport> move_irqs(KnobWriter& w, const std::vector<unsigned>& irqs, const Target& target) {
  std::vector<Planned> plan;
  for (unsigned irq : unique_sorted(irqs)) {
    KnobPath k = irq_affinity_knob(irq);
    auto cur = read_affinity(w.roots(), k, irq);
    if (!cur) return std::unexpected(cur.error());
    auto to = target(irq, k, *cur);
    if (!to) return std::unexpected(to.error());
    plan.push_back({irq, k, *cur, *to});
  }
  return write_plan(w, plan);
}

}  // namespace

Result<Interrupts> parse_interrupts(std::string_view text) {
  Interrupts out;
  size_t n = 0;
  bool header = false;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++n;
    if (trim(line).empty()) continue;
    if (!header) {
      for (const auto& t : tokens(line, 0)) {
        unsigned cpu = 0;
        auto digits = t.text.substr(std::min<size_t>(3, t.text.size()));
        if (!t.text.starts_with("CPU") || !all_digits(digits) ||
            std::from_chars(digits.data(), digits.data() + digits.size(), cpu).ec != std::errc())
          return fail(line_no(n) + "expected a header of CPU names, got '" + std::string(t.text) + "'");
        out.cpus.push_back(cpu);
      }
      if (out.cpus.empty()) return fail(line_no(n) + "the header names no CPU");
      header = true;
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      return fail(line_no(n) + "no ':' after the IRQ: '" + std::string(line) + "'");
    IrqLine l;
    l.id = std::string(trim(line.substr(0, colon)));
    if (l.id.empty() || l.id.find(' ') != std::string::npos)
      return fail(line_no(n) + "bad IRQ name '" + l.id + "'");
    bool numbered = all_digits(l.id);
    if (numbered) {
      unsigned v = 0;
      if (std::from_chars(l.id.data(), l.id.data() + l.id.size(), v).ec != std::errc() || v > 0x7fffffff)
        return fail(line_no(n) + "IRQ number out of range: " + l.id);
      l.irq = static_cast<int>(v);
    }
    auto t = tokens(line, colon + 1);
    size_t i = 0;
    for (; i < t.size() && l.counts.size() < out.cpus.size() && all_digits(t[i].text); ++i) {
      uint64_t c = 0;
      if (std::from_chars(t[i].text.data(), t[i].text.data() + t[i].text.size(), c).ec != std::errc())
        return fail(line_no(n) + "count out of range: " + std::string(t[i].text));
      l.counts.push_back(c);
    }
    if (numbered) {
      // Every numbered IRQ has a count for each online CPU.
      if (l.counts.size() != out.cpus.size())
        return fail(line_no(n) + "IRQ " + l.id + " has " + std::to_string(l.counts.size()) + " counts for " +
                    std::to_string(out.cpus.size()) + " CPUs");
      parse_irq_tail(line, t, i, l);
    } else if (i < t.size()) {
      l.description = std::string(trim(line.substr(t[i].at)));
    }
    out.lines.push_back(std::move(l));
  }
  if (!header) return fail("/proc/interrupts is empty");
  return out;
}

Result<Interrupts> read_interrupts(const SysRoots& roots) {
  fs::path p = roots.proc / "interrupts";
  auto text = read_file(p);
  if (!text) return std::unexpected(text.error());
  auto t = parse_interrupts(*text);
  if (!t) return fail(t.error().what, p.string());
  return t;
}

bool glob_match(std::string_view pattern, std::string_view name) {
  return ::fnmatch(std::string(pattern).c_str(), std::string(name).c_str(), 0) == 0;
}

std::vector<unsigned> match_irqs(const Interrupts& table, const std::vector<std::string>& patterns) {
  std::vector<unsigned> out;
  for (const auto& l : table.lines) {
    if (l.irq < 0) continue;
    bool hit = std::any_of(l.devices.begin(), l.devices.end(), [&](const std::string& d) {
      return std::any_of(patterns.begin(), patterns.end(),
                         [&](const std::string& p) { return glob_match(p, d); });
    });
    if (hit) out.push_back(static_cast<unsigned>(l.irq));
  }
  return unique_sorted(std::move(out));
}

Result<IrqReport> move_irqs_off(KnobWriter& w, const std::vector<unsigned>& irqs, const CpuSet& avoid,
                                const CpuSet& host_cpus) {
  if (auto r = check_on_host(avoid, host_cpus, "the CPUs to move IRQs off (" + avoid.to_list() + ")"); !r)
    return std::unexpected(r.error());
  return move_irqs(w, irqs, [&](unsigned irq, const KnobPath& k, const CpuSet& cur) -> Result<CpuSet> {
    CpuSet to = cur - avoid;
    if ((to & host_cpus).empty())
      return fail("moving IRQ " + std::to_string(irq) + " off CPUs " + avoid.to_list() +
                      " would leave it no CPU (it may run on " + cur.to_list() + "): nothing written",
                  k.abs(w.roots()).string());
    return to;
  });
}

Result<IrqReport> move_irqs_onto(KnobWriter& w, const std::vector<unsigned>& irqs, const CpuSet& cpus,
                                 const CpuSet& host_cpus) {
  if (cpus.empty()) return fail("refusing to give IRQs an empty CPU set");
  if (auto r = check_on_host(cpus, host_cpus, "the CPUs to move IRQs onto (" + cpus.to_list() + ")"); !r)
    return std::unexpected(r.error());
  return move_irqs(w, irqs, [&](unsigned, const KnobPath&, const CpuSet&) -> Result<CpuSet> { return cpus; });
}

Result<std::vector<unsigned>> net_queues(const SysRoots& roots, std::string_view dev, QueueKind kind) {
  if (auto r = check_dev(dev); !r) return std::unexpected(r.error());
  fs::path dir = roots.sys / "class/net" / std::string(dev) / "queues";
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return fail("cannot list the device's queues", dir.string(), ec.value());
  std::vector<unsigned> out;
  std::string_view prefix = queue_prefix(kind);
  for (const auto& e : it) {
    std::string name = e.path().filename().string();
    std::string_view num = std::string_view(name).substr(std::min(prefix.size(), name.size()));
    unsigned q = 0;
    if (name.starts_with(prefix) && all_digits(num) &&
        std::from_chars(num.data(), num.data() + num.size(), q).ec == std::errc())
      out.push_back(q);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<bool> set_queue_cpus(KnobWriter& w, std::string_view dev, QueueKind kind, unsigned queue,
                            const CpuSet& cpus, const CpuSet& host_cpus) {
  if (auto r = check_dev(dev); !r) return std::unexpected(r.error());
  const char* file = kind == QueueKind::rx ? "rps_cpus" : "xps_cpus";
  if (auto r = check_on_host(cpus, host_cpus, std::string(file) + " " + cpus.to_list()); !r)
    return std::unexpected(r.error());
  KnobPath k{Root::sys, fs::path("class/net") / std::string(dev) / "queues" /
                            (queue_prefix(kind) + std::to_string(queue)) / file};
  // Checked here as well as by the writer, so observe mode does not report a change to a queue that
  // does not exist (the kernel builds rps_cpus only with CONFIG_RPS, xps_cpus for multiqueue devices).
  if (auto cur = read_file(k.abs(w.roots())); !cur) return std::unexpected(cur.error());
  return w.set(k, cpus.to_mask(), ValueKind::cpu_mask);
}

std::vector<int> irqbalance_pids(const SysRoots& roots) {
  std::vector<int> out;
  std::error_code ec;
  for (fs::directory_iterator it(roots.proc, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    int pid = 0;
    if (!all_digits(name) || std::from_chars(name.data(), name.data() + name.size(), pid).ec != std::errc())
      continue;
    auto comm = read_file(it->path() / "comm");  // gone meanwhile: not irqbalance
    if (comm && trim(*comm) == "irqbalance") out.push_back(pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace keel::act
