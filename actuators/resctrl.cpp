#include "actuators/resctrl.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <map>
#include <set>

#include "host/fileio.h"

namespace keel::act {

namespace fs = std::filesystem;

namespace {

using Masks = std::vector<std::pair<unsigned, unsigned long long>>;  // domain id, value

bool is_cache_mask(std::string_view r) {
  return r == "L3" || r == "L2" || r == "L3CODE" || r == "L3DATA" || r == "L2CODE" || r == "L2DATA";
}

std::vector<std::string> l3_resources(const ResctrlInfo& info) {
  if (!info.l3) return {};
  return info.cdp ? std::vector<std::string>{"L3CODE", "L3DATA"} : std::vector<std::string>{"L3"};
}

std::string hex(unsigned long long v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, 16);
  return std::string(buf, end);
}

const SchemataLine* find_line(const std::vector<SchemataLine>& lines, std::string_view r) {
  for (const auto& l : lines)
    if (l.resource == r) return &l;
  return nullptr;
}

Result<Masks> line_values(const SchemataLine& l) {
  Masks out;
  for (const auto& [id, text] : l.domains) {
    auto v = schemata_value(l.resource, text);
    if (!v) return std::unexpected(v.error());
    out.emplace_back(id, *v);
  }
  return out;
}

// The n lowest (or highest) set bits of `mask`; fewer when it has fewer.
unsigned long long lowest_bits(unsigned long long mask, unsigned n) {
  unsigned long long out = 0;
  for (int b = 0; b < 64 && n > 0; ++b)
    if (mask & (1ULL << b)) out |= 1ULL << b, --n;
  return out;
}
unsigned long long highest_bits(unsigned long long mask, unsigned n) {
  unsigned long long out = 0;
  for (int b = 63; b >= 0 && n > 0; --b)
    if (mask & (1ULL << b)) out |= 1ULL << b, --n;
  return out;
}
unsigned ways(unsigned long long mask) { return static_cast<unsigned>(std::popcount(mask)); }

constexpr size_t kNameMax = 255;  // NAME_MAX: a directory name's bytes

bool valid_group_name(std::string_view n) {
  return !n.empty() && n != "." && n != ".." && n != "info" && n != "mon_groups" && n != "mon_data" &&
         n.find_first_of("/\n") == std::string_view::npos;
}

KnobPath in_group(const std::string& group, const char* file) {
  return {Root::resctrl, group.empty() ? fs::path(file) : fs::path(group) / file};
}

// flock on the resctrl root, as the kernel documentation asks of every tool doing read-modify-write.
class RootLock {
 public:
  static Result<RootLock> take(const fs::path& root, bool exclusive) {
    RootLock l;
    l.fd_ = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l.fd_ < 0) return fail_errno("cannot open the resctrl root to lock it", root.string());
    int rc;
    do rc = ::flock(l.fd_, exclusive ? LOCK_EX : LOCK_SH);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) return fail_errno("cannot flock the resctrl root", root.string());
    return l;
  }
  RootLock(RootLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  RootLock& operator=(RootLock&&) = delete;
  ~RootLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  RootLock() = default;
  int fd_ = -1;
};

// A group's schemata as read: the text (what the journal keeps) and its lines. `missing`: the group
// does not exist (observe mode, a group not made).
struct Schemata {
  bool missing = false;
  std::string raw;
  std::vector<SchemataLine> lines;
};

Result<Schemata> read_schemata(const SysRoots& roots, Mode mode, const std::string& group) {
  fs::path p = in_group(group, "schemata").abs(roots);
  auto text = read_file(p);
  if (!text) {
    if (text.error().err == ENOENT && mode == Mode::observe && !group.empty()) return Schemata{true, {}, {}};
    return std::unexpected(text.error());
  }
  auto lines = parse_schemata(*text);
  if (!lines) return fail(lines.error().what, p.string());
  return Schemata{false, std::move(*text), std::move(*lines)};
}

// One schemata line keel wants. `tolerance`: MB percentages pass through a hardware fraction on
// MPAM and may read back one off; a difference that small is no reason to write.
struct Want {
  std::string resource;
  Masks values;
  unsigned long long tolerance = 0;
};

std::string format_line(const Want& w) { return format_schemata_line(w.resource, w.values); }

