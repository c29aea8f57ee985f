// scan_file: what any standard loader could run from a file, read the way each one
// reads it. The findings are the union over every interpretation a loader could take:
//
//   pickle  pickle.load, and torch.load of any file that does not open with a zip
//           local header: the pickle at byte 0; when its value is torch's legacy magic
//           number, the four pickles torch reads after it (legacy format).
//   zip     torch.load (miniz), numpy.load and zipfile: the archive found from the
//           last end-of-central-directory signature; every member that is a pickle
//           (a .pkl name, or data opening with PROTO) and the pickle of every
//           object-dtype .npy member. When the archive breaks a zip rule (duplicate or
//           case-colliding names, local/central disagreement, CRC...), loaders may pick
//           any record, so every local header in the file is walked instead.
//   npy     numpy.load(allow_pickle=True) of a .npy: an object array's pickle.
//   tar     torch.load of torch's oldest (tar) format: the pickles of every member.
//   safetensors  nothing runs; noted as an interpretation only.
//
// Nested torch files (torch.storage._load_from_bytes payloads, also when built by
// _codecs.encode or bytes([...])) are scanned the same way, Limits::max_nested_files
// deep, whatever route calls the unpickler: REDUCE under any spelling of its name,
// _rebuild_from_type_v2(func, type, args, state) calling func(*args), a __setstate__,
// append or extend that BUILD installed on an instance (docs/security.md, "What scan
// follows"). Pickles stacked after a STOP are scanned too. Tensor data is never read
// or inflated; compressed pickles inflate streamed against Limits::max_pickle_inflate.
//
// Errors keep the evidence: when an interpretation fails after a global outside the
// safe set was seen, the report says "incomplete" with the error and keeps the
// verdict (pickle.load runs a payload before it reaches a broken byte). A failure
// with nothing unsafe seen is the file's error, as for every other command.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/formats.h"
#include "dcp/constants.h"
#include "dcp/transform.h"
#include "numpy/npy.h"
#include "pickle/constants.h"
#include "pickle/opcodes.h"
#include "pickle/stdlib.h"
#include "pickle/vm.h"
#include "tar/reader.h"
#include "tensorseal/error.h"
#include "tensorseal/format.h"
#include "tensorseal/safetensors.h"
#include "tensorseal/scan.h"
#include "tools/scan.h"
#include "torch/constants.h"
#include "util/checked.h"
#include "util/endian.h"
#include "zip/constants.h"
#include "zip/inflate.h"
#include "zip/reader.h"
#include "zip/sniff.h"
#include "zip/unpack.h"

namespace tensorseal {
namespace {

using Bytes = std::span<const std::byte>;
using detail::api::Structure;

// What a loader parses `data` as, by the format table's row of its detected format.
Structure structure_of(Bytes data) {
  const auto* row = detail::api::row(detect_format(data));
  return row != nullptr ? row->structure : Structure::kNone;
}

// pickle.load reads one pickle; torch's legacy loader reads the magic number, the
// protocol version, sys_info, the object and the storage keys.
constexpr int kLegacyPickles = 5;
constexpr std::uint64_t kNpyHeadBytes = 64 << 10;  // enough for any header numpy writes

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}
// Names as miniz compares them (torch.load): ASCII case ignored.
bool ends_with_ci(std::string_view s, std::string_view suffix) { return lower(s).ends_with(suffix); }

// The callable a loader imports for a global: module, then the name walked attribute by
// attribute (find_class at protocol >= 4), so ('torch', 'storage._load_from_bytes') is
// torch.storage._load_from_bytes whatever the spelling.
std::string qualified(const Value& v) {
  if (!v.is(Value::Kind::kGlobal)) return {};
  const Global& g = v.as_global();
  return (g.module == "__builtin__" ? std::string("builtins") : g.module) + "." + g.name;
}
// The safe-listed callable that unpickles its argument: torch.load(BytesIO(b)).
constexpr std::string_view kLoadFromBytes = "torch.storage._load_from_bytes";
// _rebuild_from_type_v2(func, new_type, args, state) calls func(*args).
constexpr std::string_view kRebuildFromType = "torch._tensor._rebuild_from_type_v2";
// How many calls deep a chain of _rebuild_from_type_v2(func, ...) is followed.
constexpr unsigned kMaxCallHops = 16;
// What a BUILD may install on an instance that a later opcode calls: BUILD calls
// `__setstate__`, APPEND(S) call `extend` (tried first) or `append`.
constexpr std::array<std::string_view, 3> kInstalledMethods = {"__setstate__", "extend", "append"};

class Scanner {
 public:
  Scanner(std::string file, const Limits& limits) : file_(std::move(file)), limits_(limits) {}

