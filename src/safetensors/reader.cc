// safetensors reader. Grammar (docs/formats/safetensors.md):
//
//   file    = u64le N, header[N], buffer
//   header  = ws* '{' entries '}' ws*       (UTF-8 JSON, N <= 100,000,000)
//   entries = ("__metadata__": {str: str, ...})? , name: {"dtype": D, "shape": [u64...],
//             "data_offsets": [begin, end]} ...
//   buffer  = the tensors' bytes; sorted by offsets they tile [0, len(buffer)) exactly,
//             and 8 + N + len(buffer) == file size.
//
// Tensors are zero-copy windows of the input. Every rule broken has its own error.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "io/input.h"
#include "safetensors/constants.h"
#include "safetensors/structure.h"
#include "util/checked.h"
#include "util/endian.h"
#include "util/utf8.h"

namespace tensorseal::detail {
namespace st = tensorseal::safetensors;
// std::map-backed: nlohmann::ordered_json inserts by linear search (quadratic in the
// number of tensors). HeaderParser records the keys' order instead.
using json = nlohmann::json;

namespace {

struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin, end;
};

[[noreturn]] void fail(const Rule& r, std::string detail, const Input& in, std::uint64_t offset) {
  throw Error(r, std::move(detail), in.name, offset);
}

Entry parse_entry(const std::string& name, const json& v, const Input& in) {
  constexpr std::uint64_t kAt = st::kLengthPrefixSize;
  if (!v.is_object()) fail(st::rules::kEntryType, "entry '" + name + "' is not a JSON object", in, kAt);
  auto field = [&](const char* f) -> const json& {
    auto it = v.find(f);
    if (it == v.end()) fail(st::rules::kEntryType, "entry '" + name + "' has no \"" + f + "\"", in, kAt);
    return *it;
  };
  const json& dt = field("dtype");
  const json& shape = field("shape");
  const json& offs = field("data_offsets");
  if (!dt.is_string()) fail(st::rules::kEntryType, "entry '" + name + "': dtype is not a string", in, kAt);
  auto dtype = dtype_from_safetensors(dt.get_ref<const std::string&>());
  if (!dtype) fail(st::rules::kUnknownDtype, "entry '" + name + "': unknown dtype " + dt.dump(), in, kAt);
  Entry e{name, *dtype, {}, 0, 0};
  if (!shape.is_array()) fail(st::rules::kBadShape, "entry '" + name + "': shape is not an array", in, kAt);
  if (shape.size() > in.options->limits.max_ndim)
    fail(st::rules::kBadShape, "entry '" + name + "': " + std::to_string(shape.size()) + " dimensions exceed the limit", in, kAt);
  for (const auto& d : shape) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail(st::rules::kBadShape, "entry '" + name + "': shape " + shape.dump() + " is not a list of sizes", in, kAt);
    e.shape.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
  }
  if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
    fail(st::rules::kBadOffsets, "entry '" + name + "': data_offsets " + offs.dump() + " is not [begin, end]", in, kAt);
  e.begin = offs[0].get<std::uint64_t>();
  e.end = offs[1].get<std::uint64_t>();
  if (e.begin > e.end)
    fail(st::rules::kBadOffsets, "entry '" + name + "': data_offsets begin " + std::to_string(e.begin) + " > end " + std::to_string(e.end), in, kAt);
  // Size check with overflow-checked arithmetic: numel * bits / 8 == end - begin.
  std::uint64_t numel = 1;
  for (auto d : e.shape) {
    auto m = util::mul(numel, static_cast<std::uint64_t>(d));
    if (!m) fail(st::rules::kSizeOverflow, "entry '" + name + "': element count overflows", in, kAt);
    numel = *m;
  }
  const auto bits = info(e.dtype).bits;
  auto total_bits = util::mul(numel, bits);
  if (!total_bits) fail(st::rules::kSizeOverflow, "entry '" + name + "': byte size overflows", in, kAt);
  if (*total_bits % 8 != 0)
    fail(st::rules::kMisaligned, "entry '" + name + "': " + std::to_string(numel) + " elements of " +
                                     std::to_string(bits) + " bits do not fill whole bytes", in, kAt);
  if (*total_bits / 8 != e.end - e.begin)
    fail(st::rules::kSizeMismatch, "entry '" + name + "': shape " + shape.dump() + " of " + dt.get<std::string>() +
                                       " needs " + std::to_string(*total_bits / 8) + " bytes, data_offsets give " +
                                       std::to_string(e.end - e.begin), in, kAt);
  return e;
}

