// TOML -> Config. Only what is needed to build the structs is checked here; the meaning of the
// values is checked in validate.cpp.
#include <algorithm>
#include <initializer_list>
#include <optional>
#include <vector>

#include "config/internal.h"

namespace keel::config::detail {
namespace {

using Keys = std::initializer_list<std::string_view>;

template <class E>
struct Word {
  std::string_view text;
  E value;
};

Pos pos_of(const toml::source_region& region, Pos fallback) {
  if (region.begin.line == 0) return fallback;  // nodes created implicitly (dotted keys) have no source
  return {static_cast<int>(region.begin.line), static_cast<int>(region.begin.column)};
}

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer " + std::to_string(n.as_integer()->get());
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known word closest to a typo, if it is close enough to be what was meant.
std::optional<std::string_view> closest(std::string_view word, const std::vector<std::string_view>& known) {
  std::optional<std::string_view> best;
  size_t best_distance = 0;
  for (auto k : known) {
    size_t d = edit_distance(word, k);
    if (!best || d < best_distance) best = k, best_distance = d;
  }
  size_t limit = std::max<size_t>(2, word.size() / 3);
  if (best && best_distance <= limit && best_distance < word.size()) return best;
  return std::nullopt;
}

std::string join(const std::vector<std::string_view>& words, std::string_view quote) {
  std::string out;
  for (auto w : words) {
    if (!out.empty()) out += ", ";
    out += std::string(quote) + std::string(w) + std::string(quote);
  }
  return out;
}

// One TOML table being read. Knows how to name itself and its keys in messages:
// who = "" or "workload 'redis': ", path = "daemon." or "bounds.cpus.", where = "[daemon]" or "bounds.cpus".
class Section {
 public:
  Section(const toml::table& table, Pos pos, std::string who, std::string path, std::string where,
          Report& report)
      : table_(table),
        pos_(pos),
        who_(std::move(who)),
        path_(std::move(path)),
        where_(std::move(where)),
        report_(report) {}

  Pos pos() const { return pos_; }
  bool has(std::string_view key) const { return table_.contains(key); }
  std::string name(std::string_view key) const { return path_ + std::string(key); }
  void error(Pos pos, const std::string& message) const { report_.error(pos, who_ + message); }

  void reject_unknown(Keys known_keys) {
    std::vector<std::string_view> known(known_keys);
    for (auto&& [key, value] : table_) {
      if (std::ranges::find(known, key.str()) != known.end()) continue;
      std::string message = "unknown key '" + std::string(key.str()) + "'";
      message += where_.empty() ? " at the top level" : " in " + where_;
      if (auto near = closest(key.str(), known)) {
        message += " (did you mean '" + std::string(*near) + "'?)";
        typo_fixes_.emplace_back(*near);
      } else {
        message += " (known keys: " + join(known, "") + ")";
      }
      error(pos_of(key.source(), pos_of(value.source(), pos_)), message);
    }
  }

  // A key reported as missing right after its typo was reported would be the same mistake twice.
  void missing(std::string_view key) {
    if (std::ranges::find(typo_fixes_, key) != typo_fixes_.end()) return;
    std::string message = "missing required key '" + std::string(key) + "'";
    if (!where_.empty()) message += " in " + where_;
    error(pos_, message);
  }

  // Each reader returns nullopt when the key is absent or its value is reported as bad,
  // and stores the value's position in *at when asked to.
  std::optional<std::string> string(std::string_view key, Pos* at = nullptr) const {
    auto* n = find(key, at);
    if (!n) return std::nullopt;
    if (auto* s = n->as_string()) return s->get();
    wrong_type(key, *n, "a string");
    return std::nullopt;
  }

  std::optional<std::vector<std::string>> strings(std::string_view key, Pos* at = nullptr) const {
    auto* n = find(key, at);
    if (!n) return std::nullopt;
    auto* a = n->as_array();
    if (!a) {
      wrong_type(key, *n, "an array of strings like [\"virtio*-input.*\"]");
      return std::nullopt;
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < a->size(); ++i) {
      auto* s = a->get(i)->as_string();
      if (!s) {
        error(value_pos(*a->get(i)),
              name(key) + "[" + std::to_string(i) + "] must be a string, got " + type_name(*a->get(i)));
        return std::nullopt;
      }
      out.push_back(s->get());
    }
    return out;
  }

  std::optional<bool> boolean(std::string_view key, Pos* at = nullptr) const {
    auto* n = find(key, at);
    if (!n) return std::nullopt;
    if (auto* b = n->as_boolean()) return b->get();
    wrong_type(key, *n, "a boolean (true or false)");
    return std::nullopt;
  }