  std::vector<GlobalRef> refs;
  std::vector<std::string> interpretations;
  std::optional<Error> evidence_error;  // a failure that came after unsafe globals

  // Every interpretation of a whole file (or nested payload). Returns false when none
  // applied; `primary_error` is the failure of the one the format table picked.
  void blob(Bytes data, const std::string& where, unsigned depth, bool top, std::optional<Error>& primary_error) {
    const Structure as = structure_of(data);
    auto attempt = [&](const char* what, bool primary, auto&& fn) {
      const std::size_t before = refs.size();
      try {
        if (fn() && top) note(what);
      } catch (const Error& e) {
        if (unsafe_since(before)) {
          if (!evidence_error) evidence_error = e;
        } else if (primary && !primary_error) {
          primary_error = e;
        }
      }
    };
    const bool zip_head = detail::zip::starts_with_local_header(data);
    attempt(as == Structure::kTorchLegacy ? "torch-legacy" : "pickle",
            as == Structure::kPickle || as == Structure::kTorchLegacy,
            [&] { return !zip_head && pickles(data, where, 0, depth); });
    attempt("zip", as == Structure::kZip, [&] { return zip(data, where, depth); });
    attempt("npy", as == Structure::kNpy, [&] { return npy(data, where, 0, depth); });
    attempt("tar", as == Structure::kTar, [&] { return tar(data, where, depth); });
    if (as == Structure::kSafetensors && top) note("safetensors");
  }

  // A DCP data file: items one after another (torch.save zips at the offsets .metadata
  // gives, then maybe safetensors data), each read by torch.load on its own slice.
  // Every zip record in it is scanned from its local header.
  void records(Bytes data, const std::string& where) {
    if (walk_local_headers(data, where, 0) > 0) note("zip records");
    if (structure_of(data) == Structure::kSafetensors) note("safetensors");
  }

 private:
  void note(const char* what) {
    if (std::find(interpretations.begin(), interpretations.end(), what) == interpretations.end())
      interpretations.push_back(what);
  }
  bool unsafe_since(std::size_t before) const {
    for (std::size_t i = before; i < refs.size(); ++i)
      if (classify_global(refs[i].module, refs[i].name) != Verdict::kSafe) return true;
    return false;
  }

  // Methods BUILD installed on instances of one stream, by target node; the target is
  // kept so its node's address is not reused.
  struct Installed {
    Value target;
    std::vector<std::pair<std::string, Value>> methods;
    const Value* find(std::string_view name) const {
      for (const auto& [n, v] : methods)
        if (n == name) return &v;
      return nullptr;
    }
  };
  using InstalledMap = std::map<const void*, Installed>;
  using Records = std::map<std::string, std::uint64_t>;
  // Puts records_ back as it was when a scope ends (also when it throws).
  struct RestoreRecords {
    const Records*& slot;
    const Records* saved;
    ~RestoreRecords() { slot = saved; }
  };

  // A finding that is not a global: module `marker` (tools/scan.h), name `what`.
  void finding(std::string_view marker, std::string what, const std::string& where, std::uint64_t off) {
    refs.push_back(GlobalRef{std::string(marker), std::move(what), fmt::format("{} @ {}", where, off)});
  }

  // torch.storage._load_from_bytes(*args): the payload scanned as a nested file.
  void follow_payload(const std::vector<Value>& args, const std::string& where, unsigned depth, std::uint64_t off) {
    if (args.size() != 1 || !args[0].is(Value::Kind::kBytes) || args[0].is_bytearray()) {
      finding(detail::pickle::kComputedModule, "<_load_from_bytes payload built at load time>", where, off);
      return;
    }
    if (depth >= limits_.max_nested_files)
      throw Error(
          detail::torch::rules::kNestingTooDeep,
          fmt::format("_load_from_bytes payloads nested deeper than max_nested_files ({})", limits_.max_nested_files),
          file_, off);
    const std::string_view b = args[0].as_bytes();
    std::optional<Error> nested_error;
    const auto* records = std::exchange(records_, nullptr);  // the payload is a file of its own
    const RestoreRecords restore{records_, records};
    blob(Bytes(reinterpret_cast<const std::byte*>(b.data()), b.size()),
         fmt::format("{}/_load_from_bytes#{}", where, ++nested_), depth + 1, false, nested_error);
    if (nested_error) throw *nested_error;
  }

