// numpy .npy reader and writer. Grammar (docs/formats/npy.md):
//
//   npy     = "\x93NUMPY" u8 major u8 minor hlen header[hlen] data
//   hlen    = u16 le  (1.0)  |  u32 le  (2.0: latin-1 header, 3.0: UTF-8 header)
//   header  = ws dict ws                 (numpy: spaces then '\n' up to a multiple of 64)
//   dict    = '{' ws [item (ws ',' ws item)* ws [',']] ws '}'
//   item    = str ws ':' ws value        keys: exactly 'descr', 'fortran_order', 'shape'
//   value   = str | 'True' | 'False' | tuple
//   tuple   = '(' ws ')' | '(' ws int ws ',' ws ')' | '(' ws int (ws ',' ws int)+ ws [','] ws ')'
//   int     = '0' | [1-9][0-9]*  ['L' in 1.0/2.0: Python 2 longs]
//   str     = "'" [^'\\]* "'" | '"' [^"\\]* '"'
//   data    = numel * itemsize bytes, C or Fortran order, byte order from descr
//
// A list descr (structured dtype), a tuple descr (subarray) and 'O' (object arrays,
// which hold pickles) are refused as unsupported. Nothing is evaluated.
#include "numpy/npy.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <variant>
#include <vector>

#include "core/fail.h"
#include "numpy/constants.h"
#include "numpy/format.h"
#include "tensorseal/error.h"
#include "util/checked.h"
#include "util/endian.h"

namespace tensorseal::detail::numpy {

namespace {

using u64 = std::uint64_t;

struct Tuple {
  std::vector<std::int64_t> items;
};
using Literal = std::variant<std::string, bool, Tuple>;

// Strict parser for the dict literal numpy writes. Offsets in errors are absolute
// (the header's position in the image is `base`).
class HeaderParser {
 public:
  HeaderParser(std::string_view text, u64 base, bool allow_long_suffix)
      : s_(text), base_(base), allow_long_(allow_long_suffix) {}

  std::map<std::string, Literal> parse() {
    std::map<std::string, Literal> out;
    ws();
    expect('{');
    ws();
    while (peek() != '}') {
      const u64 key_at = i_;
      if (peek() != '\'' && peek() != '"') bad("expected a quoted key");
      std::string key = str();
      ws();
      expect(':');
      ws();
      Literal v = value(key);
      if (!out.emplace(key, std::move(v)).second)
        fail(numpy::rules::kBadHeader, "key '" + key + "' appears twice", {}, base_ + key_at);
      ws();
      if (peek() == ',') {
        ++i_;
        ws();
      } else if (peek() != '}') {
        bad("expected ',' or '}'");
      }
    }
    ++i_;
    ws();
    if (i_ != s_.size()) bad("unexpected text after the dict");
    return out;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    std::string near(s_.substr(i_, 24));
    for (char& c : near)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    fail(numpy::rules::kBadHeader, fmt::format("header literal: {} at \"{}\"", what, near), {}, base_ + i_);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  std::string str() {
    const char q = s_[i_++];
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '\\' || c < 0x20 || c >= 0x7f) bad("unsupported character in a string");
      ++i_;
    }
    if (i_ >= s_.size()) bad("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  Literal value(const std::string& key) {
    const char c = peek();
    if (c == '\'' || c == '"') return str();
    if (s_.substr(i_, 4) == "True") return i_ += 4, true;
    if (s_.substr(i_, 5) == "False") return i_ += 5, false;
    if (c == '[') {
      if (key == "descr")
        fail(numpy::rules::kStructured, "structured dtypes (a list descr) are not supported", {}, base_ + i_);
      bad("unexpected list");
    }
    if (c == '(') {
      if (key == "descr")
        fail(numpy::rules::kStructured, "subarray dtypes (a tuple descr) are not supported", {}, base_ + i_);
      return tuple();
    }
    bad("expected a string, True, False or a tuple");
  }
  Tuple tuple() {
    Tuple t;
    ++i_;  // '('
    ws();
    bool trailing_comma = false;
    while (peek() != ')') {
      t.items.push_back(integer());
      ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++i_;
        trailing_comma = true;
        ws();
      } else if (peek() != ')') {
        bad("expected ',' or ')' in the shape");
      }
    }
    // "(3)" is the int 3 in Python, not a tuple.
    if (t.items.size() == 1 && !trailing_comma) bad("a one-element tuple needs a trailing comma");
    ++i_;
    return t;
  }
  std::int64_t integer() {
    const u64 at = i_;
    if (peek() == '-') fail(numpy::rules::kBadShape, "negative dimension in the shape", {}, base_ + at);
    if (peek() < '0' || peek() > '9') bad("expected a dimension");
    if (peek() == '0' && i_ + 1 < s_.size() && s_[i_ + 1] >= '0' && s_[i_ + 1] <= '9')
      bad("leading zero in an integer");
    std::uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      auto m = util::mul(v, 10);
      auto a = m ? util::add(*m, static_cast<u64>(peek() - '0')) : std::nullopt;
      if (!a || *a > static_cast<u64>(INT64_MAX))
        fail(numpy::rules::kShapeOverflow, "dimension does not fit in 64 bits", {}, base_ + at);
      v = *a;
      ++i_;
    }
    if (allow_long_ && peek() == 'L') ++i_;
    return static_cast<std::int64_t>(v);
  }

