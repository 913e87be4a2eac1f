// The one owner of a bpftool skeleton: opened, loaded and attached through it, destroyed with it
// (move-only), each step an error value. Beside it, the check every loader makes after load: a map's
// key and value are the sizes of the C++ structs user space reads it with (a mismatch between
// *_shared.h and what was compiled into the object would read garbage, not fail).
#pragma once

#include <bpf/libbpf.h>

#include <cstddef>
#include <memory>
#include <string>

#include "bpf/libbpf_log.h"
#include "host/error.h"

namespace keel::bpf {

// The kernel's BTF that BPF objects are opened against: "" is libbpf's default (/sys/kernel/btf/vmlinux
// of the running kernel, as this process's /sys shows it); keel run --root sets the host's copy under
// its root (a container's own /sys may hide it). Process-wide: it is one kernel.
void set_kernel_btf(std::string path);
const std::string& kernel_btf();

template <class Skel>
struct SkeletonOps {
  Skel* (*open)(const bpf_object_open_opts*);
  int (*load)(Skel*);
  int (*attach)(Skel*);
  void (*destroy)(Skel*);
};

template <class Skel>
class Skeleton {
 public:
  Skeleton() = default;
  // Opens the object (not loaded yet: .rodata and autoload can still be set).
  static Result<Skeleton> open(const SkeletonOps<Skel>& ops, const std::string& what) {
    install_log();
    LIBBPF_OPTS(bpf_object_open_opts, opts,
                .btf_custom_path = kernel_btf().empty() ? nullptr : kernel_btf().c_str());
    Skel* s = ops.open(&opts);
    if (s == nullptr) return fail("cannot open the " + what + " BPF object", "", errno);
    return Skeleton(s, ops);
  }
  Result<void> load_and_attach(const std::string& what) {
    int err = ops_.load(get());
    if (err == 0) err = ops_.attach(get());
    if (err == 0) return {};
    std::string why = last_log_line();
    return fail("cannot load/attach " + what + (why.empty() ? "" : " (" + why + ")"), "", -err);
  }
  Skel* get() const { return p_.get(); }
  Skel* operator->() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  Skeleton(Skel* s, const SkeletonOps<Skel>& ops) : p_(s, ops.destroy), ops_(ops) {}
  std::unique_ptr<Skel, void (*)(Skel*)> p_{nullptr, nullptr};
  SkeletonOps<Skel> ops_{};
};

// Whether a loaded map's key and value sizes are `key` and `value` bytes (for per-CPU maps, the value
// of one CPU); an error naming the map and both sizes when not.
Result<void> check_map_sizes(const bpf_map* map, size_t key, size_t value);

}  // namespace keel::bpf