  // The unpickling callable reached as a value somewhere in `v` (two levels of
  // containers deep, where call arguments and states hold it).
  static bool holds_unpickler(const Value& v, int levels = 2) {
    if (qualified(v) == kLoadFromBytes) return true;
    if (levels == 0) return false;
    switch (v.kind()) {
      case Value::Kind::kTuple:
      case Value::Kind::kList:
        for (const Value& x : v.items())
          if (holds_unpickler(x, levels - 1)) return true;
        return false;
      case Value::Kind::kDict:
        for (const auto& [k, x] : v.as_dict().items)
          if (holds_unpickler(x, levels - 1)) return true;
        return false;
      default:
        return false;
    }
  }

  // A call the loader makes: func(*args). The unpickling callable's payload is scanned;
  // _rebuild_from_type_v2 calls its first argument with its third; the unpickler handed
  // to any other call as a value is a finding (whatever calls it, its payload is not
  // followed).
  void call(const Value& func, const std::vector<Value>& args, const Value* kwargs, const std::string& where,
            unsigned depth, std::uint64_t off, unsigned hops = 0) {
    const std::string q = qualified(func);
    if (q == kLoadFromBytes) {
      follow_payload(args, where, depth, off);
      return;
    }
    // _rebuild_from_type_v2's func and its own arguments are the call followed here.
    const bool rebuild = q == kRebuildFromType && args.size() >= 3 && args[2].is(Value::Kind::kTuple);
    if (rebuild && hops < kMaxCallHops) call(args[0], args[2].items(), nullptr, where, depth, off, hops + 1);
    const std::string callee = q.empty() ? std::string("a value built at load time") : q;
    bool passed = kwargs && holds_unpickler(*kwargs);
    for (std::size_t i = 0; i < args.size(); ++i)
      if (!(rebuild && hops < kMaxCallHops && (i == 0 || i == 2)) && holds_unpickler(args[i])) passed = true;
    if (passed)
      finding(detail::tools::kUnfollowedModule, "<torch.storage._load_from_bytes passed to " + callee + ">", where,
              off);
  }

  // BUILD / APPEND(S) / SETITEM(S) (Hooks::on_mutate).
  void mutate(InstalledMap& installed, std::uint8_t op, const Value& target, const std::vector<Value>& ops,
              const std::string& where, unsigned depth, std::uint64_t off) {
    namespace opc = detail::pickle::op;
    const void* node = target.node();
    const auto it = node ? installed.find(node) : installed.end();
    const Installed* methods = it == installed.end() ? nullptr : &it->second;
    if (op == opc::kBuild) {
      const Value& state = ops.at(0);
      if (methods) {
        if (const Value* f = methods->find("__setstate__")) {
          call(*f, {state}, nullptr, where, depth, off);
          return;  // load_build hands the state to __setstate__ and sets nothing
        }
      }
      // The instance dict and the slot state: what BUILD sets as attributes.
      std::vector<const Dict*> parts;
      if (state.is(Value::Kind::kDict)) parts.push_back(&state.as_dict());
      if (state.is(Value::Kind::kTuple))
        for (const Value& x : state.items())
          if (x.is(Value::Kind::kDict)) parts.push_back(&x.as_dict());
      for (const Dict* d : parts)
        for (const auto& [k, v] : d->items) {
          if (!k.is(Value::Kind::kStr) || !node) continue;
          for (auto m : kInstalledMethods)
            if (k.as_str() == m) {
              auto& slot = installed[node];
              slot.target = target;
              slot.methods.emplace_back(std::string(m), v);
            }
        }
      return;
    }
    if (op == opc::kAppend || op == opc::kAppends) {
      if (!methods) return;
      if (const Value* f = methods->find("extend")) {
        call(*f, {Value::list(std::vector<Value>(ops))}, nullptr, where, depth, off);
      } else if (const Value* f = methods->find("append")) {
        for (const Value& item : ops) call(*f, {item}, nullptr, where, depth, off);
      }
      return;
    }
    // SETITEM(S): torch < 2.10's weights_only unpickler does `stack[-1][k] = v` on
    // whatever the target is (CVE-2026-24747): on a tensor (any object its allowlist
    // builds but a dict) it writes into it. Dict subclasses rebuilt by REDUCE take
    // items; an unknown class is its own finding; a scalar target fails every loader.
    if (!target.is(Value::Kind::kObject)) return;
    const Object& o = target.as_object();
    const std::string q = o.callable ? qualified(*o.callable) : std::string();
    if (q.empty() || q == "collections.OrderedDict" || q == "collections.Counter" ||
        classify_global(o.callable->as_global().module, o.callable->as_global().name) != Verdict::kSafe)
      return;
    finding(detail::tools::kLatentModule,
            "<" + std::string(detail::pickle::op_name(op)) + " on a " + q + " result, not a dict (CVE-2026-24747)>",
            where, off);
  }

