// The state directory (/var/lib/keel): the journal, its lock and the handover. keel runs as root and
// writes what the journal says back to kernel files, so the directory must be keel's alone: a
// directory (not a link) of keel's user with no access for group or others, every ancestor owned by
// root or keel's user and writable by no one else unless sticky (/tmp). Every file in it is opened
// relative to the directory's fd, never through a link, created with O_EXCL where it is new.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "host/error.h"
#include "host/fd.h"

namespace keel::act {

class StateDir {
 public:
  // Opens DIR, creating it (0700, missing parents 0755) when `create`; nullopt when it is missing and
  // not to be created. Refused, with the reason, when it or an ancestor is not as said above.
  static Result<std::optional<StateDir>> open(const std::filesystem::path& dir, bool create);

  const std::filesystem::path& path() const { return path_; }
  int fd() const { return fd_.get(); }

  // Opens NAME (one component) with `flags` (O_NOFOLLOW and O_CLOEXEC added). An existing file must be
  // a regular file of keel's user with one link and no write access for group or others.
  Result<Fd> open_file(std::string_view name, int flags, mode_t mode = 0600) const;
  // NAME's bytes, at most `max`; nullopt when it does not exist. Never blocks on a FIFO.
  Result<std::optional<std::string>> read(std::string_view name, size_t max) const;
  bool exists(std::string_view name) const;
  // Replaces NAME with `text` durably: NAME.tmp created anew (O_EXCL; a stale one removed first),
  // written, fsynced, renamed over NAME, the directory fsynced. `what` names it in errors.
  Result<void> replace(std::string_view name, std::string_view text, const std::string& what) const;
  // Removes NAME (absent is fine) and fsyncs the directory.
  Result<void> remove(std::string_view name) const;
  Result<void> sync() const;
  std::string file(std::string_view name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
  Fd fd_;
};

// CRC-32C (Castagnoli) of `data`, continuing from `crc` (0 to start): the journal's line checksum.
uint32_t crc32c(std::string_view data, uint32_t crc = 0);

}  // namespace keel::act
