#include "host/resctrl_info.h"

#include <bit>
#include <charconv>

#include "host/fileio.h"

namespace keel {

namespace {

Result<unsigned long long> read_hex(const std::filesystem::path& p) {
  auto line = read_line(p);
  if (!line) return std::unexpected(line.error());
  unsigned long long v = 0;
  auto [end, ec] = std::from_chars(line->data(), line->data() + line->size(), v, 16);
  if (ec != std::errc() || end != line->data() + line->size() || line->empty())
    return fail("not a hex mask: '" + *line + "'", p.string());
  return v;
}

Result<unsigned> read_uint(const std::filesystem::path& p) {
  auto v = read_int(p);
  if (!v) return std::unexpected(v.error());
  if (*v < 0) return fail("negative value " + std::to_string(*v), p.string());
  return static_cast<unsigned>(*v);
}

Result<void> read_l3(const std::filesystem::path& dir, ResctrlInfo& info) {
  auto mask = read_hex(dir / "cbm_mask");
  if (!mask) return std::unexpected(mask.error());
  auto min_bits = read_uint(dir / "min_cbm_bits");
  if (!min_bits) return std::unexpected(min_bits.error());
  auto closids = read_uint(dir / "num_closids");
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
    auto sm = read_uint(dir / "sparse_masks");
    if (!sm) return std::unexpected(sm.error());
    info.sparse_masks = *sm != 0;
  }
  return {};
}

}  // namespace

Result<std::optional<ResctrlInfo>> read_resctrl_info(const std::filesystem::path& root) {
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
    auto min_bw = read_uint(info_dir / "MB/min_bandwidth");
    if (!min_bw) return std::unexpected(min_bw.error());
    auto gran = read_uint(info_dir / "MB/bandwidth_gran");
    if (!gran) return std::unexpected(gran.error());
    info.mb = true;
    info.min_bandwidth = *min_bw;
    info.bandwidth_gran = *gran;
  }
  return std::optional<ResctrlInfo>{info};
}

}  // namespace keel
