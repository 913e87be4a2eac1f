// /proc/PID/mountinfo (host/cgroup.h parse_mountinfo, v1_mount_controllers; host/resctrl_info.h
// resctrl_mount_has_option). What parses must come back the same from a line the kernel would print
// for it (fields octal-escaped as the kernel's mangle does), a v1 mount's controllers are its super
// options less the mount flags, and the second mountinfo reader (resctrl's, for mba_MBps) must agree
// with the first on every text the first accepts in the kernel's spacing.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz/check.h"
#include "host/cgroup.h"
#include "host/resctrl_info.h"

namespace {

using namespace keel;

// The kernel's mangle(): space, tab, newline and backslash as \ooo.
std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      const auto u = static_cast<unsigned char>(c);
      out += '\\';
      out += static_cast<char>('0' + (u >> 6));
      out += static_cast<char>('0' + (u >> 3 & 7));
      out += static_cast<char>('0' + (u & 7));
    } else {
      out += c;
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

bool has(std::string_view list, std::string_view opt) {
  for (auto o : split(list, ','))
    if (o == opt) return true;
  return false;
}

// resctrl_mount_has_option against what parse_mountinfo made of the same text. Only for the kernel's
// spacing (single spaces, no tabs or carriage returns), where the two readers must see the same fields.
void check_resctrl_reader(std::string_view text, const std::vector<MountInfo>& mounts) {
  if (text.find_first_of("\t\r") != std::string_view::npos || text.find("  ") != std::string_view::npos)
    return;
  std::vector<std::string_view> mount_opts, raw_types;  // field 6 and the raw fs type, per mount
  for (auto line : split(text, '\n')) {
    if (line.empty()) continue;
    if (line.front() == ' ' || line.back() == ' ') return;
    auto f = split(line, ' ');
    auto dash = std::find(f.begin() + 6, f.end(), "-");
    mount_opts.push_back(f[5]);
    raw_types.push_back(dash[1]);
  }
  FUZZ_CHECK(mount_opts.size() == mounts.size());
  std::vector<std::string> points = {"/sys/fs/resctrl", "/sys/fs/resctrl/"};
  std::vector<std::string> opts = {"mba_MBps", "rw"};
  for (const auto& m : mounts) {
    points.push_back(m.mount_point);
    // An empty option (",," or a trailing comma) is no option: never asked for, never found.
    if (!m.super_options.empty() && !m.super_options.front().empty()) opts.push_back(m.super_options.front());
  }
  for (const auto& point : points) {
    std::string want = std::filesystem::path(point).lexically_normal().string();
    while (want.size() > 1 && want.back() == '/') want.pop_back();
    for (const auto& opt : opts) {
      bool found = false;
      for (size_t i = 0; i < mounts.size(); ++i)
        if (raw_types[i] == "resctrl" && mounts[i].mount_point == want)
          found = has(mount_opts[i], opt) ||
                  std::ranges::find(mounts[i].super_options, opt) != mounts[i].super_options.end();
      FUZZ_CHECK(resctrl_mount_has_option(text, point, opt) == found);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = keel::fuzz::as_text(data, size);
  resctrl_mount_has_option(text, "/sys/fs/resctrl", "mba_MBps");  // any text: no crash
  auto mounts = parse_mountinfo(text);
  if (!mounts) {
    FUZZ_CHECK(mounts.error().what.starts_with("line "));
    return 0;
  }
  for (const MountInfo& m : *mounts) {
    FUZZ_CHECK(!m.super_options.empty());
    const std::string line = "36 25 0:31 " + escape(m.root) + " " + escape(m.mount_point) +
                             " rw,relatime shared:9 - " + escape(m.fs_type) + " src " + join(m.super_options);
    auto again = parse_mountinfo_line(line);
    FUZZ_CHECK(again);
    FUZZ_CHECK(again->root == m.root && again->mount_point == m.mount_point && again->fs_type == m.fs_type &&
               again->super_options == m.super_options);
    // A lone field unescapes to itself once escaped.
    FUZZ_CHECK(unescape_mount_field(escape(m.mount_point)) == m.mount_point);
    auto controllers = v1_mount_controllers(m);
    for (const auto& c : controllers) {
      FUZZ_CHECK(!c.empty() && c != "rw" && c != "noprefix" && !c.starts_with("release_agent="));
      FUZZ_CHECK(std::ranges::find(m.super_options, c) != m.super_options.end());
    }
  }
  check_resctrl_reader(text, *mounts);
  return 0;
}
