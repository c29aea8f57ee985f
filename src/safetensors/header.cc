// safetensors header: the one validator, used by read_safetensors (src/safetensors/
// reader.cc) and read_safetensors_index (include/tensorseal/safetensors.h). Grammar
// (docs/formats/safetensors.md):
//
//   file    = u64le N, header[N], buffer
//   header  = ws* '{' entries '}' ws*       (UTF-8 JSON, N <= 100,000,000)
//   entries = ("__metadata__": {str: str, ...})? , name: {"dtype": D, "shape": [u64...],
//             "data_offsets": [begin, end]} ...
//   buffer  = the tensors' bytes; sorted by offsets they tile [0, len(buffer)) exactly,
//             and 8 + N + len(buffer) == file size.
//
// Two ways in, one set of rules:
//   1. FastScanner reads the headers writers make: ASCII strings without escapes,
//      entries of exactly dtype/shape/data_offsets, unsigned integers, metadata of
//      strings. It accepts only that strict subset of JSON, and for anything else
//      (an escape, a non-ASCII name, another field, a float, a duplicate key, a syntax
//      error...) it gives up without judging.
//   2. Then nlohmann's SAX parser reads the header (SaxHandler): it decides what is
//      JSON, and the handler rejects duplicate keys and deep nesting as it goes.
// Both fill one RawHeader (the header's values, unjudged), and validate() checks the
// rules on it in the file's order. So every file gets the same result and the same
// error either way (safetensors_index_test compares the two on hostile headers and on
// random edits of a real one); the scanner only saves time. It is not a JSON parser:
// it recognises one fixed shape and leaves every judgement to nlohmann. Indexing a
// header of 10,000 entries (886 KB) takes about 2.5 ms of CPU with it; nlohmann's
// parser alone, with a handler doing nothing, takes about 15 ms on it.
#include "safetensors/header.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "safetensors/constants.h"
#include "safetensors/structure.h"
#include "util/checked.h"
#include "util/endian.h"
#include "util/text.h"
#include "util/utf8.h"

namespace tensorseal::detail::safetensors {
using json = nlohmann::json;  // std::map-backed; the raw header keeps the file's order

namespace {

constexpr std::uint64_t kAt = safetensors::kLengthPrefixSize;  // entry and metadata errors point at the header
constexpr std::size_t kAbsent = SafetensorsIndex::kAbsent;

// ---- the header's values, before any rule -------------------------------------------

// A field of an entry: absent, in the form the rules expect, or any other JSON value.
enum class Form : std::uint8_t { kAbsent, kExpected, kOther };

struct RawEntry {
  std::string name;
  bool is_object = false;
  Form dtype = Form::kAbsent;       // kExpected: a string
  Form shape = Form::kAbsent;       // kExpected: an array of unsigned integers
  Form offsets = Form::kAbsent;     // kExpected: an array of two unsigned integers
  std::string code;                 // the dtype string
  std::vector<std::int64_t> sizes;  // the shape, each u64 stored as its bit pattern
  std::uint64_t begin = 0, end = 0;
  std::unique_ptr<json> other;  // shape or data_offsets when kOther (for messages)
};

struct RawMeta {
  std::string key;
  bool is_string = false;
  std::string value;
};

enum class MetaForm : std::uint8_t { kAbsent, kObject, kNull, kOther };

struct RawHeader {
  bool is_object = false;         // the header is a JSON object
  std::vector<RawEntry> entries;  // its keys but "__metadata__", file order
  std::size_t metadata_position = kAbsent;
  MetaForm meta = MetaForm::kAbsent;
  std::vector<RawMeta> metadata;       // __metadata__'s items when kObject, file order
  std::vector<std::uint32_t> by_name;  // entries sorted by name, when already computed
};

// Indices of `names` in bytewise order of the names (std::string_view compares as
// unsigned char: UTF-8 in code point order, as Python sorts str). Names of one file
// share long prefixes ("model.layers.12.") that make each comparison a memcmp of them,
// so the sort compares first the 8 bytes after the prefix all names share, as a
// big-endian integer (zero-padded: a smaller key means a smaller name, equal keys
// fall back to the whole names).
template <class Name>
std::vector<std::uint32_t> sort_by_name(std::size_t count, Name&& name) {
  std::size_t common = count == 0 ? 0 : name(0).size();
  for (std::size_t i = 1; i < count && common > 0; ++i) {
    const std::string_view a = name(0), b = name(i);
    std::size_t k = 0;
    const std::size_t limit = std::min(common, b.size());
    while (k < limit && a[k] == b[k]) ++k;
    common = k;
  }
  struct Keyed {
    std::uint64_t key;
    std::string_view name;
    std::uint32_t index;
  };
  std::vector<Keyed> keyed(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::string_view s = name(i);
    unsigned char b[8] = {};
    std::memcpy(b, s.data() + common, std::min<std::size_t>(8, s.size() - common));
    std::uint64_t key = 0;
    for (unsigned char c : b) key = key << 8 | c;
    keyed[i] = {key, s, static_cast<std::uint32_t>(i)};
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const Keyed& a, const Keyed& b) { return a.key != b.key ? a.key < b.key : a.name < b.name; });
  std::vector<std::uint32_t> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = keyed[i].index;
  return out;
}

// ---- 1. the fast scanner --------------------------------------------------------------

class FastScanner {
 public:
  FastScanner(std::string_view text, std::uint64_t max_ndim)
      : p_(text.data()), end_(text.data() + text.size()), max_ndim_(max_ndim) {}

