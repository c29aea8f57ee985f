// tensorseal._tensorseal — the nanobind binding. Thin: converts between Python (convert.h)
// objects and the value tree and calls the public C++ API. Tensor data is never
// copied here: loads hand out views of the file mapping, saves borrow the memory of
// torch tensors / numpy arrays (kept alive until the writer is done).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"

namespace nb = nanobind;
using namespace tensorseal;
using namespace tensorseal::py;

namespace {

// Saves written by StreamedWrite (tests check that the streamed path ran).
std::uint64_t streamed_writes = 0;

// ---- helpers --------------------------------------------------------------------

Format parse_format(const std::string& f) {
  auto fmt = format_from_name(f);
  if (!fmt) throw Error(rules::kInvalidArgument, "unknown format '" + f + "'");
  return *fmt;
}

nb::dict checkpoint_to_py(const Checkpoint& c, const std::string& framework, bool with_root) {
  nb::dict d;
  d["format"] = std::string(format_name(c.format));
  d["file"] = c.file;
  if (with_root) {
    ToPy conv;
    conv.framework = framework;
    d["root"] = conv.convert(c.root);
  }
  nb::list meta, facts, globals;
  auto text = py_text;
  for (const auto& [k, v] : c.metadata) meta.append(nb::make_tuple(text(k), text(v)));
  for (const auto& f : c.facts) facts.append(nb::make_tuple(text(f.topic), text(f.where), text(f.value)));
  for (const auto& g : c.globals) globals.append(nb::make_tuple(text(g.module), text(g.name), text(g.where)));
  d["metadata"] = meta;
  d["facts"] = facts;
  d["globals"] = globals;
  return d;
}

// metadata=: (key, value) pairs of str (sorted by the caller), each refused with
// InvalidArgumentError unless it is a str of UTF-8 text (FromPy::utf8).
WriteOptions write_options(nb::handle metadata, unsigned threads, bool empty_metadata = false) {
  WriteOptions o;
  for (nb::handle pair : metadata) {
    std::string kv[2];
    for (int i = 0; i < 2; ++i) {
      nb::object x = pair[i];
      if (!PyUnicode_Check(x.ptr()))
        throw Error(rules::kInvalidArgument,
                    "metadata keys and values are str, not " + nb::cast<std::string>(x.type().attr("__name__")));
      kv[i] = FromPy::utf8(x);
    }
    o.metadata.emplace_back(std::move(kv[0]), std::move(kv[1]));
  }
  o.empty_metadata = empty_metadata;
  o.threads = threads;
  return o;
}

// The rules Python code raises (tensorseal.errors.error): the C++ side defines every
// rule id, Python only picks one.
// tensorseal.lightning refuses a checkpoint by the scan rules, as the core does.
constexpr Rule kPythonRules[] = {rules::kInvalidArgument, rules::kUnknownGlobal, rules::kDangerousGlobal};

nb::dict tensors_to_py(const Checkpoint& c, const std::string& framework) {
  nb::dict d = checkpoint_to_py(c, framework, false);
  ToPy conv;
  conv.framework = framework;
  nb::list tensors;
  for (const auto& ref : collect_tensors(c.root)) {
    const Tensor& t = *ref.tensor;
    const std::uint64_t at =
        t.storage->file_offset() + static_cast<std::uint64_t>(t.storage_offset) * itemsize(t.dtype);
    tensors.append(nb::make_tuple(ref.path, conv.tensor(t), std::string(name(t.dtype)), at));
  }
  d["tensors"] = tensors;
  return d;
}

// A path (str / os.PathLike, already fspath'd by the caller into a str) is read from
// disk; anything else is an in-memory object converted like save() does.
Checkpoint checkpoint_of(nb::handle obj, const std::string& name, const ReadOptions& options) {
  if (PyUnicode_Check(obj.ptr())) {
    std::string path = nb::cast<std::string>(obj);
    nb::gil_scoped_release nogil;
    return read_file(path, options);
  }
  FromPy conv;
  Checkpoint c;
  c.file = name;
  c.root = conv.convert(obj);
  return c;
}

// A list of str built in one pass (10,000 tensor names: no per-item append).
nb::list names_to_py(const SafetensorsIndex& idx, const std::vector<std::uint32_t>& order) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(order.size()));
  if (list == nullptr) throw nb::python_error();
  nb::list out = nb::steal<nb::list>(list);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::string& n = idx.entries[order[i]].name;
    PyObject* s = PyUnicode_DecodeUTF8(n.data(), static_cast<Py_ssize_t>(n.size()), "surrogateescape");
    if (s == nullptr) throw nb::python_error();
    PyList_SetItem(list, static_cast<Py_ssize_t>(i), s);  // steals s; in the limited API (abi3 wheel)
  }
  return out;
}

}  // namespace

