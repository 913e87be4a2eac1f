#include "tests/support/tmp_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace keel::testing {

TempDir::TempDir()
    : TempDir([] {
        const char* base = std::getenv("TMPDIR");
        return std::filesystem::path(base && *base ? base : "/tmp");
      }()) {}

TempDir::TempDir(const std::filesystem::path& base) {
  std::string tmpl = (base / "keel-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (ec) remove_deep(path_);  // deeper than PATH_MAX
}

bool make_deep_chain(const std::filesystem::path& root, size_t levels, const std::string& name,
                     const std::string& file, const std::string& deepest) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  for (size_t i = 0; i < levels; ++i) {
    int next = -1;
    if (::mkdirat(fd, name.c_str(), 0755) == 0 || errno == EEXIST)
      next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(fd);
    if (next < 0) return false;
    fd = next;
    if (!file.empty()) {
      int f = ::openat(fd, file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (f < 0) {
        ::close(fd);
        return false;
      }
      const bool ok = i + 1 < levels || deepest.empty() ||
                      ::write(f, deepest.data(), deepest.size()) == static_cast<ssize_t>(deepest.size());
      ::close(f);
      if (!ok) {
        ::close(fd);
        return false;
      }
    }
  }
  ::close(fd);
  return true;
}

bool remove_deep(const std::filesystem::path& dir) {
  // Goes down to a directory without subdirectories, empties and removes it, goes back up through
  // "..", and again: one directory open at a time, whatever the depth.
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  std::vector<std::string> names;  // from `dir` down to where fd is
  for (;;) {
    DIR* d = ::fdopendir(::dup(fd));
    if (d == nullptr) break;
    std::string sub;
    std::vector<std::string> files;
    while (dirent* e = ::readdir(d)) {
      std::string_view n = e->d_name;
      if (n == "." || n == "..") continue;
      struct stat st;
      if (::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        sub = e->d_name;
        break;
      }
      files.emplace_back(n);
    }
    ::closedir(d);
    if (!sub.empty()) {
      int next = ::openat(fd, sub.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0) break;
      ::close(fd);
      fd = next;
      names.push_back(sub);
      continue;
    }
    for (const auto& f : files) (void)::unlinkat(fd, f.c_str(), 0);  // cgroupfs: EPERM, harmless
    if (names.empty()) {
      ::close(fd);
      return ::rmdir(dir.c_str()) == 0;
    }
    int up = ::openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    if (up < 0) return false;
    fd = up;
    if (::unlinkat(fd, names.back().c_str(), AT_REMOVEDIR) != 0) break;
    names.pop_back();
  }
  ::close(fd);
  return false;
}

void make_tree(const std::filesystem::path& root,
               const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [rel, content] : files) {
    auto p = root / rel;
    if (!rel.empty() && rel.back() == '/') {
      std::filesystem::create_directories(p);
      continue;
    }
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
  }
}

uint64_t inode_of(const std::filesystem::path& file) {
  struct stat st;
  return ::stat(file.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_root() { return ::geteuid() == 0; }

std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string full = cmd + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out};
}

std::string between(const std::string& text, const std::string& from, const std::string& to) {
  size_t a = text.find(from);
  if (a == std::string::npos) return "";
  a += from.size();
  size_t b = text.find(to, a);
  return b == std::string::npos ? "" : text.substr(a, b - a);
}

std::filesystem::path keel_binary() { return binary_dir() / "cli" / "keel"; }

std::vector<std::pair<std::string, std::string>> cgroup_v2_files(const std::string& dir,
                                                                 const std::string& procs,
                                                                 const std::string& cpus,
                                                                 const std::string& effective,
                                                                 const std::string& mems_effective) {
  return {{dir + "/cgroup.procs", procs},      {dir + "/cgroup.threads", procs},
          {dir + "/cpu.weight", "100\n"},      {dir + "/cpu.max", "max 100000\n"},
          {dir + "/cpu.max.burst", "0\n"},     {dir + "/cpu.idle", "0\n"},
          {dir + "/cpuset.cpus", cpus + "\n"}, {dir + "/cpuset.cpus.effective", effective + "\n"},
          {dir + "/cpuset.mems", "\n"},        {dir + "/cpuset.mems.effective", mems_effective + "\n"}};
}

std::map<std::string, std::string> tree_files(const std::filesystem::path& root,
                                              const std::filesystem::path& skip) {
  std::map<std::string, std::string> m;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    auto rel = e.path().lexically_relative(root);
    if (!skip.empty() && !rel.lexically_relative(skip).empty() &&
        *rel.lexically_relative(skip).begin() != "..")
      continue;
    if (e.is_regular_file()) m[rel.string()] = slurp(e.path());
  }
  return m;
}

}  // namespace keel::testing
