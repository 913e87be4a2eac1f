#include "actuators/sched_features.h"

#include <array>

#include "host/fileio.h"
#include "host/knob_values.h"

namespace keel::act {

namespace fs = std::filesystem;

namespace {

// Newest layout first: 5.13 moved sched_features into the sched/ directory.
constexpr std::array<std::string_view, 2> kFeatureFiles = {"sched/features", "sched_features"};

bool valid_name(std::string_view name) {
  if (name.empty() || name.starts_with("NO_")) return false;
  for (char c : name)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

bool empty_or_missing_dir(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return true;
  return fs::directory_iterator(p, ec) == fs::directory_iterator() && !ec;
}

}  // namespace

Result<FeatureProbe> probe_sched_feature(const SysRoots& roots, std::string_view name) {
  if (!valid_name(name))
    return fail(quoted(name) + " is not a sched feature name (upper case, digits, '_', no NO_ prefix)");
  FeatureProbe p;
  for (std::string_view rel : kFeatureFiles) {
    KnobPath k{Root::debugfs, fs::path(rel)};
    auto text = read_file(k.abs(roots));
    if (!text) {
      if (text.error().err == ENOENT || text.error().err == ENOTDIR) continue;
      return std::unexpected(Error{text.error().err, text.error().path, "cannot read the sched features"});
    }
    p.file = k;
    if (auto on = sched_feature_state(*text, name)) {
      p.state = *on ? FeatureState::on : FeatureState::off;
    } else {
      p.why = "the kernel has no " + std::string(name) + " sched feature (not listed in " +
              k.abs(roots).string() + ")";
    }
    return p;
  }
  if (empty_or_missing_dir(roots.debugfs))
    p.why = "debugfs is not mounted at " + roots.debugfs.string() + " (mount -t debugfs none " +
            roots.debugfs.string() + ")";
  else
    p.why =
        "no sched features file under " + roots.debugfs.string() + " (kernel without CONFIG_SCHED_DEBUG?)";
  return p;
}

Result<FeatureChange> set_sched_feature(KnobWriter& w, std::string_view name, bool on) {
  auto p = probe_sched_feature(w.roots(), name);
  if (!p) return std::unexpected(p.error());
  if (p->state == FeatureState::unsupported) return FeatureChange::unsupported;
  if ((p->state == FeatureState::on) == on) return FeatureChange::unchanged;
  std::string token = on ? std::string(name) : "NO_" + std::string(name);
  std::string original = on ? "NO_" + std::string(name) : std::string(name);
  if (auto r = w.write_journaled(
          p->file, token,
          JournalEntry{EntryKind::sched_feature, p->file, original, ValueKind::sched_feature, 0});
      !r)
    return std::unexpected(r.error());
  return FeatureChange::changed;
}

}  // namespace keel::act