  // True when the whole text is in the subset and has no duplicate key; `out` then
  // holds it. False says nothing about the text.
  bool scan(RawHeader& out) {
    // An entry takes at least 47 bytes: "":{"dtype":"","shape":[],"data_offsets":[0,0]}
    out.entries.reserve(static_cast<std::size_t>(end_ - p_) / 47 + 1);
    ws();
    if (!eat('{')) return false;
    out.is_object = true;
    ws();
    if (!eat('}')) {
      for (;;) {
        std::string_view key;
        if (!str(key)) return false;
        ws();
        if (!eat(':')) return false;
        ws();
        if (key == safetensors::kMetadataKey) {
          if (out.metadata_position != kAbsent) return false;
          out.metadata_position = out.entries.size();
          out.meta = MetaForm::kObject;
          if (!metadata(out.metadata)) return false;
        } else {
          RawEntry& e = out.entries.emplace_back();
          e.name.assign(key);
          if (!entry(e)) return false;
        }
        ws();
        if (eat(',')) {
          ws();
          continue;
        }
        if (!eat('}')) return false;
        break;
      }
    }
    ws();
    if (p_ != end_) return false;
    // Duplicate keys: sorted neighbours. (The SAX parser names the first one.)
    out.by_name =
        sort_by_name(out.entries.size(), [&](std::size_t i) -> std::string_view { return out.entries[i].name; });
    for (std::size_t i = 1; i < out.by_name.size(); ++i)
      if (out.entries[out.by_name[i - 1]].name == out.entries[out.by_name[i]].name) return false;
    std::vector<std::string_view> meta_keys;
    for (const auto& m : out.metadata) meta_keys.push_back(m.key);
    std::sort(meta_keys.begin(), meta_keys.end());
    return std::adjacent_find(meta_keys.begin(), meta_keys.end()) == meta_keys.end();
  }