// Builds the header DOM (nlohmann's own SAX DOM builder) and, on the way, rejects
// duplicate keys and deep nesting and records the order of the top-level keys and of
// __metadata__'s keys (json is std::map-backed: it does not keep the file's order).
class HeaderParser {
 public:
  using Dom = nlohmann::detail::json_sax_dom_parser<json>;
  HeaderParser(json& out, const Input& in) : dom_(out), in_(in) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    open(true);
    return dom_.start_object(n);
  }
  bool end_object() {
    keys_.pop_back();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    open(false);
    return dom_.start_array(n);
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool key(json::string_t& k) {
    if (!keys_.back().insert(k).second)
      fail(st::rules::kDuplicateKey, "key '" + k + "' appears twice in " +
                                         (depth_ == 1 ? "the header" : "one header object"), in_, st::kLengthPrefixSize);
    if (depth_ == 1) {
      header_order.push_back(k);
      in_metadata_ = k == st::kMetadataKey;
    } else if (depth_ == 2 && in_metadata_) {
      metadata_order.push_back(k);
    }
    return dom_.key(k);
  }
  template <class Exception>
  bool parse_error(std::size_t pos, const std::string& token, const Exception& e) {
    return dom_.parse_error(pos, token, e);  // throws e
  }

  std::vector<std::string> header_order, metadata_order;  // keys as the file lists them

 private:
  void open(bool object) {
    if (depth_ + 1 >= static_cast<int>(st::kMaxJsonDepth))
      fail(st::rules::kHeaderJson, "header nests deeper than " + std::to_string(st::kMaxJsonDepth - 1) + " levels",
           in_, st::kLengthPrefixSize);
    ++depth_;
    if (object) keys_.emplace_back();
  }

  Dom dom_;
  const Input& in_;
  int depth_ = 0;  // open objects and arrays
  std::vector<std::unordered_set<std::string>> keys_;  // keys of each open object
  bool in_metadata_ = false;  // inside "__metadata__": {...}
};

}  // namespace

