#include "host/resctrl_info.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <vector>

#include "host/fileio.h"

namespace keel {

namespace {

// info/ files are read without following a link or blocking: `--resctrl DIR` may name any tree.
Result<unsigned long long> read_hex(const std::filesystem::path& p) {
  auto line = read_line_nofollow(p);
  if (!line) return std::unexpected(line.error());
  unsigned long long v = 0;
  auto [end, ec] = std::from_chars(line->data(), line->data() + line->size(), v, 16);
  if (ec == std::errc::result_out_of_range)
    return fail("hex mask wider than 64 bits: '" + *line + "'", p.string());
  if (ec != std::errc() || end != line->data() + line->size() || line->empty())
    return fail("not a hex mask: '" + *line + "'", p.string());
  return v;
}

// A decimal number of at most `max`: a value the kernel cannot have is an error, never wrapped.
Result<unsigned> read_uint(const std::filesystem::path& p, unsigned max) {
  auto line = read_line_nofollow(p);
  if (!line) return std::unexpected(line.error());
  unsigned long long v = 0;
  auto [end, ec] = std::from_chars(line->data(), line->data() + line->size(), v);
  if (line->empty() || (ec != std::errc() && ec != std::errc::result_out_of_range) ||
      end != line->data() + line->size())
    return fail("not a number: '" + *line + "'", p.string());
  if (ec == std::errc::result_out_of_range || v > max)
    return fail("value " + *line + " is out of range (at most " + std::to_string(max) + ")", p.string());
  return static_cast<unsigned>(v);
}

// Ranges of what the kernel shows: cache masks are at most 64 bits wide (so min_cbm_bits <= 64),
// CLOSIDs (x86) and PARTIDs (MPAM, 16 bits) at most 65536, bandwidths are percent.
constexpr unsigned kMaxCbmBits = 64, kMaxClosids = 65536, kMaxPercent = 100;

Result<void> read_l3(const std::filesystem::path& dir, ResctrlInfo& info) {
  auto mask = read_hex(dir / "cbm_mask");
  if (!mask) return std::unexpected(mask.error());
  auto min_bits = read_uint(dir / "min_cbm_bits", kMaxCbmBits);
  if (!min_bits) return std::unexpected(min_bits.error());
  auto closids = read_uint(dir / "num_closids", kMaxClosids);
  if (!closids) return std::unexpected(closids.error());
  info.l3 = true;
  info.cbm_mask = *mask;
  info.l3_ways = static_cast<unsigned>(std::popcount(*mask));
  info.min_cbm_bits = *min_bits;
  info.num_closids = *closids;
  // Optional files: older kernels lack sparse_masks, some platforms shareable_bits.
  std::error_code ec;
  if (std::filesystem::exists(dir / "shareable_bits", ec)) {
    auto sb = read_hex(dir / "shareable_bits");
    if (!sb) return std::unexpected(sb.error());
    info.shareable_bits = *sb;
  }
  if (std::filesystem::exists(dir / "sparse_masks", ec)) {
    auto sm = read_uint(dir / "sparse_masks", 1);
    if (!sm) return std::unexpected(sm.error());
    info.sparse_masks = *sm != 0;
  }
  return {};
}

// mountinfo escapes space, tab, newline and backslash in paths as \ooo.
std::string unescape_octal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && s.size() - i >= 4) {
      int v = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out += static_cast<char>(v);
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

bool has_option(std::string_view opts, std::string_view opt) {
  while (!opts.empty()) {
    size_t comma = opts.find(',');
    if (opts.substr(0, comma) == opt) return true;
    if (comma == std::string_view::npos) break;
    opts.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool resctrl_mount_has_option(std::string_view mountinfo, const std::filesystem::path& mount_point,
                              std::string_view opt) {
  // "36 25 0:31 / /sys/fs/resctrl rw,relatime shared:9 - resctrl resctrl rw,mba_MBps"
  std::string want = mount_point.lexically_normal().string();
  while (want.size() > 1 && want.back() == '/') want.pop_back();
  bool found = false;
  while (!mountinfo.empty()) {
    size_t nl = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, nl);
    mountinfo.remove_prefix(nl == std::string_view::npos ? mountinfo.size() : nl + 1);
    std::vector<std::string_view> f;
    for (size_t at = 0; at < line.size();) {
      size_t sp = line.find(' ', at);
      if (sp == std::string_view::npos) sp = line.size();
      if (sp > at) f.push_back(line.substr(at, sp - at));
      at = sp + 1;
    }
    // Fields: id parent dev root mount-point options [optional...] - fstype source super-options
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 2 >= f.size() || f[dash + 1] != "resctrl" || unescape_octal(f[4]) != want) continue;
    found = has_option(f[5], opt) || (dash + 3 < f.size() && has_option(f[dash + 3], opt));
  }
  return found;
}

Result<std::optional<ResctrlInfo>> read_resctrl_info(const std::filesystem::path& root,
                                                     const std::filesystem::path& mountinfo) {
  std::error_code ec;
  auto info_dir = root / "info";
  if (!std::filesystem::is_directory(info_dir, ec)) return std::optional<ResctrlInfo>{};
  ResctrlInfo info;
  info.root = root;
  if (std::filesystem::is_directory(info_dir / "L3", ec)) {
    if (auto r = read_l3(info_dir / "L3", info); !r) return std::unexpected(r.error());
  } else if (std::filesystem::is_directory(info_dir / "L3CODE", ec)) {
    if (auto r = read_l3(info_dir / "L3CODE", info); !r) return std::unexpected(r.error());
    info.cdp = true;
  }
  if (std::filesystem::is_directory(info_dir / "MB", ec)) {
    auto min_bw = read_uint(info_dir / "MB/min_bandwidth", kMaxPercent);
    if (!min_bw) return std::unexpected(min_bw.error());
    auto gran = read_uint(info_dir / "MB/bandwidth_gran", kMaxPercent);
    if (!gran) return std::unexpected(gran.error());
    info.mb = true;
    info.min_bandwidth = *min_bw;
    info.bandwidth_gran = *gran;
    // Groups need a CLOSID in every resource: the kernel offers the smallest count.
    if (std::filesystem::exists(info_dir / "MB/num_closids", ec)) {
      auto closids = read_uint(info_dir / "MB/num_closids", kMaxClosids);
      if (!closids) return std::unexpected(closids.error());
      info.num_closids = info.l3 ? std::min(info.num_closids, *closids) : *closids;
    }
  }
  if (!mountinfo.empty())
    if (auto text = read_file(mountinfo)) info.mba_mbps = resctrl_mount_has_option(*text, root, "mba_MBps");
  return std::optional<ResctrlInfo>{info};
}

}  // namespace keel