 private:
  void ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool eat(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  // '"' printable ASCII but '"' and '\' '"'.
  bool str(std::string_view& out) {
    if (!eat('"')) return false;
    const char* s = p_;
    for (; p_ != end_; ++p_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out = {s, static_cast<std::size_t>(p_ - s)};
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
    }
    return false;
  }
  static bool digit(char c) { return c >= '0' && c <= '9'; }
  // '0' | [1-9][0-9]* that fits u64 (JSON has no leading zeros; nlohmann makes a
  // larger integer a float).
  bool uint(std::uint64_t& v) {
    if (p_ == end_ || !digit(*p_)) return false;
    v = 0;
    if (*p_ == '0') {
      ++p_;
      return p_ == end_ || !digit(*p_);
    }
    for (; p_ != end_ && digit(*p_); ++p_) {
      const auto d = static_cast<std::uint64_t>(*p_ - '0');
      if (v > (UINT64_MAX - d) / 10) return false;
      v = v * 10 + d;
    }
    return true;
  }
  // '[' (u64 (',' u64)*)? ']', at most `limit` numbers.
  template <class F>
  bool array(std::uint64_t limit, F&& each) {
    if (!eat('[')) return false;
    ws();
    if (eat(']')) return true;
    for (std::uint64_t count = 1;; ++count) {
      std::uint64_t v;
      if (count > limit || !uint(v)) return false;
      each(v);
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      return eat(']');
    }
  }
  // {"dtype": str, "shape": [u64...], "data_offsets": [u64, u64]} in any order.
  bool entry(RawEntry& e) {
    if (!eat('{')) return false;
    e.is_object = true;
    ws();
    for (;;) {
      std::string_view field;
      if (!str(field)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (field == "dtype" && e.dtype == Form::kAbsent) {
        std::string_view code;
        if (!str(code)) return false;
        e.code.assign(code);
        e.dtype = Form::kExpected;
      } else if (field == "shape" && e.shape == Form::kAbsent) {
        if (!array(max_ndim_, [&](std::uint64_t v) { e.sizes.push_back(static_cast<std::int64_t>(v)); })) return false;
        e.shape = Form::kExpected;
      } else if (field == "data_offsets" && e.offsets == Form::kAbsent) {
        std::uint64_t o[2];
        std::size_t k = 0;
        if (!array(2, [&](std::uint64_t v) { o[k++] = v; }) || k != 2) return false;
        e.begin = o[0];
        e.end = o[1];
        e.offsets = Form::kExpected;
      } else {
        return false;
      }
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      return eat('}') && e.dtype != Form::kAbsent && e.shape != Form::kAbsent && e.offsets != Form::kAbsent;
    }
  }
  // {str: str, ...}
  bool metadata(std::vector<RawMeta>& out) {
    if (!eat('{')) return false;
    ws();
    if (eat('}')) return true;
    for (;;) {
      std::string_view k, v;
      if (!str(k)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (!str(v)) return false;
      out.push_back({std::string(k), true, std::string(v)});
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      return eat('}');
    }
  }

  const char* p_;
  const char* end_;
  std::uint64_t max_ndim_;
};

// ---- 2. nlohmann's SAX parser -----------------------------------------------------------

// Keys of one open object, to reject duplicates: a short list, a hash set once long.
class KeySet {
 public:
  bool insert(const std::string& k) {
    if (big_.empty()) {
      if (std::find(small_.begin(), small_.end(), k) != small_.end()) return false;
      if (small_.size() < 16) {
        small_.push_back(k);
        return true;
      }
      big_.insert(std::make_move_iterator(small_.begin()), std::make_move_iterator(small_.end()));
      small_.clear();
    }
    return big_.insert(k).second;
  }

 private:
  std::vector<std::string> small_;
  std::unordered_set<std::string> big_;
};

// Fills a RawHeader from SAX events. Rejects duplicate keys in every object (legal JSON
// but ambiguous: serde rejects a repeated entry field, and keeps the last of a repeated
// tensor name) and nesting beyond serde_json's recursion limit (at most 127 levels), as
// the events come, so the first such fault in the file is the one reported. The three
// fields of an entry are captured as JSON values (nlohmann's DOM builder) and sorted
// into RawEntry's forms when they end; everything else is only checked.
class SaxHandler {
 public:
  SaxHandler(RawHeader& out, const io::Input& in) : out_(out), in_(in) {}

  bool null() {
    return scalar(Event::kNull, nullptr, [](Dom& d) { return d.null(); });
  }
  bool boolean(bool v) {
    return scalar(Event::kOther, nullptr, [&](Dom& d) { return d.boolean(v); });
  }
  bool number_integer(json::number_integer_t v) {
    return scalar(Event::kOther, nullptr, [&](Dom& d) { return d.number_integer(v); });
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return scalar(Event::kOther, nullptr, [&](Dom& d) { return d.number_unsigned(v); });
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return scalar(Event::kOther, nullptr, [&](Dom& d) { return d.number_float(v, s); });
  }
  bool string(json::string_t& v) {
    return scalar(Event::kString, &v, [&](Dom& d) { return d.string(v); });
  }
  bool binary(json::binary_t& v) {
    return scalar(Event::kOther, nullptr, [&](Dom& d) { return d.binary(v); });
  }
  bool start_object(std::size_t n) {
    open();
    const Role role = value_start(Event::kObject, nullptr);
    if (dom_) dom_->start_object(n);
    frames_.push_back({role, true, Slot::kNone, {}});
    return true;
  }
  bool end_object() {
    return close([](Dom& d) { return d.end_object(); });
  }
  bool start_array(std::size_t n) {
    open();
    const Role role = value_start(Event::kArray, nullptr);
    if (dom_) dom_->start_array(n);
    frames_.push_back({role, false, Slot::kNone, {}});
    return true;
  }
  bool end_array() {
    return close([](Dom& d) { return d.end_array(); });
  }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    if (!f.keys.insert(k))
      fail(rules::kDuplicateKey,
           "key '" + k + "' appears twice in " + (frames_.size() == 1 ? "the header" : "one header object"), in_, kAt);
    switch (f.role) {
      case Role::kTop:
        if (k == safetensors::kMetadataKey) {
          out_.metadata_position = out_.entries.size();
          f.slot = Slot::kMetadata;
        } else {
          out_.entries.emplace_back().name = k;
          f.slot = Slot::kEntry;
        }
        break;
      case Role::kMetadata:
        out_.metadata.push_back({k, false, {}});
        f.slot = Slot::kMetaValue;
        break;
      case Role::kEntry:
        f.slot = k == "dtype"          ? Slot::kDtype
                 : k == "shape"        ? Slot::kShape
                 : k == "data_offsets" ? Slot::kOffsets
                                       : Slot::kNone;
        break;
      case Role::kOther:
        break;
    }
    if (dom_) dom_->key(k);
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    throw e;  // json::parse_error, or out_of_range.406 for a number beyond double (1e999)
  }

 private:
  using Dom = nlohmann::detail::json_sax_dom_parser<json>;
  enum class Event : std::uint8_t { kNull, kString, kObject, kArray, kOther };
  enum class Role : std::uint8_t { kTop, kMetadata, kEntry, kOther };  // of an open container
  // What the next value of an open object is (set by its key).
  enum class Slot : std::uint8_t { kNone, kEntry, kMetadata, kMetaValue, kDtype, kShape, kOffsets };
  struct Frame {
    Role role;
    bool object;
    Slot slot = Slot::kNone;
    KeySet keys;
  };

  void open() {
    if (frames_.size() + 1 >= safetensors::kMaxJsonDepth)
      fail(rules::kHeaderJson, fmt::format("header nests deeper than {} levels", safetensors::kMaxJsonDepth - 1), in_,
           kAt);
  }

  // Called as every value starts; returns the role a container value gets.
  Role value_start(Event ev, const json::string_t* s) {
    if (frames_.empty()) {  // the header itself
      out_.is_object = ev == Event::kObject;
      return out_.is_object ? Role::kTop : Role::kOther;
    }
    Frame& f = frames_.back();
    const Slot slot = f.slot;
    f.slot = Slot::kNone;
    switch (slot) {
      case Slot::kNone:
        return Role::kOther;
      case Slot::kEntry:
        if (ev != Event::kObject) return Role::kOther;
        out_.entries.back().is_object = true;
        return Role::kEntry;
      case Slot::kMetadata:
        out_.meta = ev == Event::kObject ? MetaForm::kObject : ev == Event::kNull ? MetaForm::kNull : MetaForm::kOther;
        return ev == Event::kObject ? Role::kMetadata : Role::kOther;
      case Slot::kMetaValue:
        if (ev == Event::kString) {
          out_.metadata.back().is_string = true;
          out_.metadata.back().value = *s;
        }
        return Role::kOther;
      case Slot::kDtype:
      case Slot::kShape:
      case Slot::kOffsets:
        captured_ = json();
        dom_.emplace(captured_);
        capture_slot_ = slot;
        capture_depth_ = frames_.size();
        return Role::kOther;
    }
    return Role::kOther;
  }

  template <class F>
  bool scalar(Event ev, const json::string_t* s, F&& forward) {
    value_start(ev, s);
    if (dom_) {
      forward(*dom_);
      if (frames_.size() == capture_depth_) end_capture();
    }
    return true;
  }

  template <class F>
  bool close(F&& forward) {
    frames_.pop_back();
    if (dom_) {
      forward(*dom_);
      if (frames_.size() == capture_depth_) end_capture();
    }
    return true;
  }

  // An entry field's value is complete: sort it into its form.
  void end_capture() {
    dom_.reset();
    RawEntry& e = out_.entries.back();
    json& v = captured_;
    auto unsigned_array = [](const json& a) {
      return a.is_array() && std::all_of(a.begin(), a.end(), [](const json& d) { return d.is_number_unsigned(); });
    };
    switch (capture_slot_) {
      case Slot::kDtype:
        e.dtype = v.is_string() ? Form::kExpected : Form::kOther;
        if (v.is_string()) e.code = v.get<std::string>();
        break;
      case Slot::kShape:
        if (unsigned_array(v)) {
          e.shape = Form::kExpected;
          for (const auto& d : v) e.sizes.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
        } else {
          e.shape = Form::kOther;
          e.other = std::make_unique<json>(std::move(v));
        }
        break;
      case Slot::kOffsets:
        if (unsigned_array(v) && v.size() == 2) {
          e.offsets = Form::kExpected;
          e.begin = v[0].get<std::uint64_t>();
          e.end = v[1].get<std::uint64_t>();
        } else {
          e.offsets = Form::kOther;
          e.other = std::make_unique<json>(std::move(v));
        }
        break;
      default:
        break;
    }
    capture_depth_ = kAbsent;
  }

  RawHeader& out_;
  const io::Input& in_;
  std::vector<Frame> frames_;  // open objects and arrays
  std::optional<Dom> dom_;     // capturing an entry field's value into captured_
  json captured_;
  Slot capture_slot_ = Slot::kNone;
  std::size_t capture_depth_ = kAbsent;
};

// ---- the rules ----------------------------------------------------------------------

// The shape as the file wrote it (JSON), for messages.
std::string shape_text(const RawEntry& r) {
  if (r.shape == Form::kOther) return r.other->dump();
  json a = json::array();
  for (auto d : r.sizes) a.push_back(static_cast<std::uint64_t>(d));
  return a.dump();
}

// Remembers the few distinct dtype codes of a file (10,000 entries, ~8 codes).
class DtypeCodes {
 public:
  std::optional<DType> lookup(const std::string& code) {
    for (const auto& [c, d] : seen_)
      if (c == code) return d;
    auto d = dtype_from_safetensors(code);
    if (d && seen_.size() < 32) seen_.emplace_back(code, *d);
    return d;
  }

 private:
  std::vector<std::pair<std::string, DType>> seen_;
};

SafetensorsEntry check_entry(RawEntry& r, const io::Input& in, DtypeCodes& codes) {
  const std::string& name = r.name;
  if (!r.is_object) fail(rules::kEntryType, "entry '" + name + "' is not a JSON object", in, kAt);
  for (auto [form, field] : {std::pair{r.dtype, "dtype"}, {r.shape, "shape"}, {r.offsets, "data_offsets"}})
    if (form == Form::kAbsent) fail(rules::kEntryType, fmt::format("entry '{}' has no \"{}\"", name, field), in, kAt);
  if (r.dtype != Form::kExpected) fail(rules::kEntryType, "entry '" + name + "': dtype is not a string", in, kAt);
  const auto dtype = codes.lookup(r.code);
  if (!dtype)
    fail(rules::kUnknownDtype, fmt::format("entry '{}': unknown dtype {}", name, json(r.code).dump()), in, kAt);
  const std::uint64_t max_ndim = in.options->limits.max_ndim;
  auto too_many_dims = [&](std::size_t ndim) {
    fail(rules::kBadShape, fmt::format("entry '{}': {} dimensions exceed the limit", name, ndim), in, kAt);
  };
  auto not_sizes = [&] {
    fail(rules::kBadShape, fmt::format("entry '{}': shape {} is not a list of sizes", name, shape_text(r)), in, kAt);
  };
  if (r.shape == Form::kOther) {
    if (!r.other->is_array()) fail(rules::kBadShape, "entry '" + name + "': shape is not an array", in, kAt);
    if (r.other->size() > max_ndim) too_many_dims(r.other->size());
    not_sizes();  // an array holding something else than unsigned integers
  }
  if (r.sizes.size() > max_ndim) too_many_dims(r.sizes.size());
  for (auto d : r.sizes)
    if (static_cast<std::uint64_t>(d) > static_cast<std::uint64_t>(INT64_MAX)) not_sizes();
  if (r.offsets != Form::kExpected)
    fail(rules::kBadOffsets, fmt::format("entry '{}': data_offsets {} is not [begin, end]", name, r.other->dump()), in,
         kAt);
  if (r.begin > r.end)
    fail(rules::kBadOffsets, fmt::format("entry '{}': data_offsets begin {} > end {}", name, r.begin, r.end), in, kAt);
  // Size check with overflow-checked arithmetic: numel * bits / 8 == end - begin.
  std::uint64_t numel = 1;
  for (auto d : r.sizes) {
    auto m = util::mul(numel, static_cast<std::uint64_t>(d));
    if (!m) fail(rules::kSizeOverflow, "entry '" + name + "': element count overflows", in, kAt);
    numel = *m;
  }
  // A zero-size shape's strides must fit too (torch refuses to build the tensor).
  if (!util::stride_span(r.sizes))
    fail(rules::kSizeOverflow, "entry '" + name + "': strides overflow 64 bits", in, kAt);
  const auto bits = info(*dtype).bits;
  auto total_bits = util::mul(numel, bits);
  if (!total_bits) fail(rules::kSizeOverflow, "entry '" + name + "': byte size overflows", in, kAt);
  if (*total_bits % 8 != 0)
    fail(rules::kMisaligned,
         fmt::format("entry '{}': {} elements of {} bits do not fill whole bytes", name, numel, bits), in, kAt);
  if (*total_bits / 8 != r.end - r.begin)
    fail(rules::kSizeMismatch,
         fmt::format("entry '{}': shape {} of {} needs {} bytes, data_offsets give {}", name, shape_text(r), r.code,
                     *total_bits / 8, r.end - r.begin),
         in, kAt);
  return {std::move(r.name), *dtype, std::move(r.sizes), r.begin, r.end};
}

// The rules on the parsed header, in the file's order; then the tiling of the buffer.
SafetensorsIndex validate(RawHeader& raw, const io::Input& in, std::uint64_t n) {
  if (!raw.is_object) fail(rules::kHeaderNotObject, "header is not a JSON object", in, kAt);
  const std::size_t keys = raw.entries.size() + (raw.metadata_position != kAbsent ? 1 : 0);
  if (keys > in.options->limits.max_entries)
    fail(rules::kTooManyTensors, fmt::format("{} entries exceed the limit", keys), in, kAt);

  SafetensorsIndex idx;
  idx.entries.reserve(raw.entries.size());
  DtypeCodes codes;
  for (std::size_t i = 0; i <= raw.entries.size(); ++i) {
    if (i == raw.metadata_position) {
      if (raw.meta == MetaForm::kOther) fail(rules::kMetadataType, "__metadata__ is not an object of strings", in, kAt);
      for (auto& m : raw.metadata) {
        if (!m.is_string) fail(rules::kMetadataType, "__metadata__ value for '" + m.key + "' is not a string", in, kAt);
        idx.metadata.emplace_back(std::move(m.key), std::move(m.value));
      }
    }
    if (i < raw.entries.size()) idx.entries.push_back(check_entry(raw.entries[i], in, codes));
  }
  idx.metadata_position = raw.metadata_position;
  idx.metadata_null = raw.metadata_position != kAbsent && raw.meta == MetaForm::kNull;
  idx.by_name = raw.by_name.size() == idx.entries.size() ? std::move(raw.by_name) : std::vector<std::uint32_t>{};

  // Tiling: sorted by (begin, end) the tensors cover the buffer from 0 with no gap or
  // overlap; the buffer ends exactly at the end of the file.
  const auto& entries = idx.entries;
  std::vector<std::uint32_t> order(entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  auto before = [&](std::uint32_t a, std::uint32_t b) {
    return std::pair(entries[a].begin, entries[a].end) < std::pair(entries[b].begin, entries[b].end);
  };
  // Writers list entries in data order; a strictly increasing order is the only result
  // std::sort can give, so it is kept as is (with ties std::sort decides, as before).
  bool strictly_sorted = true;
  for (std::size_t i = 1; i < order.size() && strictly_sorted; ++i) strictly_sorted = before(order[i - 1], order[i]);
  if (!strictly_sorted) std::sort(order.begin(), order.end(), before);
  const std::uint64_t file_size = in.size();
  const std::uint64_t data_start = safetensors::kLengthPrefixSize + n;
  std::uint64_t cursor = 0;
  for (std::uint32_t i : order) {
    const SafetensorsEntry& e = entries[i];
    if (e.begin != cursor)
      fail(rules::kTiling,
           fmt::format("tensor '{}' starts at buffer offset {}, expected {}{}", e.name, e.begin, cursor,
                       e.begin < cursor ? " (overlap)" : " (gap)"),
           in, data_start + std::min({e.begin, cursor, file_size - data_start}));
    cursor = e.end;
  }
  const std::uint64_t buffer_len = file_size - data_start;
  if (cursor != buffer_len)
    fail(rules::kBufferLength, fmt::format("tensors cover {} bytes of a {}-byte data buffer", cursor, buffer_len), in,
         data_start + std::min(cursor, buffer_len));
  idx.by_offset = std::move(order);
  idx.header_length = n;
  idx.data_start = data_start;
  return idx;
}

}  // namespace

SafetensorsIndex index_safetensors(const io::Input& in, bool fast_scan) {
  const auto bytes = in.bytes();
  if (bytes.size() < safetensors::kLengthPrefixSize)
    fail(rules::kFileTooSmall, fmt::format("file of {} bytes has no header length", bytes.size()), in, 0);
  const std::uint64_t n = util::load_le<std::uint64_t>(bytes.data());
  const std::uint64_t cap = std::min(safetensors::kMaxHeaderSize, in.options->limits.max_safetensors_header);
  if (n > cap) fail(rules::kHeaderTooLarge, fmt::format("header length {} exceeds the limit {}", n, cap), in, 0);
  if (n > bytes.size() - safetensors::kLengthPrefixSize)
    fail(rules::kHeaderLength,
         fmt::format("header length {} runs past the end of the file ({} bytes)", n, bytes.size()), in, 0);
  const std::string_view text = util::as_chars(bytes.subspan(safetensors::kLengthPrefixSize, n));
  if (!util::is_ascii(text))
    if (auto bad = util::first_invalid_utf8(text))
      fail(rules::kHeaderUtf8, "header is not valid UTF-8", in, safetensors::kLengthPrefixSize + *bad);
  // A raw NUL is never valid JSON (not whitespace, and control characters in strings
  // must be escaped), but nlohmann's lexer takes it as the end of input: without this
  // check "{...}\0<anything>" would parse, hiding bytes in the header.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    fail(rules::kHeaderJson, "header has a NUL byte (NUL is not JSON)", in, safetensors::kLengthPrefixSize + nul);

  RawHeader raw;
  if (!fast_scan || !FastScanner(text, in.options->limits.max_ndim).scan(raw)) {
    raw = RawHeader{};
    SaxHandler sax(raw, in);
    try {
      json::sax_parse(text.begin(), text.end(), &sax);
    } catch (const json::parse_error& e) {
      fail(rules::kHeaderJson, fmt::format("header is not JSON: {}", e.what()), in,
           safetensors::kLengthPrefixSize + (e.byte > 0 ? e.byte - 1 : 0));
    } catch (const json::exception& e) {  // out_of_range.406: a number beyond double (1e999)
      fail(rules::kHeaderJson, fmt::format("header is not JSON: {}", e.what()), in, safetensors::kLengthPrefixSize);
    }
  }

  SafetensorsIndex idx = validate(raw, in, n);
  if (idx.by_name.size() != idx.entries.size())
    idx.by_name =
        sort_by_name(idx.entries.size(), [&](std::size_t i) -> std::string_view { return idx.entries[i].name; });
  while (idx.header_padding < text.size() && text[text.size() - 1 - idx.header_padding] == ' ') ++idx.header_padding;
  idx.file = in.name;
  idx.whole = in.whole;
  return idx;
}

}  // namespace tensorseal::detail::safetensors

namespace tensorseal {

const SafetensorsEntry* SafetensorsIndex::find(std::string_view name) const noexcept {
  auto it = std::lower_bound(by_name.begin(), by_name.end(), name, [&](std::uint32_t i, std::string_view n) {
    return std::string_view(entries[i].name) < n;
  });
  if (it == by_name.end() || entries[*it].name != name) return nullptr;
  return &entries[*it];
}

std::shared_ptr<const Tensor> SafetensorsIndex::tensor(const SafetensorsEntry& e) const {
  auto storage = Storage::slice(whole, data_start + e.begin, e.end - e.begin);
  // F4 with an even last dimension is torch.float4_e2m1fn_x2 (two fp4 values per
  // element, that dimension halved), as safetensors' torch binding reads it and as
  // the writer stores x2 tensors; other F4 tensors stay packed float4_e2m1fn.
  if (e.dtype == DType::kFloat4E2M1FN && !e.shape.empty() && e.shape.back() % 2 == 0) {
    auto shape = e.shape;
    shape.back() /= 2;
    storage->dtype = DType::kFloat4E2M1FNx2;
    return make_contiguous(DType::kFloat4E2M1FNx2, std::move(shape), std::move(storage));
  }
  storage->dtype = e.dtype;
  return make_contiguous(e.dtype, e.shape, std::move(storage));
}

bool SafetensorsIndex::structured() const noexcept {
  return std::any_of(metadata.begin(), metadata.end(),
                     [](const auto& kv) { return kv.first == detail::safetensors::kStructureKey; });
}

SafetensorsIndex read_safetensors_index(std::shared_ptr<const MappedFile> file, const ReadOptions& options) {
  SafetensorsIndex idx = detail::safetensors::index_safetensors(detail::io::input_of(file, options));
  idx.mapping = std::move(file);
  return idx;
}

SafetensorsIndex read_safetensors_index(const std::filesystem::path& path, const ReadOptions& options) {
  return read_safetensors_index(MappedFile::open(path), options);
}

SafetensorsIndex read_safetensors_index(std::span<const std::byte> bytes, std::string name,
                                        const ReadOptions& options) {
  detail::io::Input in;
  in.name = std::move(name);
  in.whole = Storage::owned(std::vector<std::byte>(bytes.begin(), bytes.end()));
  in.options = &options;
  return detail::safetensors::index_safetensors(in);
}

}  // namespace tensorseal