  std::optional<long long> integer(std::string_view key, Pos* at = nullptr) const {
    auto* n = find(key, at);
    if (!n) return std::nullopt;
    if (auto* i = n->as_integer()) return i->get();
    wrong_type(key, *n, "an integer");
    return std::nullopt;
  }

  // A number: an integer or a float ("200", "2.5").
  std::optional<double> number(std::string_view key, Pos* at = nullptr) const {
    auto* n = find(key, at);
    if (!n) return std::nullopt;
    if (auto* i = n->as_integer()) return static_cast<double>(i->get());
    if (auto* f = n->as_floating_point()) return f->get();
    wrong_type(key, *n, "a number");
    return std::nullopt;
  }

  std::optional<std::chrono::nanoseconds> duration(std::string_view key, std::string_view example,
                                                   Pos* at = nullptr) const {
    auto* n = find(key, at);
    if (!n) return std::nullopt;
    auto* s = n->as_string();
    if (!s) {
      wrong_type(key, *n,
                 "a duration string with a unit (ns, us, ms, s, m, h) like \"" + std::string(example) + "\"");
      return std::nullopt;
    }
    auto d = parse_duration(s->get());
    if (!d) error(value_pos(*n), name(key) + ": bad duration \"" + s->get() + "\": " + d.error().what);
    return d ? std::optional(*d) : std::nullopt;
  }

  std::optional<CpuSet> cpu_list(std::string_view key, Pos* at = nullptr) const {
    Pos p;
    auto text = string(key, &p);
    if (at) *at = p;
    if (!text) return std::nullopt;
    auto set = CpuSet::parse_list(*text);
    if (!set) error(p, name(key) + " is not a valid CPU list: " + set.error().message());
    return set ? std::optional(*set) : std::nullopt;
  }

  template <class E>
  std::optional<E> word(std::string_view key, std::initializer_list<Word<E>> words, Pos* at = nullptr) const {
    Pos p;
    auto text = string(key, &p);
    if (at) *at = p;
    if (!text) return std::nullopt;
    std::vector<std::string_view> known;
    for (auto& w : words) {
      if (w.text == *text) return w.value;
      known.push_back(w.text);
    }
    std::string message = name(key) + " must be one of " + join(known, "\"") + "; got \"" + *text + "\"";
    if (auto near = closest(*text, known)) message += " (did you mean \"" + std::string(*near) + "\"?)";
    error(p, message);
    return std::nullopt;
  }

  std::optional<Section> table(std::string_view key) const {
    auto* n = find(key, nullptr);
    if (!n) return std::nullopt;
    auto* t = n->as_table();
    if (!t) {
      wrong_type(key, *n, "a table");
      return std::nullopt;
    }
    return Section(*t, value_pos(*n), who_, name(key) + ".", name(key), report_);
  }

  std::optional<IntRange> range(std::string_view key) const {
    auto sub = table(key);
    if (!sub) return std::nullopt;
    sub->reject_unknown({"min", "max"});
    IntRange r;
    r.pos = sub->pos();
    auto lo = sub->integer("min", &r.min_pos);
    auto hi = sub->integer("max", &r.max_pos);
    for (auto bound : {"min", "max"})
      if (!sub->has(bound)) sub->missing(bound);
    if (!lo || !hi) return std::nullopt;
    r.min = *lo;
    r.max = *hi;
    return r;
  }

 private:
  const toml::node* find(std::string_view key, Pos* at) const {
    auto* n = table_.get(key);
    if (n && at) *at = value_pos(*n);
    return n;
  }

  Pos value_pos(const toml::node& n) const { return pos_of(n.source(), pos_); }

  void wrong_type(std::string_view key, const toml::node& n, const std::string& expected) const {
    error(value_pos(n), name(key) + " must be " + expected + ", got " + type_name(n));
  }