bool in_place(const Schemata& cur, const Want& w) {
  const SchemataLine* line = find_line(cur.lines, w.resource);
  if (line == nullptr) return false;
  auto have = line_values(*line);
  if (!have) return false;
  for (const auto& [id, v] : w.values) {
    auto it = std::find_if(have->begin(), have->end(), [&](const auto& d) { return d.first == id; });
    if (it == have->end()) return false;
    unsigned long long diff = it->second > v ? it->second - v : v - it->second;
    if (diff > w.tolerance) return false;
  }
  return true;
}

Want same_everywhere(const std::string& resource, const SchemataLine& like, unsigned long long v,
                     unsigned long long tolerance = 0) {
  Want w{resource, {}, tolerance};
  for (const auto& d : like.domains) w.values.emplace_back(d.first, v);
  return w;
}

// Where every keel group's ways go, per L3 resource line and domain: exclusive groups stack from the
// low end of the default group's original mask (in the order first applied); the default group keeps
// the rest; groups sharing ways take the highest of those; groups without l3_ways share all of them.
struct Layout {
  std::vector<Want> default_l3;
  std::map<std::string, std::vector<Want>> group_l3;
};

using Base = std::vector<std::pair<std::string, Masks>>;

Result<Layout> layout(const ResctrlInfo& info, unsigned default_min, const Base& base,
                      const std::vector<ResctrlGroupSpec>& groups) {
  Layout lay;
  for (const auto& [res, masks] : base) {
    Want def{res, {}, 0};
    std::map<std::string, Want> per_group;
    for (const auto& g : groups) per_group[g.name] = Want{res, {}, 0};
    for (const auto& [dom, original] : masks) {
      std::string where = res + " domain " + std::to_string(dom);
      unsigned long long left = original;
      for (const auto& g : groups) {
        if (!g.exclusive || !g.l3_ways) continue;
        unsigned avail = ways(left) > default_min ? ways(left) - default_min : 0;
        if (*g.l3_ways > avail)
          return fail("resctrl group '" + g.name + "' wants " + std::to_string(*g.l3_ways) +
                      " exclusive ways of " + where + " but only " + std::to_string(avail) +
                      " can be taken: the default group keeps at least " + std::to_string(default_min) +
                      " of its " + std::to_string(ways(original)) + " (mask " + hex(original) +
                      "), the rest is already exclusive");
        unsigned long long m = lowest_bits(left, *g.l3_ways);
        left &= ~m;
        per_group[g.name].values.emplace_back(dom, m);
      }
      for (const auto& g : groups) {
        if (g.exclusive && g.l3_ways) continue;
        unsigned n = g.l3_ways.value_or(ways(left));
        if (n > ways(left))
          return fail("resctrl group '" + g.name + "' wants " + std::to_string(n) + " ways of " + where +
                      " but only " + std::to_string(ways(left)) + " are not exclusive (mask " + hex(left) +
                      ")");
        per_group[g.name].values.emplace_back(dom, highest_bits(left, n));
      }
      def.values.emplace_back(dom, left);
      // Every mask keel would write must be one the kernel takes (the default group's only if changed).
      if (left != original)
        if (auto r = validate_cbm(info, left); !r)
          return fail("the default group's " + where + ": " + r.error().what);
      for (const auto& g : groups)
        if (auto r = validate_cbm(info, per_group[g.name].values.back().second); !r)
          return fail("resctrl group '" + g.name + "' " + where + ": " + r.error().what);
    }
    lay.default_l3.push_back(std::move(def));
    for (auto& [name, w] : per_group) lay.group_l3[name].push_back(std::move(w));
  }
  return lay;
}

