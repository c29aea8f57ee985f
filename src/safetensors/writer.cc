// safetensors writer: canonical, and byte-identical to safetensors.torch.save_file.
//
//   u64le(N) '{' ["__metadata__":{k:v,...},] name:{"dtype":D,"shape":[...],"data_offsets":[b,e]},... '}'
//   ' ' * pad   (N is a multiple of 8)
//   tensor bytes in the same order, row-major, no gaps
//
// Order: tensors by dtype descending in safetensors' enum order, then name bytewise
// (what safetensors does); __metadata__ keys sorted bytewise (safetensors' own order
// is a HashMap's and changes between runs; with one key both agree). JSON is compact
// with serde_json's escaping, so the header bytes match. torch.float4_e2m1fn_x2 is
// written as F4 with the last dimension doubled, as safetensors' torch binding does.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "safetensors/constants.h"
#include "safetensors/format.h"
#include "safetensors/layout.h"
#include "safetensors/structure.h"
#include "util/endian.h"

namespace tensorseal::detail::safetensors {

namespace {

int dtype_rank(std::string_view code) {
  for (std::size_t i = 0; i < std::size(safetensors::kDtypeOrder); ++i)
    if (safetensors::kDtypeOrder[i] == code) return static_cast<int>(i);
  return -1;
}

// serde_json's string escaping: quote, backslash and C0 controls; everything else raw.
void json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  std::size_t plain = 0;  // the prefix without a character to escape goes in one append
  while (plain < s.size()) {
    const auto c = static_cast<unsigned char>(s[plain]);
    if (c < 0x20 || c == '"' || c == '\\') break;
    ++plain;
  }
  out.append(s.data(), plain);
  for (char ch : s.substr(plain)) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else
          out += ch;
    }
  }
  out += '"';
}

// Decimal digits of `x`, appended without a temporary string.
void append_number(std::string& out, std::uint64_t x) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, x).ptr;
  out.append(buf, end);
}

}  // namespace

Item item_of(std::string_view name, DType dtype, std::span<const std::int64_t> shape, std::uint64_t nbytes) {
  if (name == safetensors::kMetadataKey) throw Error(rules::kReservedName, "a tensor cannot be named __metadata__");
  auto code = info(dtype).safetensors;
  if (dtype == DType::kFloat4E2M1FNx2 && !shape.empty()) code = "F4";  // see the shape in plan()
  if (code.empty())
    throw Error(rules::kDtypeUnsupported, "tensor '" + std::string(name) + "' has dtype " +
                                              std::string(tensorseal::name(dtype)) +
                                              ", which safetensors cannot store");
  return {name, dtype, shape, nbytes, code, dtype_rank(code), 0, nullptr};
}

Layout plan(std::vector<Item> items, const WriteOptions& options) {
  for (std::size_t i = 0; i < items.size(); ++i) items[i].index = i;
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.name < b.name;
  });

  std::string header = "{";
  header.reserve(64 * items.size() + 64);
  const bool has_metadata = !options.metadata.empty() || options.empty_metadata;
  if (has_metadata) {
    auto meta = options.metadata;
    std::sort(meta.begin(), meta.end());
    header += "\"__metadata__\":{";
    for (std::size_t i = 0; i < meta.size(); ++i) {
      if (i && meta[i].first == meta[i - 1].first)
        throw Error(rules::kDuplicateKey, "metadata key '" + meta[i].first + "' given twice");
      if (i) header += ',';
      json_string(header, meta[i].first);
      header += ':';
      json_string(header, meta[i].second);
    }
    header += '}';
  }
  Layout out;
  out.data_offset.resize(items.size());
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    if (i || has_metadata) header += ',';
    json_string(header, it.name);
    header += ":{\"dtype\":\"";
    header += it.code;
    header += "\",\"shape\":[";
    for (std::size_t d = 0; d < it.shape.size(); ++d) {
      if (d) header += ',';
      // torch.float4_e2m1fn_x2 packs two fp4 values per element; safetensors' torch
      // binding stores it as F4 with the last dimension doubled, and so do we.
      const bool x2_last = it.dtype == DType::kFloat4E2M1FNx2 && d + 1 == it.shape.size();
      append_number(header, static_cast<std::uint64_t>(x2_last ? it.shape[d] * 2 : it.shape[d]));
    }
    const std::uint64_t end = offset + it.nbytes;
    header += "],\"data_offsets\":[";
    append_number(header, offset);
    header += ',';
    append_number(header, end);
    header += "]}";
    out.data_offset[it.index] = offset;
    offset = end;
  }
  header += '}';
  if (header.size() > safetensors::kMaxHeaderSize)  // safetensors' serialize() refuses it too
    throw Error(rules::kHeaderTooLarge,
                fmt::format("header of {} bytes exceeds {}", header.size(), safetensors::kMaxHeaderSize));
  header.append(
      (safetensors::kHeaderAlignment - header.size() % safetensors::kHeaderAlignment) % safetensors::kHeaderAlignment,
      ' ');
  util::append_le<std::uint64_t>(out.head, header.size());
  out.head += header;
  for (auto& o : out.data_offset) o += out.head.size();
  out.items = std::move(items);
  return out;
}

namespace {
void write_flat(const Value& root, const WriteOptions& options, io::Sink& sink);
}  // namespace

void write_safetensors(const Value& root, const WriteOptions& options, io::Sink& sink) {
  if (safetensors::is_flat(root)) {
    write_flat(root, options, sink);
    return;
  }
  {
    // A whole checkpoint: flat tensors plus the tree in __metadata__ (structure.h).
    for (const auto& [k, v] : options.metadata)
      if (k == safetensors::kStructureKey)
        throw Error(rules::kReservedName, "metadata key '" + k + "' is reserved for tensorseal");
    safetensors::Flattened f = safetensors::flatten(root);
    WriteOptions o = options;
    o.metadata.emplace_back(std::string(safetensors::kStructureKey), std::move(f.structure));
    write_flat(f.flat, o, sink);
  }
}

std::vector<Item> flat_items(const Value& root) {
  if (!root.is(Value::Kind::kDict))
    throw Error(rules::kNotFlat,
                "safetensors holds a dict of named tensors; got " + std::string(kind_name(root.kind())));
  std::vector<Item> items;
  items.reserve(root.as_dict().items.size());
  for (const auto& [k, v] : root.as_dict().items) {
    if (!k.is(Value::Kind::kStr) || !v.is(Value::Kind::kTensor))
      throw Error(rules::kNotFlat, "safetensors holds str -> tensor entries; got " + repr(k, 60) + " -> " +
                                       std::string(kind_name(v.kind())));
    const Tensor& t = *v.as_tensor();
    Item it = item_of(k.as_str(), t.dtype, t.shape, t.nbytes());
    t.validate();
    it.tensor = &t;
    items.push_back(it);
  }
  return items;
}

namespace {
// The safetensors file itself: `root` is a dict of str -> tensor.
void write_flat(const Value& root, const WriteOptions& options, io::Sink& sink) {
  const Layout layout = plan(flat_items(root), options);
  sink.write(layout.head);
  // The tensors' bytes are written from where they lie (root holds them until we return).
  for (const Item& it : layout.items)
    it.tensor->for_each_run([&](std::span<const std::byte> run) { sink.write_borrowed(run); });
  sink.flush();
}

}  // namespace

}  // namespace tensorseal::detail::safetensors