  const toml::table& table_;
  Pos pos_;
  std::string who_, path_, where_;
  Report& report_;
  std::vector<std::string> typo_fixes_;
};

Section top_section(const toml::table& t, std::string_view name, Report& report) {
  return Section(t, pos_of(t.source(), {1, 1}), "", std::string(name) + ".", "[" + std::string(name) + "]",
                 report);
}

Daemon read_daemon(Section& s) {
  s.reject_unknown({"mode", "period", "state_dir", "metrics_listen", "health_listen", "metrics_max_workloads",
                    "hierarchy", "early_ticks", "rollback"});
  Daemon d;
  if (auto v = s.word<Mode>("mode", {{"observe", Mode::observe}, {"enforce", Mode::enforce}})) d.mode = *v;
  if (auto v = s.duration("period", "1s", &d.period_pos)) d.period = *v;
  if (auto v = s.boolean("early_ticks")) d.early_ticks = *v;
  if (auto v = s.word<Rollback>("rollback",
                                {{"auto", Rollback::automatic}, {"not_on_exit", Rollback::not_on_exit}}))
    d.rollback = *v;
  if (auto v = s.string("state_dir", &d.state_dir_pos)) d.state_dir = *v;
  if (auto v = s.string("metrics_listen", &d.metrics_listen_pos)) d.metrics_listen = *v;
  if (auto v = s.string("health_listen", &d.health_listen_pos)) d.health_listen = *v;
  if (auto v = s.integer("metrics_max_workloads", &d.metrics_max_workloads_pos)) d.metrics_max_workloads = *v;
  if (auto v = s.word<Hierarchy>("hierarchy", {{"auto", Hierarchy::automatic},
                                               {"unified", Hierarchy::unified},
                                               {"cpu", Hierarchy::cpu},
                                               {"cpuset", Hierarchy::cpuset}}))
    d.hierarchy = *v;
  return d;
}

HostSection read_host(Section& s) {
  s.reject_unknown({"reserved_cpus", "docker_root", "containerd_state", "crio_state", "podman_store",
                    "libvirt_state", "kubelet_root"});
  HostSection h;
  if (auto v = s.cpu_list("reserved_cpus", &h.reserved_cpus_pos)) h.reserved_cpus = *v;
  for (const char* key :
       {"docker_root", "containerd_state", "crio_state", "podman_store", "libvirt_state", "kubelet_root"}) {
    Pos at;
    if (auto v = s.string(key, &at)) h.state_roots.push_back({key, *v, at});
  }
  return h;
}

Actuators read_actuators(Section& s) {
  s.reject_unknown({"cpuset", "cpu_weight", "resctrl", "steal_task", "irq_affinity", "weight_mapping",
                    "irq_names", "preempt_class", "starvation_limit", "isolate_unmanaged",
                    "isolate_root_tasks"});
  Actuators a;
  a.pos = s.pos();
  if (auto v = s.word<WeightMapping>("weight_mapping",
                                     {{"systemd", WeightMapping::systemd}, {"runc", WeightMapping::runc}}))
    a.weight_mapping = *v;
  if (auto v = s.word<PreemptMode>(
          "preempt_class",
          {{"always", PreemptMode::always}, {"reactive", PreemptMode::reactive}, {"off", PreemptMode::off}}))
    a.preempt_class = *v;
  if (auto v = s.duration("starvation_limit", "5s", &a.starvation_limit_pos)) a.starvation_limit = *v;
  if (auto v = s.strings("irq_names", &a.irq_names_pos)) {
    a.irq_names = *v;
    a.irq_names_read = true;
  }
  if (auto v = s.boolean("cpuset")) a.cpuset = *v;
  if (auto v = s.boolean("cpu_weight")) a.cpu_weight = *v;
  if (auto v = s.boolean("resctrl")) a.resctrl = *v;
  if (auto v = s.boolean("steal_task")) a.steal_task = *v;
  if (auto v = s.boolean("irq_affinity")) a.irq_affinity = *v;
  if (auto v = s.boolean("isolate_unmanaged", &a.isolate_unmanaged_pos)) a.isolate_unmanaged = *v;
  if (auto v = s.boolean("isolate_root_tasks", &a.isolate_root_tasks_pos)) a.isolate_root_tasks = *v;
  return a;
}

// Every selector the file wrote is read; how many there may be is the validator's business.
// selector_pos is the first selector value that is a string (line 0: none is).
void read_selector(const Section& s, std::string_view key, Match& m) {
  m.selector_keys.emplace_back(key);
  Pos at;
  auto value = s.string(key, &at);
  if (!value) return;
  if (m.selector_pos.line == 0) m.selector_pos = at;
  if (key == "cgroup") m.cgroup = *value;
  if (key == "systemd_unit") m.systemd_unit = *value;
  if (key == "docker") m.docker = *value;
  if (key == "pod") m.pod = *value;
  if (key == "podman") m.podman = *value;
  if (key == "vm") m.vm = *value;
  if (key == "pid_file") m.pid_file = *value;
}

Match read_match(Section& s) {
  s.reject_unknown({"cgroup", "systemd_unit", "docker", "pod", "podman", "vm", "pid_file", "container",
                    "has_tasks", "each"});
  Match m;
  m.pos = s.pos();
  for (auto key : kSelectors)
    if (s.has(key)) read_selector(s, key, m);
  if (auto v = s.string("container", &m.container_pos)) m.container = *v;
  if (auto v = s.boolean("has_tasks")) m.has_tasks = *v;
  if (auto v = s.boolean("each")) m.each = *v;
  return m;
}

Slo read_slo(Section& s) {
  s.reject_unknown({"runqueue_p99", "migrations_per_s", "mpki"});
  Slo slo;
  slo.pos = s.pos();
  slo.runqueue_p99 = s.duration("runqueue_p99", "200us", &slo.runqueue_p99_pos);
  slo.migrations_per_s = s.number("migrations_per_s", &slo.migrations_per_s_pos);
  slo.mpki = s.number("mpki", &slo.mpki_pos);
  return slo;
}

Bounds read_bounds(Section& s) {
  s.reject_unknown({"cpus", "cpu_pool", "numa", "vcpu_pinning", "shares", "l3_ways", "mba_percent"});
  Bounds b;
  b.pos = s.pos();
  b.cpus = s.range("cpus");
  b.cpu_pool = s.cpu_list("cpu_pool", &b.cpu_pool_pos);
  if (auto v =
          s.word<NumaPolicy>("numa", {{"any", NumaPolicy::any}, {"single", NumaPolicy::single}}, &b.numa_pos))
    b.numa = *v;
  if (auto v = s.word<VcpuPinning>("vcpu_pinning",
                                   {{"none", VcpuPinning::none}, {"one_per_core", VcpuPinning::one_per_core}},
                                   &b.vcpu_pinning_pos))
    b.vcpu_pinning = *v;
  b.shares = s.range("shares");
  b.l3_ways = s.range("l3_ways");
  b.mba_percent = s.range("mba_percent");
  return b;
}

Workload read_workload(const toml::table& t, Pos pos, size_t index, Report& report) {
  auto* name_node = t.get_as<std::string>("name");
  Section s(t, pos, workload_label(name_node ? name_node->get() : "", index), "", "[[workload]]", report);
  s.reject_unknown({"name", "match", "class", "slo", "bounds"});
  Workload w;
  w.pos = pos;
  Pos name_at;
  if (auto v = s.string("name", &name_at)) {
    w.name = *v;
    w.name_pos = name_at;
  }
  if (auto m = s.table("match")) w.match = read_match(*m);
  if (auto v = s.word<WorkloadClass>(
          "class", {{"critical", WorkloadClass::critical}, {"best-effort", WorkloadClass::best_effort}}))
    w.klass = *v;
  if (auto slo = s.table("slo")) w.slo = read_slo(*slo);
  if (auto bounds = s.table("bounds")) w.bounds = read_bounds(*bounds);
  for (auto key : {"name", "match"})
    if (!s.has(key)) s.missing(key);
  return w;
}

std::vector<Workload> read_workloads(const toml::node& n, Pos fallback, Report& report) {
  std::vector<Workload> out;
  auto* array = n.as_array();
  if (!array) {
    report.error(pos_of(n.source(), fallback),
                 "workload must be an array of tables (write [[workload]]), got " + type_name(n));
    return out;
  }
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    Pos pos = pos_of(element.source(), fallback);
    if (auto* t = element.as_table())
      out.push_back(read_workload(*t, pos, i, report));
    else
      report.error(pos, "workload #" + std::to_string(i + 1) + " must be a table, got " + type_name(element));
  }
  return out;
}

}  // namespace