Result<void> validate_spec(const ResctrlInfo& info, const ResctrlGroupSpec& s) {
  auto bad = [&](const std::string& why) { return fail("resctrl group '" + s.name + "': " + why); };
  if (!valid_group_name(s.name)) return bad("not a usable group directory name");
  if (s.exclusive && !s.l3_ways) return bad("exclusive needs l3_ways");
  if (s.l3_ways) {
    if (!info.l3) return bad("this host has no L3 allocation (no info/L3 or info/L3CODE)");
    unsigned min = std::max(info.min_cbm_bits, 1u);
    if (*s.l3_ways < min || *s.l3_ways > info.l3_ways)
      return bad("l3_ways " + std::to_string(*s.l3_ways) + " is outside [" + std::to_string(min) + ", " +
                 std::to_string(info.l3_ways) + "] (min_cbm_bits, ways in cbm_mask " + hex(info.cbm_mask) +
                 ")");
  }
  if (s.mb_percent && s.mb_mbps) return bad("give mb_percent or mb_mbps, not both");
  if ((s.mb_percent || s.mb_mbps) && !info.mb)
    return bad("this host has no memory bandwidth allocation (info/MB)");
  if (s.mb_percent) {
    if (info.mba_mbps) return bad("resctrl is mounted with mba_MBps: MB takes MiB/s (mb_mbps), not percent");
    if (auto r = round_mb(info, *s.mb_percent); !r) return bad(r.error().what);
  }
  if (s.mb_mbps) {
    if (!info.mba_mbps) return bad("mb_mbps needs resctrl mounted with -o mba_MBps");
    if (*s.mb_mbps == 0) return bad("mb_mbps 0 would stop the group");
  }
  if (s.mb_min && *s.mb_min > 100) return bad("mb_min " + std::to_string(*s.mb_min) + " is not a percentage");
  if (s.mb_hdl && *s.mb_hdl > 1) return bad("mb_hdl is 0 or 1");
  if (s.mb_pri && *s.mb_pri > 7) return bad("mb_pri is 0-7");
  if (s.l3_pri && *s.l3_pri > 7) return bad("l3_pri is 0-7");
  return {};
}

// The MB and MPAM lines `s` asks for, over the domains of the default group's lines.
Result<std::vector<Want>> other_lines(const ResctrlInfo& info, const ResctrlGroupSpec& s,
                                      const std::vector<SchemataLine>& def,
                                      std::vector<std::string>& unsupported) {
  std::vector<Want> out;
  if (s.mb_percent || s.mb_mbps) {
    const SchemataLine* mb = find_line(def, "MB");
    if (mb == nullptr) return fail("resctrl group '" + s.name + "': the schemata has no MB line");
    if (s.mb_percent) {
      // AMD prints MB in its own bandwidth units (default 2048), not percent.
      auto cur = line_values(*mb);
      if (cur && std::any_of(cur->begin(), cur->end(), [](const auto& d) { return d.second > 100; }))
        return fail("resctrl group '" + s.name +
                    "': MB values here are not percentages (the default group's MB line is '" + mb->resource +
                    ":" + mb->domains.front().second + "...')");
      out.push_back(same_everywhere("MB", *mb, *round_mb(info, *s.mb_percent), 1));
    } else {
      out.push_back(same_everywhere("MB", *mb, *s.mb_mbps));
    }
  }
  const std::pair<const std::optional<unsigned>*, const char*> mpam[] = {
      {&s.mb_min, "MBMIN"}, {&s.mb_hdl, "MBHDL"}, {&s.mb_pri, "MBPRI"}, {&s.l3_pri, "L3PRI"}};
  for (const auto& [value, name] : mpam) {
    if (!*value) continue;
    const SchemataLine* line = find_line(def, name);
    if (line == nullptr) {
      unsupported.emplace_back(name);
      continue;
    }
    out.push_back(same_everywhere(name, *line, **value, std::string_view(name) == "MBMIN" ? 1 : 0));
  }
  return out;
}

// One group's pending schemata write, and the L3 ways it gains and gives up.
struct Plan {
  std::string group;  // "" = the default group
  Schemata cur;
  std::string text;
  std::map<std::pair<std::string, unsigned>, std::pair<unsigned long long, unsigned long long>> gain_lose;
};

// keel's groups, `with` put in (in place, or last when new); a group removed behind keel's back no
// longer holds ways (in observe mode none was ever made, so all count).
std::vector<ResctrlGroupSpec> live_groups(const KnobWriter& w, const std::vector<ResctrlGroupSpec>& groups,
                                          const ResctrlGroupSpec* with) {
  std::vector<ResctrlGroupSpec> out;
  bool placed = false;
  std::error_code ec;
  for (const auto& g : groups) {
    if (with && g.name == with->name) {
      out.push_back(*with);
      placed = true;
    } else if (w.mode() == Mode::observe || fs::is_directory(w.roots().resctrl / g.name, ec)) {
      out.push_back(g);
    }
  }
  if (with && !placed) out.push_back(*with);
  return out;
}