  std::string_view s_;
  std::size_t i_ = 0;
  u64 base_;
  bool allow_long_;
};

std::string python_repr_shape(std::span<const std::int64_t> shape) {
  return fmt::format("({}{})", fmt::join(shape, ", "), shape.size() == 1 ? "," : "");
}

}  // namespace

namespace {

// The header of a .npy image: version, where the data starts, the dict's keys.
struct RawHeader {
  int major = 1, minor = 0;
  u64 prefix = 0, data_offset = 0;
  std::map<std::string, Literal> dict;
};

RawHeader read_raw_header(std::span<const std::byte> b) {
  const u64 size = b.size();
  if (size < numpy::kMagic.size() || util::as_chars(b.first(numpy::kMagic.size())) != numpy::kMagic)
    fail(numpy::rules::kBadMagic, "not a .npy file (no \\x93NUMPY magic)", {}, 0);
  if (size < numpy::kMagic.size() + 2)
    fail(numpy::rules::kTruncatedHeader, "file ends inside the format version", {}, size);
  RawHeader p;
  p.major = static_cast<int>(b[6]);
  p.minor = static_cast<int>(b[7]);
  if (!((p.major == 1 || p.major == 2 || p.major == 3) && p.minor == 0))
    fail(numpy::rules::kBadVersion, fmt::format("format version {}.{} (known: 1.0, 2.0, 3.0)", p.major, p.minor), {},
         6);
  const u64 prefix = p.major == 1 ? numpy::kPrefixSizeV1 : numpy::kPrefixSizeV2;
  if (size < prefix) fail(numpy::rules::kTruncatedHeader, "file ends inside the header length", {}, 8);
  const u64 hlen =
      p.major == 1 ? util::load_le<std::uint16_t>(b.data() + 8) : util::load_le<std::uint32_t>(b.data() + 8);
  if (hlen > numpy::kMaxHeaderSize)
    fail(numpy::rules::kHeaderTooLarge, fmt::format("header of {} bytes exceeds {}", hlen, numpy::kMaxHeaderSize), {},
         8);
  if (hlen > size - prefix)
    fail(numpy::rules::kTruncatedHeader,
         fmt::format("header of {} bytes runs past the end ({} bytes left)", hlen, size - prefix), {}, 8);
  const std::string_view text = util::as_chars(b.subspan(prefix, hlen));
  // Versions 1.0 and 2.0 are latin-1, 3.0 UTF-8; the parser accepts only ASCII inside
  // strings and the keys are ASCII, so the encodings need no decoding here.
  p.prefix = prefix;
  p.data_offset = prefix + hlen;
  p.dict = HeaderParser(text, prefix, p.major <= 2).parse();
  for (const auto& [k, v] : p.dict)
    if (k != "descr" && k != "fortran_order" && k != "shape")
      fail(numpy::rules::kBadHeader, "unexpected key '" + k + "' (numpy writes descr, fortran_order, shape)", {},
           prefix);
  return p;
}

}  // namespace

