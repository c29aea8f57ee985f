// Hash tables keyed by node identity (non-null pointers), for the passes over a value
// tree that meet every tensor once: a 10,000-tensor state dict makes 10,000 entries per
// table, and std::unordered_map's allocation per entry (plus freeing them) cost more
// than the work the pass did. Open addressing with linear probing in one array; no
// erase. Iteration order is not defined: use them for lookups only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tensorseal::detail::util {

template <typename V>
class PtrMap {
 public:
  // The value of `key`, or null.
  V* find(const void* key) noexcept {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == nullptr) return nullptr;
    }
  }
  const V* find(const void* key) const noexcept { return const_cast<PtrMap*>(this)->find(key); }
  // Inserts (key, value) unless `key` is present; returns the entry's value and
  // whether it was inserted.
  std::pair<V*, bool> emplace(const void* key, V value) { return put(key, std::move(value), false); }
  // Inserts or replaces.
  V& assign(const void* key, V value) { return *put(key, std::move(value), true).first; }
  std::size_t size() const noexcept { return size_; }
  // Room for `n` entries without growing.
  void reserve(std::size_t n) {
    std::size_t want = 64;
    while (want * 3 < n * 4) want *= 2;
    if (want > slots_.size()) rehash(want);
  }

 private:
  struct Slot {
    const void* key = nullptr;
    V value{};
  };
  std::size_t mask() const noexcept { return slots_.size() - 1; }
  std::size_t home(const void* key) const noexcept {
    // Fibonacci hashing of the address (allocations are 16-byte aligned: low bits are 0).
    const std::uint64_t h = (reinterpret_cast<std::uintptr_t>(key) >> 4) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(h >> 32) & mask();
  }
  std::pair<V*, bool> put(const void* key, V value, bool replace) {
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(std::max<std::size_t>(64, slots_.size() * 2));
    std::size_t i = home(key);
    for (; slots_[i].key != nullptr; i = (i + 1) & mask())
      if (slots_[i].key == key) {
        if (replace) slots_[i].value = std::move(value);
        return {&slots_[i].value, false};
      }
    slots_[i].key = key;
    slots_[i].value = std::move(value);
    ++size_;
    return {&slots_[i].value, true};
  }
  void rehash(std::size_t count) {
    std::vector<Slot> old(count);
    old.swap(slots_);
    for (Slot& s : old) {
      if (s.key == nullptr) continue;
      std::size_t i = home(s.key);
      while (slots_[i].key != nullptr) i = (i + 1) & mask();
      slots_[i].key = s.key;
      slots_[i].value = std::move(s.value);
    }
  }
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

// A set of non-null pointers: insert() says whether the pointer is new.
class PtrSet {
 public:
  bool insert(const void* key) { return map_.emplace(key, Empty{}).second; }
  bool contains(const void* key) const noexcept { return map_.find(key) != nullptr; }
  void reserve(std::size_t n) { map_.reserve(n); }

 private:
  struct Empty {};
  PtrMap<Empty> map_;
};

}  // namespace tensorseal::detail::util