// Writes what differs in the default group's and every keel group's schemata (plus `extra` lines for
// `target`), one write per group. True when something was written (observe: would be).
Result<bool> write_layout(KnobWriter& w, const ResctrlInfo& info, const Schemata& def, Layout& lay,
                          const std::vector<ResctrlGroupSpec>& groups, const std::string& target,
                          const std::vector<Want>& extra) {
  // Every group's lines, the default group first: it shrinks before a group takes its ways.
  std::vector<std::pair<std::string, std::vector<Want>>> wanted{{"", lay.default_l3}};
  for (const auto& g : groups) {
    wanted.emplace_back(g.name, lay.group_l3[g.name]);
    if (g.name == target) wanted.back().second.insert(wanted.back().second.end(), extra.begin(), extra.end());
  }
  std::vector<Plan> plans;
  for (auto& [group, wants] : wanted) {
    Plan p{group, {}, {}, {}};
    if (group.empty()) {
      p.cur = def;
    } else {
      auto cur = read_schemata(w.roots(), w.mode(), group);
      if (!cur) return std::unexpected(cur.error());
      p.cur = std::move(*cur);
    }
    for (const auto& want : wants) {
      if (!p.cur.missing && in_place(p.cur, want)) continue;
      p.text += format_line(want) + "\n";  // the kernel wants each line ended
      if (!is_cache_mask(want.resource)) continue;
      const SchemataLine* line = find_line(p.cur.lines, want.resource);
      auto have = line ? line_values(*line) : Result<Masks>(fail("missing"));
      for (const auto& [id, v] : want.values) {
        unsigned long long c = info.cbm_mask;  // a group not made yet: the kernel starts it wide
        if (have)
          for (const auto& d : *have)
            if (d.first == id) c = d.second;
        p.gain_lose[{want.resource, id}] = {v & ~c, c & ~v};
      }
    }
    if (!p.text.empty()) plans.push_back(std::move(p));
  }

  // Write in an order where no group gains ways another still has to give up (default first when
  // exclusive ways are taken, last when they come back); a cycle falls back to the list order.
  bool changed = false;
  while (!plans.empty()) {
    size_t pick = 0;
    for (size_t i = 0; i < plans.size(); ++i) {
      bool clear = true;
      for (const auto& [key, gl] : plans[i].gain_lose)
        for (size_t j = 0; j < plans.size() && clear; ++j)
          if (j != i)
            if (auto it = plans[j].gain_lose.find(key);
                it != plans[j].gain_lose.end() && (gl.first & it->second.second))
              clear = false;
      if (clear) {
        pick = i;
        break;
      }
    }
    Plan p = std::move(plans[pick]);
    plans.erase(plans.begin() + static_cast<std::ptrdiff_t>(pick));
    KnobPath k = in_group(p.group, "schemata");
    std::string original = p.cur.raw;
    if (!original.empty() && original.back() != '\n') original += '\n';  // restore writes it back as is
    if (auto r = w.write_journaled(k, p.text, JournalEntry{EntryKind::file, k, original}); !r)
      return std::unexpected(r.error());
    changed = true;
  }
  return changed;
}

}  // namespace

Result<std::vector<SchemataLine>> parse_schemata(std::string_view text) {
  std::vector<SchemataLine> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return fail("schemata line without 'RESOURCE:': '" + std::string(line) + "'");
    SchemataLine l{std::string(trim(line.substr(0, colon))), {}};
    std::string_view rest = line.substr(colon + 1);
    while (!rest.empty()) {
      size_t semi = rest.find(';');
      std::string_view dom = trim(rest.substr(0, semi));
      rest.remove_prefix(semi == std::string_view::npos ? rest.size() : semi + 1);
      if (dom.empty()) continue;
      size_t eq = dom.find('=');
      unsigned id = 0;
      auto idtext = trim(dom.substr(0, eq == std::string_view::npos ? 0 : eq));
      auto [end, ec] = std::from_chars(idtext.data(), idtext.data() + idtext.size(), id);
      if (eq == std::string_view::npos || idtext.empty() || ec != std::errc() ||
          end != idtext.data() + idtext.size())
        return fail("schemata domain is not ID=VALUE: '" + std::string(dom) + "' in '" + std::string(line) +
                    "'");
      l.domains.emplace_back(id, std::string(trim(dom.substr(eq + 1))));
    }
    out.push_back(std::move(l));
  }
  return out;
}