  detail::pickle::Hooks hooks(const std::string& where, unsigned depth) {
    detail::pickle::Hooks h;
    // torch's unpicklers resolve persistent ids; what they stand for runs nothing.
    h.persistent_load = [this, where](const Value& pid, std::uint64_t off) {
      check_storage(pid, where, off);
      return Value();
    };
    h.on_global = [this](const GlobalRef& g) { refs.push_back(g); };
    h.reduce = [this, where, depth](const Object& o, std::uint64_t off) -> std::optional<Value> {
      if (auto v = detail::pickle::stdlib_reduce(o)) return v;
      if (!o.callable || !o.args) return std::nullopt;
      call(*o.callable, o.args->items(), o.kwargs.get(), where, depth, off);
      return std::nullopt;
    };
    auto installed = std::make_shared<InstalledMap>();
    h.on_mutate = [this, where, depth, installed](std::uint8_t op, const Value& target, const std::vector<Value>& ops,
                                                  std::uint64_t off) {
      mutate(*installed, op, target, ops, where, depth, off);
    };
    return h;
  }

  // A torch zip storage ('storage', class, key, location, numel) declaring more
  // elements than its record holds (CVE-2026-24747: torch < 2.10 reads past it).
  void check_storage(const Value& pid, const std::string& where, std::uint64_t off) {
    if (!records_ || !pid.is(Value::Kind::kTuple) || pid.items().size() != 5) return;
    const auto& p = pid.items();
    if (!p[0].is(Value::Kind::kStr) || p[0].as_str() != "storage" || !p[1].is(Value::Kind::kGlobal) ||
        !p[2].is(Value::Kind::kStr) || !p[4].is(Value::Kind::kInt) || p[4].as_int() < 0)
      return;
    const auto dt = dtype_from_legacy_storage(p[1].as_global().name);
    const auto rec = records_->find(std::string(p[2].as_str()));
    if (!dt || rec == records_->end()) return;
    const auto bytes = detail::util::mul(static_cast<std::uint64_t>(p[4].as_int()), itemsize(*dt));
    if (bytes && *bytes <= rec->second) return;
    finding(detail::tools::kLatentModule,
            fmt::format("<storage '{}' declares {} elements, more than its {}-byte record (CVE-2026-24747)>",
                        p[2].as_str(), p[4].as_int(), rec->second),
            where, off);
  }

  // One pickle stream. A FRAME longer than the bytes left fails CPython's C unpickler
  // at once, but pickle's Python unpickler (dill, joblib) runs the frame's opcodes and
  // fails only where they run out: such a frame is read as ending at the end of data.
  detail::pickle::Parsed parse_one(Bytes data, const std::string& where, std::uint64_t base,
                                   const detail::pickle::Hooks& h) {
    std::vector<std::byte> patched;
    const std::size_t refs_before = refs.size();
    const unsigned nested_before = nested_;
    for (int tries = 0;; ++tries) {
      const Bytes in = patched.empty() ? data : Bytes(patched.data(), patched.size());
      try {
        return detail::pickle::parse(in, where, base, limits_, h);
      } catch (const Error& e) {
        const std::uint64_t at = e.offset() - base;
        if (e.rule() != detail::pickle::rules::kTruncated.id || e.offset() < base || at + 9 > in.size() ||
            static_cast<std::uint8_t>(in[at]) != detail::pickle::op::kFrame || tries >= 64)
          throw;
        if (patched.empty()) patched.assign(data.begin(), data.end());
        const std::uint64_t rest = patched.size() - at - 9;
        for (int i = 0; i < 8; ++i) patched[at + 1 + i] = static_cast<std::byte>((rest >> (8 * i)) & 0xff);
        refs.resize(refs_before);  // the retry sees them again
        nested_ = nested_before;
      }
    }
  }