namespace tensorseal::py {
void bind_dcp(nb::module_& m);  // dcp.cc
}  // namespace tensorseal::py

NB_MODULE(_tensorseal, m) {
  m.doc() = "tensorseal C++ core (use the tensorseal package, not this module)";
  m.attr("__version__") = kVersion;

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      nb::object errors = nb::module_::import_("tensorseal.errors");
      nb::object cls = errors.attr("class_for_kind")(std::string(kind_name(e.kind())));
      nb::object offset = e.offset() == kNoOffset ? nb::none() : nb::cast(e.offset());
      nb::object exc = cls(std::string(e.what()), e.rule(), e.file(), offset, e.detail());
      PyErr_SetObject(cls.ptr(), exc.ptr());
    }
  });

  // weights_only: raise (require_safe) when the file references a global outside the
  // known-safe set, before any object is made.
  m.def(
      "read_file",
      [](const std::string& path, const std::string& framework, bool verify, bool with_root, bool weights_only,
         const LimitPairs& limits, const std::string& format, bool in_memory, const std::string& encoding) {
        const ReadOptions ro = read_options(limits, verify, format, in_memory, encoding);
        Checkpoint c;
        {
          nb::gil_scoped_release nogil;
          c = read_file(path, ro);
          if (weights_only) require_safe(scan(c));
        }
        return checkpoint_to_py(c, framework, with_root);
      },
      nb::arg("path"), nb::arg("framework") = "torch", nb::arg("verify") = true, nb::arg("with_root") = true,
      nb::arg("weights_only") = false, nb::arg("limits") = LimitPairs{}, nb::arg("format") = "",
      nb::arg("in_memory") = false, nb::arg("encoding") = "utf-8");

  // The tensors of a file as a flat list of (path, tensor, dtype, file offset), paths as
  // in collect_tensors (for safetensors files: the tensor names). Zero-copy like read_file.
  m.def(
      "read_tensors",
      [](const std::string& path, const std::string& framework, const LimitPairs& limits, const std::string& format) {
        const ReadOptions ro = read_options(limits, true, format);
        Checkpoint c;
        {
          nb::gil_scoped_release nogil;
          c = read_file(path, ro);
        }
        return tensors_to_py(c, framework);
      },
      nb::arg("path"), nb::arg("framework") = "torch", nb::arg("limits") = LimitPairs{}, nb::arg("format") = "");

  // Lazy access to a safetensors file (tensorseal.safetensors.safe_open): the header
  // parsed and validated, the file mapped, a tensor made on request.
  nb::class_<SafetensorsIndex>(m, "SafetensorsIndex")
      .def("__len__", [](const SafetensorsIndex& idx) { return idx.entries.size(); })
      .def(
          "keys", [](const SafetensorsIndex& idx) { return names_to_py(idx, idx.by_name); },
          "Tensor names, sorted (bytewise = code point order).")
      .def(
          "offset_keys",
          [](const SafetensorsIndex& idx) {
            std::vector<std::uint32_t> order = idx.by_name;  // by (data offset, name)
            std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
              return idx.entries[a].begin < idx.entries[b].begin;
            });
            return names_to_py(idx, order);
          },
          "Tensor names in the order of their data in the file.")
      .def(
          "metadata",
          [](const SafetensorsIndex& idx) {
            nb::list out;
            for (const auto& [k, v] : idx.metadata) out.append(nb::make_tuple(py_text(k), py_text(v)));
            return out;
          },
          "__metadata__ as (key, value) pairs in file order.")
      .def(
          "has_metadata",
          [](const SafetensorsIndex& idx) {
            return idx.metadata_position != SafetensorsIndex::kAbsent && !idx.metadata_null;
          },
          "True when the header holds a __metadata__ object (possibly empty); false when absent or null.")
      .def("structured", &SafetensorsIndex::structured,
           "A whole checkpoint written by tensorseal (read it with read_tensors to get its tree).")
      .def(
          "tensor",
          [](const SafetensorsIndex& idx, const std::string& key, const std::string& framework) -> nb::object {
            const SafetensorsEntry* e = idx.find(key);
            if (e == nullptr) return nb::none();
            auto t = idx.tensor(*e);
            ToPy conv;
            conv.framework = framework;
            return nb::make_tuple(conv.tensor(*t), std::string(name(e->dtype)));
          },
          nb::arg("name"), nb::arg("framework") = "torch",
          "(tensor, dtype name) of one entry, a zero-copy view of the mapping; None when absent.");

  // The index of a safetensors file, or None when the file is another format.
  m.def(
      "safetensors_index",
      [](const std::string& path) -> std::optional<SafetensorsIndex> {
        nb::gil_scoped_release nogil;
        auto file = MappedFile::open(path);
        if (detect_format(file->bytes()) != Format::kSafetensors) return std::nullopt;
        return read_safetensors_index(std::move(file));
      },
      nb::arg("path"));

  m.def(
      "read_bytes_tensors",
      [](nb::bytes data, const std::string& name, const std::string& framework, const LimitPairs& limits,
         const std::string& format) {
        std::span<const std::byte> b(reinterpret_cast<const std::byte*>(data.c_str()), data.size());
        const ReadOptions ro = read_options(limits, true, format);
        Checkpoint c;
        {
          nb::gil_scoped_release nogil;
          c = read_bytes(b, name, ro);
        }
        return tensors_to_py(c, framework);
      },
      nb::arg("data"), nb::arg("name") = "<bytes>", nb::arg("framework") = "torch", nb::arg("limits") = LimitPairs{},
      nb::arg("format") = "");

  m.def(
      "read_bytes",
      [](nb::bytes data, const std::string& name, const std::string& framework, bool weights_only,
         const LimitPairs& limits, const std::string& format, const std::string& encoding) {
        std::span<const std::byte> b(reinterpret_cast<const std::byte*>(data.c_str()), data.size());
        const ReadOptions ro = read_options(limits, true, format, false, encoding);
        Checkpoint c;
        {
          nb::gil_scoped_release nogil;  // `data` is immutable and held by the caller
          c = read_bytes(b, name, ro);
          if (weights_only) require_safe(scan(c));
        }
        return checkpoint_to_py(c, framework, true);
      },
      nb::arg("data"), nb::arg("name") = "<bytes>", nb::arg("framework") = "torch", nb::arg("weights_only") = false,
      nb::arg("limits") = LimitPairs{}, nb::arg("format") = "", nb::arg("encoding") = "utf-8");

  m.def(
      "write_file",
      [](nb::handle obj, const std::string& path, const std::string& format, nb::handle metadata, unsigned threads,
         bool split_storages, bool empty_metadata, const std::vector<std::pair<std::string, std::string>>& options,
         bool fsync, nb::handle progress) {
        FromPy conv;
        conv.split_storages = split_storages;
        Format f = parse_format(format);
        WriteOptions o = write_options(metadata, threads, empty_metadata);
        for (const auto& [name, value] : options) set_option(o.format_options, f, name, value);
        o.fsync = fsync;
        o.progress = progress_of(progress);
        // Many tensors to .safetensors or .pt: the file is written while the dict converts
        // (StreamedWrite). Declared after conv: stopped before conv lets go.
        std::unique_ptr<StreamedWrite> stream;
        if (f == Format::kSafetensors || f == Format::kTorchZip) stream = conv.begin_stream(obj, path, f, o);
        Value root = conv.convert(obj);
        bool streamed = false;
        {
          nb::gil_scoped_release nogil;
          streamed = stream && stream->finish(root);
          if (!streamed) {
            stream.reset();  // its temp file goes before the ordinary write needs the room
            write_file(root, path, f, o);
          }
        }
        stream.reset();
        conv.dispose(std::move(root));
        if (streamed) ++streamed_writes;
      },
      nb::arg("obj"), nb::arg("path"), nb::arg("format"), nb::arg("metadata") = nb::tuple(), nb::arg("threads") = 0,
      nb::arg("split_storages") = false, nb::arg("empty_metadata") = false,
      nb::arg("options") = std::vector<std::pair<std::string, std::string>>{}, nb::arg("fsync") = true,
      nb::arg("progress") = nb::none());

  m.def("_streamed_writes", [] { return streamed_writes; });

  m.def("parse_shard_size", [](const std::string& text) { return parse_shard_size(text); });

  m.def(
      "write_bytes",
      [](nb::handle obj, const std::string& format, nb::handle metadata, unsigned threads, bool split_storages,
         bool empty_metadata) {
        const WriteOptions o = write_options(metadata, threads, empty_metadata);  // reads Python objects: GIL held
        FromPy conv;
        conv.split_storages = split_storages;
        Value root = conv.convert(obj);
        Format f = parse_format(format);
        std::string out;
        {
          nb::gil_scoped_release nogil;
          out = write_bytes(root, f, o);
        }
        conv.dispose(std::move(root));
        return nb::bytes(out.data(), out.size());
      },
      nb::arg("obj"), nb::arg("format"), nb::arg("metadata") = nb::tuple(), nb::arg("threads") = 0,
      nb::arg("split_storages") = false, nb::arg("empty_metadata") = false);

  m.def(
      "hash_file",
      [](const std::string& path, bool fast, unsigned threads, const LimitPairs& limits, nb::handle progress,
         const std::string& format) {
        HashOptions o;
        o.algo = fast ? HashAlgo::kXxh3 : HashAlgo::kSha256;
        o.threads = threads;
        o.read.limits = limits_of(limits);
        o.read.format = format_of(format);
        o.progress = progress_of(progress);
        nb::gil_scoped_release nogil;
        return hash_file(path, o);  // = content_hash(read_file(path).root), zip CRCs fused into the pass
      },
      nb::arg("path"), nb::arg("fast") = false, nb::arg("threads") = 0, nb::arg("limits") = LimitPairs{},
      nb::arg("progress") = nb::none(), nb::arg("format") = "");

  m.def(
      "hash_object",
      [](nb::handle obj, bool fast, unsigned threads, nb::handle progress) {
        FromPy conv;
        Value root = conv.convert(obj);
        HashOptions o;
        o.algo = fast ? HashAlgo::kXxh3 : HashAlgo::kSha256;
        o.threads = threads;
        o.progress = progress_of(progress);
        nb::gil_scoped_release nogil;
        return content_hash(root, o);
      },
      nb::arg("obj"), nb::arg("fast") = false, nb::arg("threads") = 0, nb::arg("progress") = nb::none());

  // Tools: each returns exactly what the CLI prints with --json (the library's own
  // renderers), so Python and CLI results agree by construction.
  m.def(
      "inspect_json",
      [](const std::string& path, unsigned threads, const LimitPairs& limits, nb::handle progress,
         const std::string& format) {
        InspectOptions o;
        o.threads = threads;
        o.read.limits = limits_of(limits);
        o.read.format = format_of(format);
        o.progress = progress_of(progress);
        nb::gil_scoped_release nogil;
        return to_json(inspect_file(path, o));
      },
      nb::arg("path"), nb::arg("threads") = 0, nb::arg("limits") = LimitPairs{}, nb::arg("progress") = nb::none(),
      nb::arg("format") = "");

  m.def(
      "is_canonical",
      [](const std::string& path, unsigned threads, const LimitPairs& limits, nb::handle progress) {
        CanonCheckOptions o;
        o.threads = threads;
        o.read.limits = limits_of(limits);
        o.progress = progress_of(progress);
        nb::gil_scoped_release nogil;
        return check_canonical_file(path, o).canonical;  // == tseal canon --check
      },
      nb::arg("path"), nb::arg("threads") = 0, nb::arg("limits") = LimitPairs{}, nb::arg("progress") = nb::none());

  m.def(
      "diff_json",
      [](nb::handle a, nb::handle b, const std::string& name_a, const std::string& name_b, double atol, double rtol,
         std::uint64_t ulp, unsigned threads, const std::string& report, const LimitPairs& limits,
         nb::handle progress) {
        const ReadOptions ro = read_options(limits);
        Checkpoint ca = checkpoint_of(a, name_a, ro);
        Checkpoint cb = checkpoint_of(b, name_b, ro);
        DiffOptions o;
        o.atol = atol;
        o.rtol = rtol;
        o.ulp = ulp;
        o.threads = threads;
        o.histogram = !report.empty();
        o.progress = progress_of(progress);
        nb::gil_scoped_release nogil;
        const DiffReport r = diff(ca, cb, o);
        if (!report.empty()) write_html_report(r, report);
        return to_json(r);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("name_a"), nb::arg("name_b"), nb::arg("atol") = 0.0, nb::arg("rtol") = 0.0,
      nb::arg("ulp") = 0, nb::arg("threads") = 0, nb::arg("report") = "", nb::arg("limits") = LimitPairs{},
      nb::arg("progress") = nb::none());

  m.def(
      "explain_json",
      [](nb::handle a, nb::handle b, const std::string& name_a, const std::string& name_b, const LimitPairs& limits) {
        const ReadOptions ro = read_options(limits);
        Checkpoint ca = checkpoint_of(a, name_a, ro);
        Checkpoint cb = checkpoint_of(b, name_b, ro);
        nb::gil_scoped_release nogil;
        return to_json(explain(ca, cb));
      },
      nb::arg("a"), nb::arg("b"), nb::arg("name_a"), nb::arg("name_b"), nb::arg("limits") = LimitPairs{});

  m.def(
      "verify_json",
      [](const std::vector<std::string>& paths, unsigned threads, const LimitPairs& limits, nb::handle progress) {
        VerifyOptions o;
        o.threads = threads;
        o.read.limits = limits_of(limits);
        o.progress = progress_of(progress);
        nb::gil_scoped_release nogil;
        std::vector<VerifyResult> results;
        for (const auto& p : paths) results.push_back(verify_file(p, o));
        return to_json(results);
      },
      nb::arg("paths"), nb::arg("threads") = 0, nb::arg("limits") = LimitPairs{}, nb::arg("progress") = nb::none());

  m.def(
      "scan_json",
      [](const std::string& path, const LimitPairs& limits) {
        const ReadOptions ro = read_options(limits);
        nb::gil_scoped_release nogil;
        return to_json(scan_file(path, ro));
      },
      nb::arg("path"), nb::arg("limits") = LimitPairs{});

  // The Limits fields with their defaults, in declaration order: (name, value).
  bind_dcp(m);

  m.def("limit_defaults", []() {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    const Limits defaults;
    for (const auto name : limit_names()) out.emplace_back(std::string(name), get_limit(defaults, name));
    return out;
  });

  // (kind name, one-line message) of an error raised by Python code, rendered by
  // Error::what() so that it reads exactly like the errors raised here.
  m.def(
      "error_parts",
      [](const std::string& rule, const std::string& detail, const std::string& file,
         std::optional<std::uint64_t> offset) {
        for (const Rule& r : kPythonRules) {
          if (r.id != rule) continue;
          const Error e(r, detail, file, offset.value_or(kNoOffset));
          return nb::make_tuple(std::string(kind_name(e.kind())), std::string(e.what()));
        }
        throw Error(rules::kInternal, "Python raised an error with an undeclared rule '" + rule + "'");
      },
      nb::arg("rule"), nb::arg("detail"), nb::arg("file") = "", nb::arg("offset") = nb::none());

  m.def(
      "classify_global",
      [](const std::string& module, const std::string& name) {
        std::string reason;
        Verdict v = classify_global(module, name, &reason);
        return nb::make_tuple(std::string(verdict_name(v)), reason);
      },
      nb::arg("module"), nb::arg("name"));

  m.def("detect_format", [](nb::bytes head) {
    return std::string(format_name(detect_format({reinterpret_cast<const std::byte*>(head.c_str()), head.size()})));
  });
  m.def("format_for_extension",
        [](const std::string& path) { return std::string(format_name(format_for_extension(path))); });
  m.def("format_named", [](const std::string& name) {
    const auto f = format_from_name(name);
    return std::string(f ? format_name(*f) : "unknown");
  });
  m.def("formats", []() {
    nb::list out;
    for (const auto& f : formats()) {
      nb::list aliases, extensions;
      for (auto a : f.aliases) aliases.append(std::string(a));
      for (auto e : f.extensions) extensions.append(std::string(e));
      nb::dict d;
      d["name"] = std::string(f.name);
      d["aliases"] = aliases;
      d["extensions"] = extensions;
      d["description"] = std::string(f.description);
      d["writable"] = f.writable;
      d["canonical"] = std::string(format_name(f.canonical));
      d["directory"] = f.directory;
      nb::list params;  // the writer's options a caller may set (keywords of save)
      for (const auto& p : f.params)
        if (!p.flag.empty()) params.append(nb::make_tuple(std::string(p.name), std::string(p.help)));
      d["options"] = params;
      out.append(d);
    }
    return out;
  });
  // (DTensor at each of its modules, the classes of its spec): the glue builds and
  // describes these and no other classes of torch.distributed.
  m.def("dtensor_classes", []() {
    auto list = [](std::span<const TorchClass> classes) {
      nb::list out;
      for (const auto& c : classes) out.append(nb::make_tuple(std::string(c.module), std::string(c.name)));
      return out;
    };
    return nb::make_tuple(list(dtensor_types()), list(dtensor_spec_classes()));
  });
  m.def("sparse_layouts", []() {
    nb::list out;
    for (auto l : sparse_layouts()) out.append(std::string(l));
    return out;
  });
  m.def("dtypes", []() {
    nb::list out;
    for (const auto& d : all_dtypes())
      out.append(nb::make_tuple(std::string(d.name), d.bits, std::string(d.safetensors), std::string(d.numpy)));
    return out;
  });
}