Result<unsigned long long> schemata_value(std::string_view resource, std::string_view text) {
  int base = is_cache_mask(resource) ? 16 : 10;
  unsigned long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return fail(std::string(resource) + " value '" + std::string(text) + "' is not a " +
                (base == 16 ? "hex mask" : "number"));
  return v;
}

std::string format_schemata_line(std::string_view resource, const Masks& values) {
  std::string s = std::string(resource) + ":";
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& [id, v] = values[i];
    if (i > 0) s += ';';
    s += std::to_string(id);
    s += '=';
    s += is_cache_mask(resource) ? hex(v) : std::to_string(v);
  }
  return s;
}

Result<void> validate_cbm(const ResctrlInfo& info, unsigned long long mask) {
  if (mask == 0) return fail("an empty cache mask");
  if (mask & ~info.cbm_mask)
    return fail("mask " + hex(mask) + " has ways outside cbm_mask " + hex(info.cbm_mask));
  unsigned long long shifted = mask >> std::countr_zero(mask);
  if (!info.sparse_masks && (shifted & (shifted + 1)) != 0)
    return fail("mask " + hex(mask) + " is not contiguous (sparse_masks is 0)");
  if (ways(mask) < info.min_cbm_bits)
    return fail("mask " + hex(mask) + " has fewer than min_cbm_bits " + std::to_string(info.min_cbm_bits) +
                " ways");
  return {};
}

Result<unsigned> round_mb(const ResctrlInfo& info, unsigned percent) {
  if (percent == 0 || percent > 100)
    return fail("MB percent " + std::to_string(percent) + " is outside [1, 100]");
  unsigned min = std::clamp(info.min_bandwidth, 1u, 100u), gran = std::max(info.bandwidth_gran, 1u);
  unsigned v = std::max(percent, min);
  v = min + (v - min + gran - 1) / gran * gran;
  return std::min(v, 100u);
}

Result<std::optional<Resctrl>> Resctrl::open(KnobWriter& w, unsigned default_min_ways) {
  const SysRoots& roots = w.roots();
  auto info = read_resctrl_info(roots.resctrl, roots.proc / "self/mountinfo");
  if (!info) return std::unexpected(info.error());
  if (!info->has_value()) return std::optional<Resctrl>{};
  Resctrl r(w, **info, std::max({(*info)->min_cbm_bits, default_min_ways, 1u}));
  auto def = read_schemata(roots, w.mode(), "");
  if (!def) return std::unexpected(def.error());
  for (const auto& res : l3_resources(r.info_)) {
    const SchemataLine* line = find_line(def->lines, res);
    if (line == nullptr)
      return fail("the default group's schemata has no " + res + " line",
                  (roots.resctrl / "schemata").string());
    auto masks = line_values(*line);
    if (!masks) return fail(masks.error().what, (roots.resctrl / "schemata").string());
    r.base_.emplace_back(res, std::move(*masks));
  }
  return std::optional<Resctrl>(std::move(r));
}

Result<ResctrlApplied> Resctrl::apply(const ResctrlGroupSpec& spec) {
  if (auto v = validate_spec(info_, spec); !v) return std::unexpected(v.error());
  const SysRoots& roots = w_->roots();
  auto lock = RootLock::take(roots.resctrl, w_->mode() == Mode::enforce);
  if (!lock) return std::unexpected(lock.error());
  auto def = read_schemata(roots, w_->mode(), "");
  if (!def) return std::unexpected(def.error());

  std::vector<ResctrlGroupSpec> groups = live_groups(*w_, groups_, &spec);
  auto lay = layout(info_, default_min_, base_, groups);
  if (!lay) return std::unexpected(lay.error());
  ResctrlApplied out;
  auto extra = other_lines(info_, spec, def->lines, out.unsupported);
  if (!extra) return std::unexpected(extra.error());

  KnobPath dir{Root::resctrl, spec.name};
  std::error_code ec;
  if (!fs::is_directory(dir.abs(roots), ec)) {
    // Each group holds a CLOSID; the default group holds one too.
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(roots.resctrl, ec))
      if (e.is_directory(ec) && fs::exists(e.path() / "schemata", ec))
        names.push_back(e.path().filename().string());
    if (info_.num_closids > 0 && names.size() + 1 >= info_.num_closids) {
      std::sort(names.begin(), names.end());
      std::string list;
      for (const auto& n : names) {
        if (!list.empty()) list += ", ";
        list += n;
      }
      return fail("no free CLOSID for resctrl group '" + spec.name + "': all " +
                      std::to_string(info_.num_closids) + " are in use (the default group and " + list + ")",
                  roots.resctrl.string());
    }
    auto made = w_->make_dir(dir);
    if (!made) return std::unexpected(made.error());
    out.created = *made;
  }
  groups_ = std::move(groups);
  auto changed = write_layout(*w_, info_, *def, *lay, groups_, spec.name, *extra);
  if (!changed) return std::unexpected(changed.error());
  out.changed = *changed;
  return out;
}