  // The pickles at data[0]: a legacy sequence when the first value is the magic number;
  // else the first pickle and every pickle stacked after its STOP (a loader calling
  // pickle.load again runs the next one). Trailing bytes that do not parse, with
  // nothing outside the safe set in them, are not a pickle and are left alone.
  bool pickles(Bytes data, const std::string& where, std::uint64_t base, unsigned depth) {
    if (data.empty()) return false;
    const detail::pickle::Hooks h = hooks(where, depth);
    std::uint64_t pos = 0;
    bool legacy = false;
    for (int i = 0; i < kLegacyPickles && pos < data.size(); ++i) {
      const detail::pickle::Parsed p = parse_one(data.subspan(pos), where, base + pos, h);
      pos += p.end;
      const bool magic =
          p.value.is(Value::Kind::kBigInt) && p.value.as_bigint().to_decimal() == detail::torch::kLegacyMagic;
      if (i == 0 && !magic) break;
      legacy = true;
    }
    if (legacy) return true;  // storage data follows torch's legacy pickles
    for (std::uint64_t n = 0; pos < data.size() && n < limits_.max_entries; ++n) {
      const std::size_t before = refs.size();
      try {
        const detail::pickle::Parsed p =
            parse_one(data.subspan(pos), fmt::format("{}#stacked{}", where, n + 1), base + pos, h);
        if (p.end == 0) break;
        pos += p.end;
      } catch (const Error&) {
        if (unsafe_since(before)) throw;
        refs.resize(before);  // trailing bytes, not a pickle: what they "named" is noise
        break;
      }
    }
    return true;
  }

  // A .npy image (or its first bytes). numpy unpickles the data of an object array;
  // so it may for any header that does not prove a dtype without objects (other object
  // spellings, structs and subarrays holding one, escapes: numpy::pickled_data). Such
  // unproven data that is no pickle is tolerated; an object array's is the file's.
  bool npy(Bytes image, const std::string& where, std::uint64_t base, unsigned depth) {
    if (image.size() < 6 || std::memcmp(image.data(), "\x93NUMPY", 6) != 0) return false;
    if (const auto at = npy_pickle(image); at && at->offset < image.size())
      guard(!at->object, [&] { pickles(image.subspan(at->offset), where, base + at->offset, depth); });
    return true;
  }
  // Where numpy would unpickle the data of the .npy starting with `head`, and whether
  // the header is an object array's as numpy writes it (its pickle is then no candidate).
  struct NpyPickle {
    std::uint64_t offset;
    bool object;
  };
  static std::optional<NpyPickle> npy_pickle(Bytes head) {
    try {
      if (const auto at = detail::numpy::object_array_data(head)) return NpyPickle{*at, true};
    } catch (const Error&) {
    }
    if (const auto at = detail::numpy::pickled_data(head)) return NpyPickle{*at, false};
    return std::nullopt;
  }

  // A member's bytes: stored ones as they are, others decompressed to at most `cap`
  // (bzip2 and LZMA too: zipfile reads them). `complete` is false when only a prefix
  // came back. A member over max_pickle_inflate is refused (zip/entry-too-large).
  Bytes member(Bytes file, const detail::zip::Entry& e, std::uint64_t cap, std::vector<std::byte>& scratch,
               bool& complete) {
    complete = true;
    if (e.data_offset > file.size()) return {};
    const Bytes raw =
        file.subspan(e.data_offset, std::min<std::uint64_t>(e.compressed_size, file.size() - e.data_offset));
    if (e.method == detail::zip::kMethodStored)
      return raw.first(std::min<std::uint64_t>(raw.size(), e.size ? e.size : raw.size()));
    if (!detail::zip::can_unpack(e.method)) return {};
    detail::zip::Inflated in = detail::zip::unpack_bounded(e.method, raw, cap);
    complete = in.ended;
    scratch = std::move(in.data);
    if (in.over && cap == limits_.max_pickle_inflate)
      throw Error(detail::zip::rules::kEntryTooLarge,
                  fmt::format("entry '{}' inflates past max_pickle_inflate ({} bytes)", e.name, cap), file_,
                  e.data_offset);
    return {scratch.data(), scratch.size()};
  }

  // Runs fn; a failure after an unsafe global becomes the evidence error, other
  // failures propagate unless `tolerant` (a candidate that need not be a pickle).
  template <class F>
  void guard(bool tolerant, F&& fn) {
    const std::size_t before = refs.size();
    try {
      fn();
    } catch (const Error& e) {
      if (unsafe_since(before)) {
        if (!evidence_error) evidence_error = e;
      } else if (!tolerant) {
        throw;
      }
    }
  }