std::optional<std::uint64_t> object_array_data(std::span<const std::byte> head) {
  RawHeader h = read_raw_header(head);
  auto it = h.dict.find("descr");
  if (it == h.dict.end() || !std::holds_alternative<std::string>(it->second))
    fail(numpy::rules::kBadHeader, "header has no string 'descr'", {}, h.prefix);
  std::string_view code = std::get<std::string>(it->second);
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) code.remove_prefix(1);
  if (code.starts_with("O")) return h.data_offset;
  return std::nullopt;
}

Parsed parse_header(std::span<const std::byte> b, std::uint64_t size, const Limits& limits) {
  RawHeader raw = read_raw_header(b);
  Parsed p;
  p.major = raw.major;
  p.minor = raw.minor;
  const u64 prefix = raw.prefix, hlen = raw.data_offset - raw.prefix;
  auto& dict = raw.dict;
  auto get = [&](const char* key) -> const Literal& {
    auto it = dict.find(key);
    if (it == dict.end()) fail(numpy::rules::kBadHeader, fmt::format("header has no '{}'", key), {}, prefix);
    return it->second;
  };
  const Literal& descr = get("descr");
  const Literal& fortran = get("fortran_order");
  const Literal& shape_lit = get("shape");
  if (!std::holds_alternative<std::string>(descr)) fail(numpy::rules::kBadHeader, "descr is not a string", {}, prefix);
  if (!std::holds_alternative<bool>(fortran))
    fail(numpy::rules::kBadHeader, "fortran_order is not True or False", {}, prefix);
  if (!std::holds_alternative<Tuple>(shape_lit))
    fail(numpy::rules::kBadShape, "shape is not a tuple of integers", {}, prefix);
  p.descr = std::get<std::string>(descr);
  p.fortran_order = std::get<bool>(fortran);
  const auto& shape = std::get<Tuple>(shape_lit).items;

  std::string_view code = p.descr;
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) code.remove_prefix(1);
  if (code.starts_with("O"))
    fail(numpy::rules::kObjectArray,
         fmt::format("object arrays ('{}') hold pickled Python objects and are not supported", p.descr), {}, prefix);
  bool big = false;
  const auto dtype = dtype_from_numpy(p.descr, &big);
  if (!dtype || itemsize(*dtype) == 0)
    fail(numpy::rules::kDtypeUnsupported, "dtype '" + p.descr + "' has no tensorseal equivalent", {}, prefix);
  if (shape.size() > limits.max_ndim)
    fail(numpy::rules::kTooManyDims, fmt::format("{} dimensions exceed the limit of {}", shape.size(), limits.max_ndim),
         {}, prefix);

  // Element count, and the product of the non-zero dimensions (strides of a
  // zero-size array still have to be representable).
  u64 numel = 1, span = 1;
  for (auto d : shape) {
    auto n = util::mul(numel, static_cast<u64>(d));
    auto s = util::mul(span, static_cast<u64>(std::max<std::int64_t>(d, 1)));
    if (!n || !s || *s > static_cast<u64>(INT64_MAX))
      fail(numpy::rules::kShapeOverflow, "shape " + python_repr_shape(shape) + " overflows 64-bit arithmetic", {},
           prefix);
    numel = *n;
    span = *s;
  }
  const auto nbytes = util::mul(numel, itemsize(*dtype));
  if (!nbytes)
    fail(numpy::rules::kShapeOverflow,
         fmt::format("shape {} of {} overflows 64-bit byte counts", python_repr_shape(shape), p.descr), {}, prefix);
  p.data_offset = prefix + hlen;
  const u64 available = size - p.data_offset;
  if (*nbytes > available)
    fail(numpy::rules::kTruncatedData,
         fmt::format("shape {} of {} needs {} bytes, {} follow the header", python_repr_shape(shape), p.descr, *nbytes,
                     available),
         {}, size);
  // numpy's np.load ignores bytes after the array; they can only be a second payload
  // (polyglot), so tensorseal refuses them.
  if (*nbytes < available)
    fail(numpy::rules::kTrailingData,
         fmt::format("{} bytes follow the {} bytes of array data", available - *nbytes, *nbytes), {},
         p.data_offset + *nbytes);

  // Padding: the spaces between '}' and the final newline, for `explain`.
  const std::string_view text = util::as_chars(b.subspan(prefix, hlen));
  std::size_t end = text.size();
  if (end && text[end - 1] == '\n') --end;
  while (end && text[end - 1] == ' ') --end, ++p.trailing_spaces;

  auto t = std::make_shared<Tensor>();
  t->dtype = *dtype;
  t->shape = shape;
  if (p.fortran_order) {
    t->strides.resize(shape.size());
    std::int64_t acc = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      t->strides[i] = acc;
      acc *= std::max<std::int64_t>(shape[i], 1);  // bounded by `span` above
    }
  } else {
    t->strides = Tensor::contiguous_strides(shape);
  }
  p.tensor = std::move(t);
  p.big_endian = big;
  return p;
}

