// Test helpers: temporary directory trees that mirror kernel files, built in code (oomd style),
// and small conveniences for privileged tests.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace keel::testing {

// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  // Under `base` instead (a tmpfs such as /dev/shm, for trees of many thousand files).
  explicit TempDir(const std::filesystem::path& base);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Writes each (relative path, content) under root, creating parent directories.
// A path ending in '/' creates an empty directory.
void make_tree(const std::filesystem::path& root,
               const std::vector<std::pair<std::string, std::string>>& files);

// A chain of `levels` directories named `name`, each inside the previous one, under `root` (made with
// mkdirat through directory descriptors, so the chain may be deeper than PATH_MAX), with an empty
// file `file` in each when it is not empty (a cgroup's cgroup.procs), the deepest one's holding
// `deepest`. Returns false on a failure.
bool make_deep_chain(const std::filesystem::path& root, size_t levels, const std::string& name,
                     const std::string& file = {}, const std::string& deepest = {});
// Removes `dir` and everything in it however deep (one name per call, never a long path). On a
// cgroup filesystem it removes only directories (the kernel removes a cgroup's files with it).
bool remove_deep(const std::filesystem::path& dir);

std::string slurp(const std::filesystem::path& file);
// The inode of `file` (0 when it cannot be stat'ed): whether a file was replaced or changed in place.
uint64_t inode_of(const std::filesystem::path& file);
// The text between the first `from` in `text` and the next `to` after it ("" when either is missing).
// (Tests parse tool output with it: std::regex trips g++ 12's -Wmaybe-uninitialized under ASan.)
std::string between(const std::string& text, const std::string& from, const std::string& to);

// Every regular file under root by its relative path, with its bytes; files under `skip` (e.g. a
// state directory inside the tree) are left out. For "byte-for-byte unchanged" checks.
std::map<std::string, std::string> tree_files(const std::filesystem::path& root,
                                              const std::filesystem::path& skip = {});

// One cgroup v2 directory as the kernel shows it with the cpu and cpuset controllers enabled:
// `dir` is its path in the tree ("sys/fs/cgroup/kubepods/be"), `procs` its pids one per line ("" for
// none; also its threads), `cpus` its cpuset.cpus ("" = not set), `effective` and `mems_effective`
// what the kernel grants. Weight 100, no quota, not idle, cpuset.mems not set.
std::vector<std::pair<std::string, std::string>> cgroup_v2_files(const std::string& dir,
                                                                 const std::string& procs,
                                                                 const std::string& cpus,
                                                                 const std::string& effective,
                                                                 const std::string& mems_effective);

// True when running as root; otherwise prints why the caller skips.
bool is_root();

// Runs a shell command, returns {exit status, stdout+stderr}.
std::pair<int, std::string> run_command(const std::string& cmd);

// The build tree, the built keel binary in it (cli/keel) and the source tree. (Only tests/support/paths.cpp
// is compiled with these paths, so the rest compiles the same in any checkout: a cache hit.)
std::filesystem::path binary_dir();
std::filesystem::path keel_binary();
std::filesystem::path source_dir();

}  // namespace keel::testing

// Skips a test that needs root, with the reason printed.
#define KEEL_REQUIRE_ROOT()                                                                               \
  do {                                                                                                    \
    if (!::keel::testing::is_root())                                                                      \
      GTEST_SKIP() << "skipped: needs root (uid 0) for real cgroups/BPF; running as uid " << ::geteuid(); \
  } while (0)
