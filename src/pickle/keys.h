// pickle: building dicts and sets with Python's key identity (core/python_key.h) while
// unpickling, with an index the caller keeps beside the items.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/python_key.h"
#include "tensorseal/value.h"

namespace tensorseal::detail::pickle {

// python_key encoding -> position in the items.
using KeyIndex = std::unordered_map<std::string, std::size_t>;

// Inserts into `items` with Python dict semantics (an equal key keeps its first key
// object and takes the new value). Returns false when the key is unhashable.
inline bool dict_set(std::vector<std::pair<Value, Value>>& items, KeyIndex& index, Value key, Value value) {
  std::string enc;
  if (!core::python_key(key, enc)) return false;
  auto [it, inserted] = index.try_emplace(std::move(enc), items.size());
  if (inserted)
    items.emplace_back(std::move(key), std::move(value));
  else
    items[it->second].second = std::move(value);
  return true;
}

// Adds `item` unless an equal one is present. Returns false when it is unhashable.
inline bool set_add(std::vector<Value>& items, KeyIndex& index, Value item) {
  std::string enc;
  if (!core::python_key(item, enc)) return false;
  if (index.try_emplace(std::move(enc), items.size()).second) items.push_back(std::move(item));
  return true;
}

// The index of existing dict items or set items (unhashable ones are left out).
inline KeyIndex index_of(const std::vector<std::pair<Value, Value>>& items) {
  KeyIndex index;
  std::string enc;
  for (std::size_t i = 0; i < items.size(); ++i) {
    enc.clear();
    if (core::python_key(items[i].first, enc)) index.emplace(enc, i);
  }
  return index;
}
inline KeyIndex index_of(const std::vector<Value>& items) {
  KeyIndex index;
  std::string enc;
  for (std::size_t i = 0; i < items.size(); ++i) {
    enc.clear();
    if (core::python_key(items[i], enc)) index.emplace(enc, i);
  }
  return index;
}

}  // namespace tensorseal::detail::pickle
