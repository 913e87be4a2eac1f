#include "host/cpuset.h"

#include <algorithm>
#include <bit>
#include <charconv>

#include "host/fileio.h"

namespace keel {

namespace {
std::string at(std::string_view text, size_t pos) {
  return " at offset " + std::to_string(pos) + " in '" + std::string(text) + "'";
}
}  // namespace

CpuSet CpuSet::range(unsigned first, unsigned last) {
  CpuSet s;
  // Never past kMaxCpu: `last` = UINT_MAX would otherwise wrap around and loop forever.
  for (unsigned c = first; c <= last && c < kMaxCpu; ++c) s.add(c);
  return s;
}

void CpuSet::add(unsigned cpu) {
  size_t w = cpu / 64;
  if (words_.size() <= w) words_.resize(w + 1, 0);
  words_[w] |= uint64_t{1} << (cpu % 64);
}

void CpuSet::remove(unsigned cpu) {
  size_t w = cpu / 64;
  if (w < words_.size()) words_[w] &= ~(uint64_t{1} << (cpu % 64));
  trim();
}

bool CpuSet::contains(unsigned cpu) const {
  size_t w = cpu / 64;
  return w < words_.size() && (words_[w] >> (cpu % 64) & 1) != 0;
}

bool CpuSet::empty() const { return words_.empty(); }

unsigned CpuSet::count() const {
  unsigned n = 0;
  for (auto w : words_) n += static_cast<unsigned>(std::popcount(w));
  return n;
}

std::vector<unsigned> CpuSet::cpus() const {
  std::vector<unsigned> out;
  for (size_t w = 0; w < words_.size(); ++w)
    for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
      out.push_back(static_cast<unsigned>(w * 64 + static_cast<size_t>(std::countr_zero(bits))));
  return out;
}

int CpuSet::first() const {
  for (size_t w = 0; w < words_.size(); ++w)
    if (words_[w] != 0) return static_cast<int>(w * 64 + static_cast<size_t>(std::countr_zero(words_[w])));
  return -1;
}

int CpuSet::last() const {
  if (words_.empty()) return -1;
  size_t w = words_.size() - 1;
  return static_cast<int>(w * 64 + 63 - static_cast<size_t>(std::countl_zero(words_[w])));
}

void CpuSet::trim() {
  while (!words_.empty() && words_.back() == 0) words_.pop_back();
}

CpuSet CpuSet::operator|(const CpuSet& o) const {
  CpuSet r = *this;
  r |= o;
  return r;
}

CpuSet& CpuSet::operator|=(const CpuSet& o) {
  if (words_.size() < o.words_.size()) words_.resize(o.words_.size(), 0);
  for (size_t i = 0; i < o.words_.size(); ++i) words_[i] |= o.words_[i];
  return *this;
}

CpuSet CpuSet::operator&(const CpuSet& o) const {
  CpuSet r;
  r.words_.resize(std::min(words_.size(), o.words_.size()));
  for (size_t i = 0; i < r.words_.size(); ++i) r.words_[i] = words_[i] & o.words_[i];
  r.trim();
  return r;
}

CpuSet CpuSet::operator-(const CpuSet& o) const {
  CpuSet r = *this;
  for (size_t i = 0; i < std::min(r.words_.size(), o.words_.size()); ++i) r.words_[i] &= ~o.words_[i];
  r.trim();
  return r;
}

bool CpuSet::operator==(const CpuSet& o) const { return words_ == o.words_; }

Result<CpuSet> CpuSet::parse_list(std::string_view text) {
  std::string_view s = keel::trim(text);
  CpuSet out;
  size_t base = static_cast<size_t>(s.data() - text.data());
  size_t i = 0;
  auto number = [&](unsigned& v) -> Result<void> {
    size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == start) return fail("expected a CPU number" + at(text, base + start));
    auto [p, ec] = std::from_chars(s.data() + start, s.data() + i, v);
    if (ec != std::errc() || v >= kMaxCpu)
      return fail("CPU number " + std::string(s.substr(start, i - start)) + " is out of range (max " +
                  std::to_string(kMaxCpu - 1) + ")" + at(text, base + start));
    return {};
  };
  while (i < s.size()) {
    unsigned lo = 0, hi = 0, used = 1, group = 1;
    if (auto r = number(lo); !r) return std::unexpected(r.error());
    hi = lo;
    if (i < s.size() && s[i] == '-') {
      ++i;
      size_t hi_pos = i;
      if (auto r = number(hi); !r) return std::unexpected(r.error());
      if (hi < lo)
        return fail("range " + std::to_string(lo) + "-" + std::to_string(hi) + " runs backwards" +
                    at(text, base + hi_pos));
      // The kernel's group form (bitmap_parselist): "a-b:used/group", e.g. 0-1023:2/256.
      if (i < s.size() && s[i] == ':') {
        ++i;
        size_t used_pos = i;
        if (auto r = number(used); !r) return std::unexpected(r.error());
        if (i >= s.size() || s[i] != '/')
          return fail("expected '/' after the used count" + at(text, base + i));
        ++i;
        size_t group_pos = i;
        if (auto r = number(group); !r) return std::unexpected(r.error());
        if (group == 0) return fail("group size must be at least 1" + at(text, base + group_pos));
        if (used == 0 || used > group)
          return fail("used count must be 1.." + std::to_string(group) + at(text, base + used_pos));
      }
    }
    for (unsigned c = lo; c <= hi; ++c)
      if ((c - lo) % group < used) out.add(c);
    if (i == s.size()) break;
    if (s[i] != ',') return fail(std::string("unexpected '") + s[i] + "'" + at(text, base + i));
    ++i;
    if (i == s.size()) return fail("trailing ','" + at(text, base + i - 1));
  }
  return out;
}

