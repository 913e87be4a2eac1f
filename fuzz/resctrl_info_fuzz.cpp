// resctrl's info/ directory (host/resctrl_info.h) as read_resctrl_info reads it, from files the
// harness writes under /dev/shm. The input is sections, each "@NAME\n" then the file's content up to
// the next "\n@": NAME is one of info/'s files ("L3/cbm_mask", "MB/min_bandwidth", ...; a bare
// directory name makes the directory alone); a NAME ending in "|fifo" makes a FIFO there and one
// ending in "|link" a symbolic link to a file with the content. What is read must be what a
// reference reader of the kernel's format makes of the same files (first line, blanks trimmed: hex
// digits for masks, decimal within the kernel's range otherwise), a FIFO never blocks and a link is
// never followed.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "fuzz/check.h"
#include "host/resctrl_info.h"

namespace {

namespace fs = std::filesystem;
using namespace keel;

const char* const kDirs[] = {"L3", "L3CODE", "L3DATA", "MB"};
const char* const kCacheFiles[] = {"cbm_mask", "min_cbm_bits", "num_closids", "shareable_bits",
                                   "sparse_masks"};
const char* const kMbFiles[] = {"min_bandwidth", "bandwidth_gran", "num_closids"};

enum class Kind { file, fifo, link };
struct Entry {
  Kind kind = Kind::file;
  std::string content;
};

// /dev/shm/keel-fuzz-resctrl-info.PID, removed at exit; one a crashed run left (its process gone) is
// removed at the next start. The name is kept in static storage: an exit handler runs after the
// function-local statics it could otherwise refer to are destroyed.
char g_scratch[64];

void remove_scratch() {
  std::error_code ec;
  fs::remove_all(g_scratch, ec);
}

const fs::path& scratch() {
  static const fs::path dir = [] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with("keel-fuzz-resctrl-info.")) continue;
      const std::string pid = name.substr(name.find('.') + 1);
      if (!fs::exists("/proc/" + pid)) fs::remove_all(e.path(), ec);
    }
    std::snprintf(g_scratch, sizeof g_scratch, "/dev/shm/keel-fuzz-resctrl-info.%d",
                  static_cast<int>(::getpid()));
    fs::create_directories(g_scratch);
    std::atexit(remove_scratch);
    return fs::path(g_scratch);
  }();
  return dir;
}

bool known(std::string_view dir, std::string_view file) {
  if (dir == "MB") return std::ranges::find(kMbFiles, file) != std::end(kMbFiles);
  return std::ranges::find(kCacheFiles, file) != std::end(kCacheFiles);
}

// "L3/cbm_mask" -> the files; "MB" -> the directory alone.
void sections(std::string_view in, std::map<std::string, Entry>& files, std::map<std::string, bool>& dirs) {
  if (!in.starts_with('@')) return;
  while (!in.empty()) {
    in.remove_prefix(1);  // '@'
    size_t nl = in.find('\n');
    std::string_view name = in.substr(0, nl);
    std::string_view rest = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);
    size_t next = rest.find("\n@");
    std::string_view content = rest.substr(0, next);
    in = next == std::string_view::npos ? std::string_view{} : rest.substr(next + 1);
    Kind kind = Kind::file;
    if (name.ends_with("|fifo")) kind = Kind::fifo, name.remove_suffix(5);
    if (name.ends_with("|link")) kind = Kind::link, name.remove_suffix(5);
    size_t slash = name.find('/');
    std::string dir(name.substr(0, slash));
    if (std::ranges::find(kDirs, dir) == std::end(kDirs)) continue;
    dirs[dir] = true;
    if (slash == std::string_view::npos) continue;
    std::string file(name.substr(slash + 1));
    if (known(dir, file)) files[dir + "/" + file] = Entry{kind, std::string(content)};
  }
}

