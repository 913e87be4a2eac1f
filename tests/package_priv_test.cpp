// The Debian package end to end on this machine: cpack builds it from this build; its control data
// depends on shared libraries only (no build or test tool) and marks /etc/keel/keel.toml a conffile;
// dpkg installs it; the installed keel answers --version with this build's revision, checks the shipped
// config, and its unit verifies against the installed man page; a reinstall keeps an operator's edit
// of the conffile; a purge leaves nothing behind. Root only (it changes the dpkg database, and puts
// it back; a /var/lib/keel or /etc/keel already here is moved aside and back); skipped when a keel
// package is installed already.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::slurp;

class PackagePriv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "skipped: installs a package (root only)";
    if (run_command("dpkg-query -W -f='${Status}' keel").second.find("installed") != std::string::npos)
      GTEST_SKIP() << "skipped: a keel package is installed on this machine; not replacing it";
    // A keel run from the source tree may have left its state or a config: moved aside, put back after.
    for (const char* d : {"/var/lib/keel", "/etc/keel"})
      if (fs::exists(d)) {
        fs::path aside = std::string(d) + ".package-test-" + std::to_string(::getpid());
        fs::rename(d, aside);
        aside_.emplace_back(d, aside);
      }
  }
  void TearDown() override {
    if (installed_) run_command("dpkg --purge keel");
    for (const auto& [d, aside] : aside_) {
      fs::remove_all(d);
      fs::rename(aside, d);
    }
  }
  bool installed_ = false;
  std::vector<std::pair<fs::path, fs::path>> aside_;
};

TEST_F(PackagePriv, BuildsInstallsRunsKeepsTheConffileAndPurgesCleanly) {
  testing::TempDir dir;
  auto [crc, cout] =
      run_command("cd " + std::string(KEEL_BINARY_DIR) + " && cpack -G DEB -B " + dir.path().string());
  ASSERT_EQ(crc, 0) << cout;
  fs::path deb;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().extension() == ".deb") deb = e.path();
  ASSERT_FALSE(deb.empty()) << cout;

  // Control data: runtime libraries only, the conffile, the files where the system expects them.
  auto [irc, info] = run_command("dpkg-deb -f " + deb.string() + " Depends");
  ASSERT_EQ(irc, 0) << info;
  for (const char* lib :
       {"libbpf1", "libhwloc15", "libprometheus-cpp-core1.0", "libcivetweb1", "libtomlplusplus3"})
    EXPECT_NE(info.find(lib), std::string::npos) << lib << " in " << info;
  for (const char* tool : {"stress-ng", "redis", "prometheus (", "googletest", "libgtest", "clang", "cmake"})
    EXPECT_EQ(info.find(tool), std::string::npos) << tool << " in " << info;
  auto [frc, conffiles] = run_command("dpkg-deb -I " + deb.string() + " conffiles");
  EXPECT_EQ(conffiles, "/etc/keel/keel.toml\n");
  auto [lrc, listing] = run_command("dpkg-deb -c " + deb.string());
  for (const char* f : {"./usr/sbin/keel", "./etc/keel/keel.toml", "./lib/systemd/system/keel.service",
                        "./usr/share/man/man8/keel.8.gz", "./usr/share/bash-completion/completions/keel",
                        "./usr/share/keel/dashboards/keel-controller.json",
                        "./usr/share/keel/rules/keel-alerts.yml", "./usr/share/doc/keel/config.md"})
    EXPECT_NE(listing.find(std::string(f) + "\n"), std::string::npos) << f << "\n" << listing;

  auto [drc, dout] = run_command("DEBIAN_FRONTEND=noninteractive dpkg -i " + deb.string());
  ASSERT_EQ(drc, 0) << dout;
  installed_ = true;
  auto [vrc, version] = run_command("/usr/sbin/keel --version");
  auto [brc, built] = run_command(testing::keel_binary().string() + " --version");
  EXPECT_EQ(vrc, 0);
  EXPECT_EQ(version, built) << "the installed keel is this build";
  auto [krc, kout] = run_command("/usr/sbin/keel check-config /etc/keel/keel.toml");
  EXPECT_EQ(krc, 0) << kout;
  EXPECT_EQ(slurp("/etc/keel/keel.toml"), slurp(testing::source_dir() / "config/keel.toml"));
  if (run_command("command -v systemd-analyze").first == 0) {
    auto [src, sout] = run_command("systemd-analyze verify /lib/systemd/system/keel.service");
    EXPECT_EQ(src, 0) << sout;
    EXPECT_EQ(sout, "") << sout;
  }
  auto [mrc, man] = run_command("MANWIDTH=120 man 8 keel | col -b");
  EXPECT_NE(man.find("keel check-config FILE"), std::string::npos) << man;

  // The operator edits the config; a reinstall (an upgrade) keeps the edit.
  { std::ofstream("/etc/keel/keel.toml", std::ios::app) << "# edited by the operator\n"; }
  auto [r2, o2] = run_command("DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold " + deb.string());
  ASSERT_EQ(r2, 0) << o2;
  EXPECT_NE(slurp("/etc/keel/keel.toml").find("# edited by the operator"), std::string::npos);

  auto [prc, pout] = run_command("dpkg --purge keel");
  ASSERT_EQ(prc, 0) << pout;
  installed_ = false;
  for (const char* f :
       {"/usr/sbin/keel", "/etc/keel", "/lib/systemd/system/keel.service", "/usr/share/keel",
        "/usr/share/man/man8/keel.8.gz", "/usr/share/bash-completion/completions/keel", "/var/lib/keel",
        "/etc/systemd/system/keel.service", "/etc/systemd/system/multi-user.target.wants/keel.service"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(f))) << f << " left after the purge";
}

}  // namespace
}  // namespace keel