  // A member as the loaders that open it by name or by content read it:
  //   - data opening with the .npy magic: numpy.load reads an array, whatever the name
  //     (an .npz member without .npy or in upper case), so npy();
  //   - a zip or a tar: a checkpoint inside the archive, scanned as a file of its own
  //     (max_nested_files deep);
  //   - a ".pkl" name in any case (miniz finds "data.pkl" ignoring case), or data that
  //     opens with any pickle opcode (protocol 0 and 1 have no PROTO): pickles.
  // Tensor data records (`data_record`: under a data.pkl's data/ folder) are raw
  // storage bytes no loader unpickles.
  void scan_member(Bytes file, const detail::zip::Entry& e, const std::string& where, unsigned depth,
                   bool data_record) {
    if (data_record) return;
    const std::string at = where + "/" + e.name;
    std::vector<std::byte> scratch;
    bool complete = true;
    const Bytes head = member(file, e, kNpyHeadBytes, scratch, complete);
    if (head.size() >= 6 && std::memcmp(head.data(), "\x93NUMPY", 6) == 0) {
      guard(false, [&] {
        const auto pk = npy_pickle(head);
        if (!pk) return;
        std::vector<std::byte> whole;
        const Bytes image = complete ? head : member(file, e, limits_.max_pickle_inflate, whole, complete);
        if (pk->offset < image.size())
          guard(!pk->object, [&] { pickles(image.subspan(pk->offset), at, e.data_offset + pk->offset, depth); });
      });
      return;
    }
    const bool pkl = ends_with_ci(e.name, ".pkl");
    const bool archive = detail::zip::starts_with_local_header(head) || detail::tar::looks_like_tar(head);
    if (archive && !pkl) {
      guard(false, [&] {
        if (depth >= limits_.max_nested_files)
          throw Error(detail::torch::rules::kNestingTooDeep,
                      fmt::format("archive member '{}' nests archives deeper than max_nested_files ({})", e.name,
                                  limits_.max_nested_files),
                      file_, e.data_offset);
        std::vector<std::byte> whole;
        const Bytes data = complete ? head : member(file, e, limits_.max_pickle_inflate, whole, complete);
        std::optional<Error> nested_error;
        const auto* records = std::exchange(records_, nullptr);  // a file of its own
        const RestoreRecords restore{records_, records};
        blob(data, at, depth + 1, false, nested_error);
        if (nested_error) throw *nested_error;
      });
      return;
    }
    const bool opcode = !head.empty() && detail::pickle::kOpTable[static_cast<std::uint8_t>(head[0])].proto >= 0;
    if (!pkl && !opcode) return;
    guard(!pkl, [&] {
      std::vector<std::byte> whole;
      const Bytes data = complete ? head : member(file, e, limits_.max_pickle_inflate, whole, complete);
      pickles(data, at, e.data_offset, depth);
    });
  }

  // The names of a torch archive's tensor data records: "<prefix>data/<key>" beside a
  // "<prefix>data.pkl" (any case, as miniz looks them up).
  static std::set<std::string> data_records(const std::vector<detail::zip::Entry>& entries) {
    std::set<std::string> prefixes, out;
    for (const auto& e : entries)
      if (ends_with_ci(e.name, "data.pkl")) prefixes.insert(lower(e.name.substr(0, e.name.size() - 8)) + "data/");
    for (const auto& e : entries) {
      const std::string l = lower(e.name);
      for (const auto& p : prefixes)
        if (l.size() > p.size() && l.starts_with(p)) out.insert(e.name);
    }
    return out;
  }

  bool zip(Bytes data, const std::string& where, unsigned depth) {
    // Loaders find an archive from its end: no end record, no archive.
    const std::uint64_t span = std::min<std::uint64_t>(data.size(), detail::zip::kEocdSearchSpan);
    bool end_record = false;
    for (std::uint64_t i = data.size() - span; i + 4 <= data.size() && !end_record; ++i)
      end_record = detail::util::load_le<std::uint32_t>(data.data() + i) == detail::zip::kEocdSig;
    if (!end_record) return false;
    detail::zip::Archive a;
    try {
      a = detail::zip::read(data, file_, limits_);
    } catch (const Error&) {
      // zipfile also reads archives behind a prefix or with a broken directory: the
      // records are there for some loader, so this interpretation holds.
      if (walk_local_headers(data, where, depth) > 0 && depth == 0) note("zip");
      throw;
    }
    const std::set<std::string> data_names = data_records(a.entries);
    // Record sizes under each data.pkl's prefix, for the storages its pickle declares.
    Records records;
    for (const auto& e : a.entries) {
      records.clear();
      if (ends_with_ci(e.name, "data.pkl")) {
        const std::string prefix = lower(e.name.substr(0, e.name.size() - 8)) + "data/";
        for (const auto& r : a.entries)
          if (r.name.size() > prefix.size() && lower(r.name).starts_with(prefix))
            records.emplace(r.name.substr(prefix.size()), r.size);
      }
      const RestoreRecords restore{records_, std::exchange(records_, records.empty() ? nullptr : &records)};
      scan_member(data, e, where, depth, data_names.count(e.name) > 0);
    }
    if (detect_format(data) == Format::kTorchZip) detail::zip::refuse_case_collision(a, file_);
    return true;
  }

