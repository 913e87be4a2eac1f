// The one error style at keel's module boundaries: std::expected<T, Error>.
#pragma once

#include <cerrno>
#include <cstring>
#include <expected>
#include <string>
#include <utility>

namespace keel {

struct Error {
  int err = 0;       // errno, or 0 when the failure is not a system call's
  std::string path;  // file (kernel path, config file) the failure is about, may be empty
  std::string what;  // what was tried or what is wrong, in words

  // "path: what: strerror(err)" with the empty parts left out.
  std::string message() const {
    std::string m;
    if (!path.empty()) m += path + ": ";
    m += what;
    if (err != 0) m += std::string(": ") + std::strerror(err);
    return m;
  }
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(std::string what, std::string path = {}, int err = 0) {
  return std::unexpected(Error{err, std::move(path), std::move(what)});
}
inline std::unexpected<Error> fail_errno(std::string what, std::string path) {
  return std::unexpected(Error{errno, std::move(path), std::move(what)});
}

}  // namespace keel