Checkpoint read_safetensors(const Input& in) {
  const auto bytes = in.bytes();
  if (bytes.size() < st::kLengthPrefixSize)
    fail(st::rules::kFileTooSmall, "file of " + std::to_string(bytes.size()) + " bytes has no header length", in, 0);
  const std::uint64_t n = util::load_le<std::uint64_t>(bytes.data());
  const std::uint64_t cap = std::min(st::kMaxHeaderSize, in.options->limits.max_safetensors_header);
  if (n > cap)
    fail(st::rules::kHeaderTooLarge, "header length " + std::to_string(n) + " exceeds the limit " + std::to_string(cap), in, 0);
  if (n > bytes.size() - st::kLengthPrefixSize)
    fail(st::rules::kHeaderLength, "header length " + std::to_string(n) + " runs past the end of the file (" +
                                       std::to_string(bytes.size()) + " bytes)", in, 0);
  const std::string_view text = util::as_chars(bytes.subspan(st::kLengthPrefixSize, n));
  if (auto bad = util::first_invalid_utf8(text))
    fail(st::rules::kHeaderUtf8, "header is not valid UTF-8", in, st::kLengthPrefixSize + *bad);
  // A raw NUL is never valid JSON (not whitespace, and control characters in strings
  // must be escaped), but nlohmann's lexer takes it as the end of input: without this
  // check "{...}\0<anything>" would parse, hiding bytes in the header.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    fail(st::rules::kHeaderJson, "header has a NUL byte (NUL is not JSON)", in, st::kLengthPrefixSize + nul);

  // Duplicate keys are legal JSON but ambiguous: reject them in every object (serde
  // rejects a repeated entry field, and keeps the last of a repeated tensor name).
  // Nesting is capped like serde_json's recursion limit: at most 127 levels.
  // A SAX handler checks both while it builds the DOM and records the keys' order. (Not
  // json::parse with a callback: its parser rescans the parent object after every
  // nested object, which made a 10,000-tensor header take 180 ms.)
  json header;
  HeaderParser sax(header, in);
  try {
    json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const json::parse_error& e) {
    fail(st::rules::kHeaderJson, std::string("header is not JSON: ") + e.what(), in,
         st::kLengthPrefixSize + (e.byte > 0 ? e.byte - 1 : 0));
  } catch (const json::exception& e) {  // out_of_range.406: a number beyond double (1e999)
    fail(st::rules::kHeaderJson, std::string("header is not JSON: ") + e.what(), in, st::kLengthPrefixSize);
  }
  const std::vector<std::string>& header_order = sax.header_order;
  const std::vector<std::string>& metadata_order = sax.metadata_order;
  if (!header.is_object()) fail(st::rules::kHeaderNotObject, "header is not a JSON object", in, st::kLengthPrefixSize);
  if (header.size() > in.options->limits.max_entries)
    fail(st::rules::kTooManyTensors, std::to_string(header.size()) + " entries exceed the limit", in, st::kLengthPrefixSize);

  Checkpoint c;
  c.format = Format::kSafetensors;
  std::vector<Entry> entries;
  entries.reserve(header.size());
  for (const std::string& key : header_order) {  // file order; each key once (checked above)
    const json& value = header.at(key);
    if (key == st::kMetadataKey) {
      if (!value.is_object() && !value.is_null())
        fail(st::rules::kMetadataType, "__metadata__ is not an object of strings", in, st::kLengthPrefixSize);
      if (value.is_object())
        for (const std::string& m : metadata_order) {
          const json& v = value.at(m);
          if (!v.is_string())
            fail(st::rules::kMetadataType, "__metadata__ value for '" + m + "' is not a string", in, st::kLengthPrefixSize);
          c.metadata.emplace_back(m, v.get<std::string>());
        }
      continue;
    }
    entries.push_back(parse_entry(key, value, in));
  }

  // Tiling: sorted by (begin, end) the tensors cover the buffer from 0 with no gap or
  // overlap; the buffer ends exactly at the end of the file.
  std::vector<std::size_t> order(entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(entries[a].begin, entries[a].end) < std::pair(entries[b].begin, entries[b].end);
  });
  const std::uint64_t data_start = st::kLengthPrefixSize + n;
  std::uint64_t cursor = 0;
  for (std::size_t i : order) {
    const Entry& e = entries[i];
    if (e.begin != cursor)
      fail(st::rules::kTiling, "tensor '" + e.name + "' starts at buffer offset " + std::to_string(e.begin) +
                                   ", expected " + std::to_string(cursor) + (e.begin < cursor ? " (overlap)" : " (gap)"),
           in, data_start + std::min({e.begin, cursor, bytes.size() - data_start}));
    cursor = e.end;
  }
  const std::uint64_t buffer_len = bytes.size() - data_start;
  if (cursor != buffer_len)
    fail(st::rules::kBufferLength, "tensors cover " + std::to_string(cursor) + " bytes of a " +
                                       std::to_string(buffer_len) + "-byte data buffer", in, data_start + std::min(cursor, buffer_len));

  // Value tree: a plain dict in data order (the order safetensors' writer chose).
  c.root = Value::dict();
  Dict& d = c.root.as_dict();
  d.items.reserve(entries.size());
  for (std::size_t i : order) {
    const Entry& e = entries[i];
    auto storage = in.window(data_start + e.begin, e.end - e.begin);
    storage->dtype = e.dtype;
    d.items.emplace_back(Value::str(e.name), Value(make_contiguous(e.dtype, e.shape, std::move(storage))));
  }

  // A whole checkpoint written by tensorseal: restore the tree (structure.h).
  namespace ss = safetensors_structure;
  for (auto it = c.metadata.begin(); it != c.metadata.end(); ++it) {
    if (it->first != ss::kStructureKey) continue;
    try {
      c.root = ss::unflatten(it->second, c.root, in.name);
    } catch (const nlohmann::json::exception& e) {
      fail(st::rules::kBadStructure, std::string("tensorseal.structure does not fit the file: ") + e.what(), in,
           st::kLengthPrefixSize);
    }
    c.metadata.erase(it);
    c.facts.push_back({"safetensors.structure", "__metadata__", "tensorseal.structure (whole checkpoint)"});
    break;
  }

  // Facts that shape the bytes without being content, for `explain`.
  std::uint64_t trailing_spaces = 0;
  while (trailing_spaces < text.size() && text[text.size() - 1 - trailing_spaces] == ' ') ++trailing_spaces;
  c.facts.push_back({"safetensors.header_length", "byte 0", std::to_string(n)});
  c.facts.push_back({"safetensors.header_padding", "header end", std::to_string(trailing_spaces) + " spaces"});
  std::string key_order;
  for (const auto& k : header_order) key_order += (key_order.empty() ? "" : ",") + k;
  c.facts.push_back({"safetensors.key_order", "header", key_order});
  std::string meta_order;
  for (const auto& [k, v] : c.metadata) meta_order += (meta_order.empty() ? "" : ",") + k;
  c.facts.push_back({"safetensors.metadata_order", "__metadata__", meta_order});
  return c;
}

}  // namespace tensorseal::detail