  // Every "PK\3\4" in the file as a record some loader could read: its name, method
  // and sizes from the local header alone.
  // Returns how many local headers were found.
  std::uint64_t walk_local_headers(Bytes data, const std::string& where, unsigned depth) {
    std::vector<detail::zip::Entry> found;
    std::uint64_t seen = 0;
    for (std::uint64_t pos = 0; pos + detail::zip::kLocalHeaderSize <= data.size(); ++pos) {
      if (detail::util::load_le<std::uint32_t>(data.data() + pos) != detail::zip::kLocalHeaderSig) continue;
      if (++seen > limits_.max_entries) break;
      detail::zip::Entry e;
      e.flags = detail::util::load_le<std::uint16_t>(data.data() + pos + 6);
      e.method = detail::util::load_le<std::uint16_t>(data.data() + pos + 8);
      e.compressed_size = detail::util::load_le<std::uint32_t>(data.data() + pos + 18);
      e.size = detail::util::load_le<std::uint32_t>(data.data() + pos + 22);
      const std::uint64_t name_len = detail::util::load_le<std::uint16_t>(data.data() + pos + 26);
      const std::uint64_t extra_len = detail::util::load_le<std::uint16_t>(data.data() + pos + 28);
      const std::uint64_t name_at = pos + detail::zip::kLocalHeaderSize;
      if (name_at + name_len + extra_len > data.size()) continue;
      e.name.assign(reinterpret_cast<const char*>(data.data() + name_at), name_len);
      e.local_offset = pos;
      e.data_offset = name_at + name_len + extra_len;
      // Unknown sizes (data descriptor, zip64): everything to the end of the file; a
      // pickle stops at STOP, inflate at the end of its stream.
      if ((e.flags & detail::zip::kFlagDataDescriptor) || e.compressed_size == detail::zip::kSentinel32 ||
          e.compressed_size == 0) {
        e.compressed_size = data.size() - e.data_offset;
        e.size = 0;
      }
      found.push_back(std::move(e));
    }
    const std::set<std::string> data_names = data_records(found);
    for (const auto& e : found) {
      try {
        scan_member(data, e, where, depth, data_names.count(e.name) > 0);
      } catch (const Error&) {
        // A broken candidate: the ones that parse, and what the others referenced
        // before breaking (kept in refs), are the evidence.
      }
    }
    return seen;
  }

  // torch's tar format (torch.load's _legacy_load): members "storages" (a count
  // pickle, then per storage an args pickle (key, location, storage class) and the raw
  // data: u64 element count + elements, then a storage-views pickle), "tensors" (a
  // count pickle, then per tensor an args pickle and ndim/sizes/strides/offset) and
  // "pickle" (the object). Every pickle torch would load is scanned. The archive is
  // walked by the tar reader (src/tar/reader.h): members named as tarfile names them
  // (long names, pax paths, hard links resolved), each scanned as soon as its headers
  // check out, so one past a malformed header still leaves the earlier ones' evidence.
  bool tar(Bytes data, const std::string& where, unsigned depth) {
    if (!detail::tar::looks_like_tar(data)) return false;
    (void)detail::tar::walk(data, file_, limits_, [&](const detail::tar::Member& m, Bytes body) {
      const std::string at = where + "/" + m.name;
      if (m.name == "storages" || m.name == "tensors") {
        guard(false, [&] { tar_records(body, at, m.data_offset, depth, m.name == "storages"); });
      } else {
        guard(m.name != "pickle", [&] { pickles(body, at, m.data_offset, depth); });
      }
    });
    return true;
  }