// ---- Before toml++: the bounds on what it reads ----

namespace {

// Walks TOML text as far as nesting and keys go: strings and comments are skipped whole, and a '.'
// counts as a key's separator only where a key is (a table header, the start of a line, after '{'
// or ',' in an inline table), never in a value (1.5, a date).
class Prescan {
 public:
  explicit Prescan(std::string_view text) : s_(text) {}

  std::optional<std::pair<Pos, std::string>> run() {
    if (s_.size() > kMaxConfigBytes)
      return std::pair{Pos{1, 1}, "the file is " + std::to_string(s_.size()) +
                                      " bytes; a config is at most " + std::to_string(kMaxConfigBytes) +
                                      " (1 MiB)"};
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') step();
      } else if (c == '"' || c == '\'') {
        string(c);
      } else if (auto bad = punct(c)) {
        return bad;
      }
    }
    return std::nullopt;
  }

 private:
  // Open frames: an array, an inline table, a table header ([a]) or an array-of-tables header ([[a]]).
  enum Frame : char { array = 'A', table = 'T', header = 'H', header2 = 'D' };

  bool in_key() const {
    return expect_key_ || (!stack_.empty() && (stack_.back() == header || stack_.back() == header2));
  }

  std::optional<std::pair<Pos, std::string>> punct(char c) {
    const Pos at{line_, col_};
    switch (c) {
      case '\n':
        if (stack_.empty()) start_key();
        break;
      case '.':
        if (in_key() && ++dots_ >= kMaxKeyParts)
          return std::pair{at, "a dotted key of more than " + std::to_string(kMaxKeyParts) + " parts"};
        break;
      case '=':
        expect_key_ = false;
        dots_ = 0;
        break;
      case ',':
        if (!stack_.empty() && stack_.back() == table) start_key();
        dots_ = 0;
        break;
      case '{':
      case '[':
        if (c == '[' && stack_.empty() && expect_key_) {
          const bool twice = i_ + 1 < s_.size() && s_[i_ + 1] == '[';
          if (twice) step();
          stack_.push_back(twice ? header2 : header);
          dots_ = 0;
          break;
        }
        if (++nesting_ > kMaxNesting)
          return std::pair{
              at, "arrays and inline tables nested more than " + std::to_string(kMaxNesting) + " deep"};
        stack_.push_back(c == '{' ? table : array);
        if (c == '{') start_key();
        dots_ = 0;
        break;
      case ']':
      case '}':
        if (!stack_.empty()) {
          const char f = stack_.back();
          stack_.pop_back();
          if (f == header2 && i_ + 1 < s_.size() && s_[i_ + 1] == ']') step();
          if (f == array || f == table) --nesting_;
        }
        expect_key_ = false;
        dots_ = 0;
        break;
      default:
        break;
    }
    step();
    return std::nullopt;
  }

  void start_key() {
    expect_key_ = true;
    dots_ = 0;
  }

  // A string from its opening quote: 'literal', "basic" (with backslash escapes), or their tripled
  // multi-line forms, which may end with up to two more quotes.
  void string(char q) {
    const bool multi = i_ + 2 < s_.size() && s_[i_ + 1] == q && s_[i_ + 2] == q;
    for (int k = 0; k < (multi ? 3 : 1); ++k) step();
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\\' && q == '"') {
        step();
        if (i_ < s_.size()) step();
        continue;
      }
      if (c == '\n' && !multi) return;  // unterminated: toml++ says so
      if (c == q && (!multi || (i_ + 2 < s_.size() && s_[i_ + 1] == q && s_[i_ + 2] == q))) {
        for (int k = 0; k < (multi ? 3 : 1); ++k) step();
        for (int k = 0; multi && k < 2 && i_ < s_.size() && s_[i_] == q; ++k) step();
        return;
      }
      step();
    }
  }

  // One byte on; columns count characters (UTF-8 sequences), as toml++'s do.
  void step() {
    const auto b = static_cast<unsigned char>(s_[i_++]);
    if (b == '\n') {
      ++line_;
      col_ = 1;
    } else if ((b & 0xC0) != 0x80) {
      ++col_;
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
  std::string stack_;   // open frames, innermost last
  size_t nesting_ = 0;  // arrays and inline tables open
  size_t dots_ = 0;     // separators in the key being read
  bool expect_key_ = true;
};

}  // namespace

std::optional<std::pair<Pos, std::string>> prescan(std::string_view text) { return Prescan(text).run(); }

Config read_config(const toml::table& root, Report& report) {
  Section top(root, {1, 1}, "", "", "", report);
  top.reject_unknown({"daemon", "host", "workload", "actuators"});
  Config c;
  auto section = [&](std::string_view key) -> std::optional<Section> {
    auto* t = root.get_as<toml::table>(key);
    if (t) return top_section(*t, key, report);
    if (root.contains(key)) top.table(key);  // reports the wrong type
    return std::nullopt;
  };
  if (auto s = section("daemon")) c.daemon = read_daemon(*s);
  if (auto s = section("host")) c.host = read_host(*s);
  if (auto* w = root.get("workload")) c.workloads = read_workloads(*w, {1, 1}, report);
  if (auto s = section("actuators")) c.actuators = read_actuators(*s);
  return c;
}

}  // namespace keel::config::detail
