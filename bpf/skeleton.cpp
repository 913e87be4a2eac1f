#include "bpf/skeleton.h"

namespace keel::bpf {

namespace {
std::string& btf_path() {
  static std::string path;
  return path;
}
}  // namespace

void set_kernel_btf(std::string path) { btf_path() = std::move(path); }
const std::string& kernel_btf() { return btf_path(); }

Result<void> check_map_sizes(const bpf_map* map, size_t key, size_t value) {
  const size_t k = bpf_map__key_size(map), v = bpf_map__value_size(map);
  if (k == key && v == value) return {};
  return fail(std::string("BPF map ") + bpf_map__name(map) + " has " + std::to_string(k) + "-byte keys and " +
              std::to_string(v) + "-byte values where keel reads " + std::to_string(key) + " and " +
              std::to_string(value) + " (the object and *_shared.h disagree: rebuild keel)");
}

}  // namespace keel::bpf