  void tar_records(Bytes m, const std::string& at, std::uint64_t base, unsigned depth, bool storages) {
    const detail::pickle::Hooks h = hooks(at, depth);
    std::uint64_t pos = 0;
    auto next = [&]() {
      detail::pickle::Parsed p = detail::pickle::parse(m.subspan(pos), at, base + pos, limits_, h);
      pos += p.end;
      return p.value;
    };
    auto need = [&](std::uint64_t n) {
      if (n > m.size() - pos)
        throw Error(tensorseal::rules::kUnknownFormat, "tar member '" + at + "' ends early", file_, base + pos);
    };
    const Value count = next();
    if (!count.is(Value::Kind::kInt) || count.as_int() < 0) return;
    for (std::int64_t i = 0; i < count.as_int(); ++i) {
      const Value args = next();
      if (storages) {
        // (key, location, storage class): the class gives the element size.
        if (!args.is(Value::Kind::kTuple) || args.items().size() != 3 || !args.items()[2].is(Value::Kind::kGlobal))
          return;
        const auto dt = dtype_from_legacy_storage(args.items()[2].as_global().name);
        if (!dt) return;
        need(8);
        const std::uint64_t numel = detail::util::load_le<std::uint64_t>(m.data() + pos);
        pos += 8;
        const auto bytes = detail::util::mul(numel, itemsize(*dt));
        if (!bytes) return;
        need(*bytes);
        pos += *bytes;
      } else {
        need(8);
        const auto ndim = detail::util::load_le<std::int32_t>(m.data() + pos);
        if (ndim < 0 || static_cast<std::uint32_t>(ndim) > limits_.max_ndim) return;
        const std::uint64_t skip = 8 + 16 * static_cast<std::uint64_t>(ndim) + 8;
        need(skip);
        pos += skip;
      }
    }
    if (storages && pos < m.size()) next();  // the storage views
  }

  std::string file_;
  const Limits& limits_;
  const Records* records_ = nullptr;  // record sizes by storage key of the data.pkl being scanned
  unsigned nested_ = 0;               // _load_from_bytes payloads met, numbering them as the readers do
};

}  // namespace

namespace detail::tools {

ScanReport scan_records(const std::filesystem::path& path, const ReadOptions& options) {
  const auto file = MappedFile::open(path);
  Scanner s(path.string(), options.limits);
  const auto bytes = file->bytes();
  s.records(bytes, path.string());
  constexpr std::array<std::byte, 4> kZstdMagic{std::byte{0x28}, std::byte{0xB5}, std::byte{0x2F}, std::byte{0xFD}};
  for (auto at = bytes.begin();
       (at = std::search(at, bytes.end(), kZstdMagic.begin(), kZstdMagic.end())) != bytes.end();) {
    const auto offset = static_cast<std::uint64_t>(at - bytes.begin());
    const std::size_t frame = detail::dcp::zstd_frame_size(bytes.subspan(offset));
    if (frame == 0) {
      ++at;
      continue;
    }
    try {
      const auto plain =
          detail::dcp::undo_transforms(bytes.subspan(offset, frame), {std::string(detail::dcp::kZstdTransform) + "/1"},
                                       options.limits.max_alloc, path.string(), offset);
      s.records(plain->bytes(), fmt::format("{}@{}", path.string(), offset));
    } catch (const Error&) {
      ++at;
      continue;
    }
    at += static_cast<std::ptrdiff_t>(frame);
  }
  ScanReport r = summarize(path.string(), Format::kUnknown, s.refs);
  r.interpretations = s.interpretations;
  return r;
}

ScanReport scan_image(std::span<const std::byte> data, const std::string& file, const std::string& where,
                      const ReadOptions& options) {
  Scanner s(file, options.limits);
  std::optional<Error> primary_error;
  s.blob(data, where, 0, true, primary_error);
  ScanReport r = summarize(file, detect_format(data), s.refs);
  r.interpretations = s.interpretations;
  if (r.verdict != Verdict::kSafe && (s.evidence_error || primary_error)) {
    r.incomplete = true;
    r.error = (s.evidence_error ? *s.evidence_error : *primary_error).what();
    return r;
  }
  if (primary_error) throw *primary_error;
  if (s.evidence_error) throw *s.evidence_error;
  if (r.interpretations.empty())
    throw Error(rules::kUnknownFormat,
                "not a file any loader tensorseal knows would read (pickle, zip, npy, safetensors, tar)", file, 0);
  return r;
}

}  // namespace detail::tools

ScanReport scan_file(const std::filesystem::path& path, const ReadOptions& options) {
  if (std::filesystem::is_directory(path)) return detail::tools::scan_directory(path, options);
  const auto file = MappedFile::open(path);
  const std::string name = path.string();
  // A safetensors file runs nothing, but its header rules (and limits) still apply, as
  // for every command that reads it.
  std::optional<Error> header_error;
  if (structure_of(file->bytes()) == Structure::kSafetensors) {
    try {
      (void)read_safetensors_index(file, options);
    } catch (const Error& e) {
      header_error = e;
    }
  }
  ScanReport r = detail::tools::scan_image(file->bytes(), name, name, options);
  if (header_error) {
    if (r.verdict == Verdict::kSafe) throw *header_error;
    if (!r.incomplete) {
      r.incomplete = true;
      r.error = header_error->what();
    }
  }
  return r;
}

}  // namespace tensorseal