Parsed parse(const std::shared_ptr<const Storage>& image, const Limits& limits) {
  const auto b = image->bytes();
  Parsed p = parse_header(b, b.size(), limits);
  const auto dtype = std::optional<DType>(p.tensor->dtype);
  const auto nbytes = std::optional<u64>(p.tensor->nbytes());
  std::shared_ptr<Storage> storage;
  if (p.big_endian) {
    if (*nbytes > limits.max_alloc)
      fail(numpy::rules::kTooLarge, fmt::format("big-endian data of {} bytes exceeds the allocation limit", *nbytes),
           {}, p.data_offset);
    const auto src = b.subspan(p.data_offset, *nbytes);
    std::vector<std::byte> owned(src.begin(), src.end());
    util::byteswap_inplace(owned, swap_unit(*dtype));
    storage = Storage::owned(std::move(owned), *dtype);
  } else {
    storage = Storage::slice(image, p.data_offset, *nbytes);
    storage->dtype = *dtype;
  }
  p.tensor->storage = std::move(storage);
  p.tensor->validate();
  return p;
}

std::string header(std::string_view descr, bool fortran_order, std::span<const std::int64_t> shape) {
  // _write_array_header: "{'descr': ..., 'fortran_order': ..., 'shape': ..., }" (keys
  // sorted), then room to grow the outer dimension, then _wrap_header_guess_version.
  std::string dict = "{'descr': '";
  dict += descr;
  dict += "', 'fortran_order': ";
  dict += fortran_order ? "True" : "False";
  dict += ", 'shape': " + python_repr_shape(shape) + ", }";
  if (!shape.empty()) {
    const auto grow = std::to_string(shape[fortran_order ? shape.size() - 1 : 0]).size();
    if (grow < numpy::kGrowthAxisMaxDigits) dict.append(numpy::kGrowthAxisMaxDigits - grow, ' ');
  }
  // _wrap_header: hlen = len(header) + 1 ('\n'); padlen = 64 - (prefix + hlen) % 64,
  // which is 64 (never 0) when already aligned.
  const u64 hlen = dict.size() + 1;
  auto wrap = [&](u64 prefix) {
    const u64 pad = numpy::kArrayAlign - (prefix + hlen) % numpy::kArrayAlign;
    return std::pair(pad, hlen + pad);
  };
  auto [pad1, total1] = wrap(numpy::kPrefixSizeV1);
  std::string out(numpy::kMagic);
  if (total1 <= 0xFFFF) {
    out += '\x01';
    out += '\x00';
    util::append_le<std::uint16_t>(out, static_cast<std::uint16_t>(total1));
    out += dict;
    out.append(pad1, ' ');
  } else {
    auto [pad2, total2] = wrap(numpy::kPrefixSizeV2);
    out += '\x02';
    out += '\x00';
    util::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(total2));
    out += dict;
    out.append(pad2, ' ');
  }
  out += '\n';
  return out;
}