Result<CpuSet> CpuSet::parse_mask(std::string_view text) {
  std::string_view s = keel::trim(text);
  size_t base = static_cast<size_t>(s.data() - text.data());
  if (s.starts_with("0x") || s.starts_with("0X")) {
    s.remove_prefix(2);
    base += 2;
    if (s.empty()) return fail("no hex digits after '0x'" + at(text, base));
  }
  if (s.empty()) return CpuSet{};
  if (s.front() == ',') return fail("empty word in mask" + at(text, base));
  // Walk the hex digits from the least significant end; commas separate 32-bit words.
  CpuSet out;
  unsigned bit = 0;
  size_t digits_in_word = 0;
  for (size_t k = s.size(); k-- > 0;) {
    char c = s[k];
    if (c == ',') {
      if (digits_in_word == 0) return fail("empty word in mask" + at(text, base + k));
      if (digits_in_word > 8) return fail("word longer than 8 hex digits in mask" + at(text, base + k + 1));
      bit = (bit + 31) / 32 * 32;  // next word starts at the next multiple of 32
      digits_in_word = 0;
      continue;
    }
    unsigned v;
    if (c >= '0' && c <= '9')
      v = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v = static_cast<unsigned>(c - 'A' + 10);
    else
      return fail(std::string("'") + c + "' is not a hex digit" + at(text, base + k));
    for (unsigned b = 0; b < 4; ++b) {
      if (v >> b & 1) {
        if (bit + b >= kMaxCpu) return fail("mask has bits beyond CPU " + std::to_string(kMaxCpu - 1));
        out.add(bit + b);
      }
    }
    bit += 4;
    ++digits_in_word;
  }
  if (s.find(',') != std::string_view::npos && digits_in_word > 8)
    return fail("word longer than 8 hex digits in mask" + at(text, base));
  return out;
}

std::string CpuSet::to_list() const {
  std::string out;
  auto v = cpus();
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += '-' + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

std::string CpuSet::to_mask(bool comma_words) const {
  static constexpr char hex[] = "0123456789abcdef";
  size_t nwords32 = std::max<size_t>(1, (static_cast<size_t>(last() + 1) + 31) / 32);
  std::string out;
  for (size_t w = nwords32; w-- > 0;) {
    uint32_t word = static_cast<uint32_t>(w / 2 < words_.size() ? words_[w / 2] >> (w % 2 * 32) : 0);
    if (comma_words) {
      for (int d = 7; d >= 0; --d) out += hex[word >> (d * 4) & 0xf];
      if (w != 0) out += ',';
    } else {
      for (int d = 7; d >= 0; --d) out += hex[word >> (d * 4) & 0xf];
    }
  }
  if (!comma_words) {
    size_t nz = out.find_first_not_of('0');
    out = nz == std::string::npos ? "0" : out.substr(nz);
  }
  return out;
}

}  // namespace keel