Result<TaskSync> Resctrl::sync_tasks(const std::string& group, const std::vector<int>& tids) {
  return sync_group_tasks(*w_, group, tids);
}

Result<bool> Resctrl::release(const std::string& group) {
  if (!valid_group_name(group))
    return fail("resctrl group '" + group + "': not a usable group directory name");
  const SysRoots& roots = w_->roots();
  auto lock = RootLock::take(roots.resctrl, w_->mode() == Mode::enforce);
  if (!lock) return std::unexpected(lock.error());
  auto removed = w_->remove_dir({Root::resctrl, group});
  if (!removed) return std::unexpected(removed.error());
  std::erase_if(groups_, [&](const ResctrlGroupSpec& g) { return g.name == group; });
  groups_ = live_groups(*w_, groups_, nullptr);
  // The remaining exclusive groups move down into the freed ways; the default group grows back.
  auto def = read_schemata(roots, w_->mode(), "");
  if (!def) return std::unexpected(def.error());
  auto lay = layout(info_, default_min_, base_, groups_);
  if (!lay) return std::unexpected(lay.error());
  auto changed = write_layout(*w_, info_, *def, *lay, groups_, "", {});
  if (!changed) return std::unexpected(changed.error());
  return *removed;
}

Result<TaskSync> sync_group_tasks(KnobWriter& w, const std::string& group, const std::vector<int>& tids) {
  if (!valid_group_name(group))
    return fail("resctrl group '" + group + "': not a usable group directory name");
  for (int t : tids)
    if (t <= 0) return fail("resctrl group '" + group + "': " + std::to_string(t) + " is not a thread id");
  KnobPath tasks = in_group(group, "tasks");
  std::set<int> have;
  auto text = read_file(tasks.abs(w.roots()));
  if (!text && !(text.error().err == ENOENT && w.mode() == Mode::observe))
    return std::unexpected(text.error());
  if (text) {
    std::string_view s = *text;
    while (!s.empty()) {
      size_t nl = s.find('\n');
      std::string_view line = trim(s.substr(0, nl));
      s.remove_prefix(nl == std::string_view::npos ? s.size() : nl + 1);
      int tid = 0;
      auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), tid);
      if (!line.empty() && ec == std::errc() && end == line.data() + line.size()) have.insert(tid);
    }
  }
  TaskSync out;
  std::set<int> want(tids.begin(), tids.end());
  for (int t : want) {
    if (have.count(t)) {
      out.already.push_back(t);
      continue;
    }
    auto r = w.append(tasks, std::to_string(t) + "\n");
    if (!r) return std::unexpected(r.error());
    (*r ? out.added : out.exited).push_back(t);
  }
  for (int t : have) {
    if (want.count(t)) continue;
    auto r = w.append({Root::resctrl, "tasks"}, std::to_string(t) + "\n");  // back to the default group
    if (!r) return std::unexpected(r.error());
    if (*r) out.removed.push_back(t);
  }
  return out;
}

std::string resctrl_group_name(std::string_view instance) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string name = "keel-";
  for (unsigned char c : instance) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
        c == '-') {
      name += static_cast<char>(c);
    } else if (c == '/') {
      name += '+';
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 0xf];
    }
  }
  if (name.size() <= kNameMax) return name;
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, fixed: the name must be the same in every run
  for (unsigned char c : instance) hash = (hash ^ c) * 1099511628211ull;
  size_t keep = kNameMax - 17;
  if (name[keep - 1] == '%')
    keep -= 1;  // never half an escape
  else if (name[keep - 2] == '%')
    keep -= 2;
  name.resize(keep);
  name += '~';
  for (int shift = 60; shift >= 0; shift -= 4) name += kHex[(hash >> shift) & 0xf];
  return name;
}

}  // namespace keel::act