std::string header_for(const Tensor& t) {
  const auto& i = info(t.dtype);
  if (i.numpy.empty()) throw Error(numpy::rules::kWriteDtype, "numpy has no dtype for " + std::string(i.name));
  t.validate();
  return header(i.numpy, false, t.shape);
}

bool detect_npy(std::span<const std::byte> head) noexcept {
  return head.size() >= numpy::kMagic.size() && util::as_chars(head.first(numpy::kMagic.size())) == numpy::kMagic;
}

// An object array (descr 'O'): its data is pickle.dump(array) (np.save with
// allow_pickle), read through the restricted pickle reader as a nested file, never
// run. The result is the array's pickle: _reconstruct(ndarray, (0,), b'b') with BUILD
// (1, shape, dtype('O'), fortran, [elements]), checked against the header.
Checkpoint read_object_npy(const io::Input& in, std::uint64_t data_at) {
  if (in.read_nested == nullptr)
    throw Error(tensorseal::rules::kInternal, "an object array reached a reader given no ReadNested", in.name);
  if (in.nesting + 1 > in.options->limits.max_nested_files)
    throw Error(numpy::rules::kObjectArray, "object arrays nested too deep", in.name, data_at);
  io::Input sub = in;
  sub.name = in.name + "/data.pkl";
  sub.nesting = in.nesting + 1;
  sub.whole = Storage::slice(in.whole, data_at, in.size() - data_at);
  ReadOptions pickle_only = *in.options;
  pickle_only.format = Format::kPickle;
  sub.options = &pickle_only;
  Checkpoint c;
  try {
    c = in.read_nested(sub);
  } catch (const Error& e) {
    if (e.rule() != tensorseal::rules::kUnknownFormat.id) throw;
    throw Error(numpy::rules::kObjectArray, "the data of an object array is not a pickle", in.name, data_at);
  }
  const Value& v = c.root;
  const bool array = v.is(Value::Kind::kObject) && v.as_object().callable &&
                     (v.as_object().callable->is_global("numpy.core.multiarray", "_reconstruct") ||
                      v.as_object().callable->is_global("numpy._core.multiarray", "_reconstruct")) &&
                     v.as_object().state && v.as_object().state->is(Value::Kind::kTuple) &&
                     v.as_object().state->items().size() == 5 && v.as_object().state->items()[4].is(Value::Kind::kList);
  if (!array)
    throw Error(numpy::rules::kObjectArray,
                "the data of an object array is not a pickled numpy object array (" + repr(v, 80) + ")", in.name,
                data_at);
  c.format = Format::kNpy;
  c.facts.push_back(core::fact(topics::kFortranOrder, "header", "object array (pickled)"));
  return c;
}

Checkpoint read_npy(const io::Input& in) {
  numpy::Parsed p;
  try {
    if (const auto at = numpy::object_array_data(in.bytes())) return read_object_npy(in, *at);
    p = numpy::parse(in.whole, in.options->limits);
  } catch (const Error& e) {
    throw e.located(in.name);
  }
  Checkpoint c;
  c.format = Format::kNpy;
  c.root = Value(std::shared_ptr<const Tensor>(p.tensor));
  c.facts.push_back(core::fact(topics::kVersion, "byte 6", fmt::format("{}.{}", p.major, p.minor)));
  c.facts.push_back(core::fact(topics::kHeaderPadding, "header end",
                               fmt::format("{} spaces, data at byte {}", p.trailing_spaces, p.data_offset)));
  c.facts.push_back(core::fact(topics::kFortranOrder, "header", p.fortran_order ? "True" : "False"));
  if (p.big_endian) c.facts.push_back(core::fact(topics::kByteOrder, "header", "big"));
  return c;
}

void write_npy(const Value& root, const WriteOptions&, io::Sink& sink) {
  if (!root.is(Value::Kind::kTensor))
    throw Error(rules::kNotTensor, fmt::format("a .npy file holds one tensor; got {}", kind_name(root.kind())));
  const Tensor& t = *root.as_tensor();
  sink.write(numpy::header_for(t));
  t.for_each_run([&](std::span<const std::byte> run) { sink.write(run); });
}

}  // namespace tensorseal::detail::numpy