// The reference: a file's first line with blanks trimmed, as the kernel prints a value.
std::optional<std::string> line_of(const std::map<std::string, Entry>& files, const std::string& name) {
  auto it = files.find(name);
  if (it == files.end() || it->second.kind != Kind::file) return std::nullopt;
  std::string s = it->second.content.substr(0, it->second.content.find('\n'));
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && blank(s.back())) s.pop_back();
  size_t b = 0;
  while (b < s.size() && blank(s[b])) ++b;
  return s.substr(b);
}
std::optional<unsigned long long> hex_of(const std::map<std::string, Entry>& files, const std::string& name) {
  auto s = line_of(files, name);
  if (!s || s->empty() || s->find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    return std::nullopt;
  size_t nz = s->find_first_not_of('0');
  if (nz != std::string::npos && s->size() - nz > 16) return std::nullopt;
  return std::strtoull(s->c_str(), nullptr, 16);
}
std::optional<unsigned> uint_of(const std::map<std::string, Entry>& files, const std::string& name,
                                unsigned max) {
  auto s = line_of(files, name);
  if (!s || s->empty() || s->find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  size_t nz = s->find_first_not_of('0');
  if (nz != std::string::npos && s->size() - nz > 10) return std::nullopt;
  unsigned long long v = std::strtoull(s->c_str(), nullptr, 10);
  if (v > max) return std::nullopt;
  return static_cast<unsigned>(v);
}

// What read_resctrl_info must make of the tree: nullopt for "an error".
std::optional<ResctrlInfo> expected(const std::map<std::string, Entry>& files,
                                    const std::map<std::string, bool>& dirs) {
  ResctrlInfo info;
  const char* l3 = dirs.count("L3") ? "L3" : dirs.count("L3CODE") ? "L3CODE" : nullptr;
  if (l3 != nullptr) {
    const std::string d = std::string(l3) + "/";
    auto mask = hex_of(files, d + "cbm_mask");
    auto min = uint_of(files, d + "min_cbm_bits", 64);
    auto closids = uint_of(files, d + "num_closids", 65536);
    if (!mask || !min || !closids) return std::nullopt;
    info.l3 = true;
    info.cdp = std::string(l3) == "L3CODE";
    info.cbm_mask = *mask;
    info.l3_ways = static_cast<unsigned>(std::popcount(*mask));
    info.min_cbm_bits = *min;
    info.num_closids = *closids;
    if (files.count(d + "shareable_bits")) {
      auto sb = hex_of(files, d + "shareable_bits");
      if (!sb) return std::nullopt;
      info.shareable_bits = *sb;
    }
    if (files.count(d + "sparse_masks")) {
      auto sm = uint_of(files, d + "sparse_masks", 1);
      if (!sm) return std::nullopt;
      info.sparse_masks = *sm != 0;
    }
  }
  if (dirs.count("MB")) {
    auto min = uint_of(files, "MB/min_bandwidth", 100);
    auto gran = uint_of(files, "MB/bandwidth_gran", 100);
    if (!min || !gran) return std::nullopt;
    info.mb = true;
    info.min_bandwidth = *min;
    info.bandwidth_gran = *gran;
    if (files.count("MB/num_closids")) {
      auto closids = uint_of(files, "MB/num_closids", 65536);
      if (!closids) return std::nullopt;
      info.num_closids = info.l3 ? std::min(info.num_closids, *closids) : *closids;
    }
  }
  return info;
}

void write_tree(const fs::path& root, const std::map<std::string, Entry>& files,
                const std::map<std::string, bool>& dirs) {
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root / "info", ec);
  FUZZ_CHECK(!ec);
  for (const auto& [d, _] : dirs) fs::create_directory(root / "info" / d);
  int n = 0;
  for (const auto& [name, e] : files) {
    const fs::path p = root / "info" / name;
    if (e.kind == Kind::fifo) {
      FUZZ_CHECK(::mkfifo(p.c_str(), 0600) == 0);
      continue;
    }
    fs::path target = e.kind == Kind::link ? root / ("target" + std::to_string(n++)) : p;
    std::ofstream(target, std::ios::binary) << e.content;
    if (e.kind == Kind::link) fs::create_symlink(target, p);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = keel::fuzz::as_text(data, size);
  std::map<std::string, Entry> files;
  std::map<std::string, bool> dirs;
  sections(text, files, dirs);
  const fs::path root = scratch() / "resctrl";
  write_tree(root, files, dirs);
  auto got = read_resctrl_info(root);
  auto want = expected(files, dirs);
  if (!want) {
    FUZZ_CHECK(!got);
    FUZZ_CHECK(!got.error().what.empty());
    return 0;
  }
  FUZZ_CHECK(got && got->has_value());
  const ResctrlInfo& g = **got;
  FUZZ_CHECK(g.root == root);
  FUZZ_CHECK(
      g.l3 == want->l3 && g.cdp == want->cdp && g.cbm_mask == want->cbm_mask && g.l3_ways == want->l3_ways &&
      g.min_cbm_bits == want->min_cbm_bits && g.shareable_bits == want->shareable_bits &&
      g.sparse_masks == want->sparse_masks && g.num_closids == want->num_closids && g.mb == want->mb &&
      g.min_bandwidth == want->min_bandwidth && g.bandwidth_gran == want->bandwidth_gran && !g.mba_mbps);
  return 0;
}
