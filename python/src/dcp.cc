// tensorseal._tensorseal's DCP part: the core of the storage plugin tensorseal.dcp
// (python/tensorseal/dcp.py), with DCP's planner objects as plain tuples.
#include "convert.h"

namespace tensorseal::py {
namespace {

// ---- tensorseal.dcp: plain tuples <-> the DCP records (tensorseal/dcp/_core glue) ----

using Ints = std::vector<std::int64_t>;

DType dtype_arg(const std::string& n) {
  auto t = dtype_from_name(n);
  if (!t) throw Error(rules::kInvalidArgument, "unknown dtype '" + n + "'", "");
  return *t;
}

nb::object opt_ints(const std::optional<Ints>& v) { return v ? nb::cast(*v) : nb::none(); }
std::optional<Ints> ints_arg(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<Ints>(h);
}

// (fqn, offsets | None, sizes, dtype, file, offset, length, checksum, digest,
//  [(leaf chunk, raw digest bytes)])
nb::tuple record_to_py(const DcpRecord& r) {
  nb::list chunks;
  for (const auto& [c, d] : r.leaf_chunks) chunks.append(nb::make_tuple(c, nb::bytes(d.data(), d.size())));
  return nb::make_tuple(r.fqn, opt_ints(r.offsets), r.sizes, std::string(name(r.dtype)), r.storage.relative_path,
                        r.storage.offset, r.storage.length, r.checksum, r.digest, chunks);
}
DcpRecord record_from_py(nb::handle h) {
  nb::tuple t = nb::cast<nb::tuple>(h);
  DcpRecord r;
  r.fqn = nb::cast<std::string>(t[0]);
  r.offsets = ints_arg(t[1]);
  r.sizes = nb::cast<Ints>(t[2]);
  r.dtype = dtype_arg(nb::cast<std::string>(t[3]));
  r.storage = {nb::cast<std::string>(t[4]), nb::cast<std::uint64_t>(t[5]), nb::cast<std::uint64_t>(t[6])};
  r.checksum = nb::cast<std::string>(t[7]);
  r.digest = nb::cast<std::string>(t[8]);
  if (t.size() > 9)
    for (nb::handle c : nb::cast<nb::list>(t[9])) {
      nb::tuple ct = nb::cast<nb::tuple>(c);
      nb::bytes d = nb::cast<nb::bytes>(ct[1]);
      r.leaf_chunks.emplace_back(nb::cast<std::uint64_t>(ct[0]), std::string(d.c_str(), d.size()));
    }
  return r;
}

// (fqn, is_tensor, dtype, requires_grad, pin_memory, memory_format, size,
//  [(offsets, sizes)], path tuple | None)
nb::tuple entry_to_py(const DcpEntry& e) {
  nb::list chunks;
  for (const auto& c : e.chunks) chunks.append(nb::make_tuple(c.offsets, c.sizes));
  nb::object path = nb::none();
  if (!e.path.empty()) {
    nb::list p;
    for (const auto& x : e.path)
      p.append(x.is(Value::Kind::kStr) ? nb::object(py_text(x.as_str())) : nb::object(nb::int_(x.as_int())));
    path = nb::tuple(p);
  }
  return nb::make_tuple(e.fqn, e.is_tensor, std::string(name(e.dtype)), e.requires_grad, e.pin_memory, e.memory_format,
                        e.size, chunks, path);
}
DcpEntry entry_from_py(nb::handle h) {
  nb::tuple t = nb::cast<nb::tuple>(h);
  DcpEntry e;
  e.fqn = nb::cast<std::string>(t[0]);
  e.is_tensor = nb::cast<bool>(t[1]);
  if (e.is_tensor) e.dtype = dtype_arg(nb::cast<std::string>(t[2]));
  e.requires_grad = nb::cast<bool>(t[3]);
  e.pin_memory = nb::cast<bool>(t[4]);
  e.memory_format = nb::cast<std::int64_t>(t[5]);
  e.size = nb::cast<Ints>(t[6]);
  for (nb::handle c : nb::cast<nb::list>(t[7])) {
    nb::tuple ct = nb::cast<nb::tuple>(c);
    e.chunks.push_back({nb::cast<Ints>(ct[0]), nb::cast<Ints>(ct[1])});
  }
  if (!t[8].is_none())
    for (nb::handle x : t[8]) {
      if (nb::isinstance<nb::str>(x))
        e.path.push_back(Value::str(nb::cast<std::string>(x)));
      else if (nb::isinstance<nb::int_>(x))
        e.path.push_back(Value(nb::cast<std::int64_t>(x)));
      else
        throw Error(rules::kInvalidArgument,
                    "planner_data path of '" + e.fqn + "' holds a " + nb::cast<std::string>(nb::str(x.type())), "");
    }
  return e;
}

// tensorseal.dcp.content_hash's core: this rank's items, then the plan over every
// rank's summary (LiveHash), driven by the Python collectives.
struct Live {
  std::vector<LiveItem> items;
  HashAlgo algo = HashAlgo::kSha256;
  unsigned threads = 0;
  std::optional<LiveHash> hash;
  LiveHash& plan() {
    if (!hash) throw Error(rules::kInvalidArgument, "LiveHash used before plan()", "");
    return *hash;
  }
};

std::vector<Value> path_arg(nb::handle h, const std::string& fqn) {
  std::vector<Value> out;
  for (nb::handle x : h) {
    if (nb::isinstance<nb::str>(x))
      out.push_back(Value::str(nb::cast<std::string>(x)));
    else if (nb::isinstance<nb::int_>(x))
      out.push_back(Value(nb::cast<std::int64_t>(x)));
    else
      throw Error(rules::kInvalidArgument,
                  "the DCP path of '" + fqn + "' holds a " + nb::cast<std::string>(nb::str(x.type())), "");
  }
  return out;
}

}  // namespace

void bind_dcp(nb::module_& m) {
  m.def(
      "dcp_verify_part",
      [](const std::string& dir, std::uint32_t rank, std::uint32_t world, bool fast, const LimitPairs& limits,
         unsigned threads) {
        ReadOptions o = read_options(limits);
        std::string p;
        {
          nb::gil_scoped_release nogil;
          p = dcp_verify_part(dir, rank, world, fast ? HashAlgo::kXxh3 : HashAlgo::kSha256, o, threads);
        }
        return nb::bytes(p.data(), p.size());
      },
      nb::arg("dir"), nb::arg("rank"), nb::arg("world"), nb::arg("fast"), nb::arg("limits"), nb::arg("threads"));
  m.def(
      "dcp_verify_finish",
      [](const std::string& dir, nb::list parts, bool fast, const LimitPairs& limits) {
        std::vector<std::string> ps;
        for (nb::handle h : parts) {
          nb::bytes b = nb::cast<nb::bytes>(h);
          ps.emplace_back(b.c_str(), b.size());
        }
        ReadOptions o = read_options(limits);
        nb::gil_scoped_release nogil;
        return dcp_verify_finish(dir, ps, fast ? HashAlgo::kXxh3 : HashAlgo::kSha256, o);
      },
      nb::arg("dir"), nb::arg("parts"), nb::arg("fast"), nb::arg("limits"));
  // items: [(fqn, path, (dtype, shape, [(offsets, sizes, tensor)]) | None, value)]
  nb::class_<Live>(m, "LiveHash")
      .def(
          "__init__",
          [](Live* self, nb::list items, bool fast, unsigned threads) {
            new (self) Live();
            self->algo = fast ? HashAlgo::kXxh3 : HashAlgo::kSha256;
            self->threads = threads;
            FromPy conv;
            for (nb::handle h : items) {
              nb::tuple t = nb::cast<nb::tuple>(h);
              LiveItem it;
              it.fqn = nb::cast<std::string>(t[0]);
              it.path = path_arg(t[1], it.fqn);
              if (!t[2].is_none()) {
                nb::tuple spec = nb::cast<nb::tuple>(t[2]);
                it.is_tensor = true;
                it.dtype = dtype_arg(nb::cast<std::string>(spec[0]));
                it.shape = nb::cast<Ints>(spec[1]);
                for (nb::handle b : nb::cast<nb::list>(spec[2])) {
                  nb::tuple bt = nb::cast<nb::tuple>(b);
                  Value v = conv.convert(bt[2]);
                  if (!v.is(Value::Kind::kTensor))
                    throw Error(rules::kInvalidArgument, "the local data of '" + it.fqn + "' is not a tensor", "");
                  it.local.push_back({nb::cast<Ints>(bt[0]), nb::cast<Ints>(bt[1]), v.as_tensor()});
                }
              } else {
                it.value = conv.convert(t[3]);
              }
              self->items.push_back(std::move(it));
            }
          },
          nb::arg("items"), nb::arg("fast"), nb::arg("threads"))
      .def("summary",
           [](const Live& l) {
             nb::gil_scoped_release nogil;
             return LiveHash::summary(l.items, l.algo, l.threads);
           })
      .def(
          "plan",
          [](Live& l, const std::vector<std::string>& summaries, std::uint32_t rank, std::uint64_t round_bytes) {
            nb::gil_scoped_release nogil;
            l.hash.emplace(std::move(l.items), summaries, rank, l.algo, l.threads, round_bytes);
          },
          nb::arg("summaries"), nb::arg("rank"), nb::arg("round_bytes"))
      // (send bytes, send counts, recv counts) or None
      .def("next_round",
           [](Live& l) -> nb::object {
             std::optional<LiveHash::Round> r;
             {
               nb::gil_scoped_release nogil;
               r = l.plan().next_round();
             }
             if (!r) return nb::none();
             return nb::make_tuple(nb::bytes(reinterpret_cast<const char*>(r->send.data()), r->send.size()),
                                   r->send_counts, r->recv_counts);
           })
      .def("receive",
           [](Live& l, nb::bytes b) {
             std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(b.c_str()), b.size());
             nb::gil_scoped_release nogil;
             l.plan().receive(bytes);
           })
      .def("partial",
           [](Live& l) {
             std::string p;
             {
               nb::gil_scoped_release nogil;
               p = l.plan().partial();
             }
             return nb::bytes(p.data(), p.size());
           })
      .def("finish",
           [](const Live& l, nb::list partials) {
             std::vector<std::string> ps;
             for (nb::handle h : partials) {
               nb::bytes b = nb::cast<nb::bytes>(h);
               ps.emplace_back(b.c_str(), b.size());
             }
             nb::gil_scoped_release nogil;
             if (!l.hash) throw Error(rules::kInvalidArgument, "LiveHash used before plan()", "");
             return l.hash->finish(ps);
           })
      .def("stats", [](const Live& l) {
        if (!l.hash) return nb::dict();
        const auto s = l.hash->stats();
        nb::dict d;
        d["hashed_bytes"] = s.hashed_bytes;
        d["sent_bytes"] = s.sent_bytes;
        d["received_bytes"] = s.received_bytes;
        d["rounds"] = s.rounds;
        return d;
      });

  // tensorseal.dcp (python/tensorseal/dcp.py): the storage plugin's core.
  m.def("dcp_staging_dir", [](const std::string& target) { return dcp_staging_dir(target).string(); });
  m.def(
      "dcp_prepare",
      [](const std::string& target, bool overwrite) {
        nb::gil_scoped_release nogil;
        dcp_prepare(target, overwrite);
      },
      nb::arg("target"), nb::arg("overwrite"));
  // items: [(fqn, offsets | None, tensor | bytes[, global size])]; returns record tuples.
  m.def(
      "dcp_write_items",
      [](const std::string& target, std::uint32_t rank, nb::list items, bool one_file, bool fsync, unsigned threads) {
        std::vector<DcpWriteItem> in;
        FromPy conv;
        for (nb::handle h : items) {
          nb::tuple t = nb::cast<nb::tuple>(h);
          DcpWriteItem it;
          it.fqn = nb::cast<std::string>(t[0]);
          it.offsets = ints_arg(t[1]);
          if (t.size() > 3 && !t[3].is_none()) it.global_size = nb::cast<Ints>(t[3]);
          if (nb::isinstance<nb::bytes>(t[2])) {
            nb::bytes b = nb::cast<nb::bytes>(t[2]);
            it.value = Value::bytes(std::string(b.c_str(), b.size()));
          } else {
            it.value = conv.convert(t[2]);
          }
          in.push_back(std::move(it));
        }
        WriteOptions o;
        o.fsync = fsync;
        o.threads = threads;
        std::vector<DcpRecord> out;
        {
          nb::gil_scoped_release nogil;
          out = dcp_write_items(target, rank, std::move(in), one_file, o);
        }
        nb::list l;
        for (const auto& r : out) l.append(record_to_py(r));
        return l;
      },
      nb::arg("target"), nb::arg("rank"), nb::arg("items"), nb::arg("one_file"), nb::arg("fsync"),
      nb::arg("threads") = 1);
  m.def(
      "dcp_commit",
      [](const std::string& target, nb::list planned, nb::list records, bool fsync, bool content_hash) {
        DcpMetadata md;
        for (nb::handle h : planned) md.entries.push_back(entry_from_py(h));
        std::vector<DcpRecord> rs;
        for (nb::handle h : records) rs.push_back(record_from_py(h));
        nb::gil_scoped_release nogil;
        dcp_commit(target, md, std::move(rs), fsync, content_hash);
      },
      nb::arg("target"), nb::arg("planned"), nb::arg("records"), nb::arg("fsync"), nb::arg("content_hash") = true);

  nb::class_<DcpReader>(m, "DcpReader")
      .def(
          "__init__",
          [](DcpReader* self, const std::string& dir, const LimitPairs& limits) {
            ReadOptions o = read_options(limits);
            nb::gil_scoped_release nogil;
            new (self) DcpReader(dir, o);
          },
          nb::arg("dir"), nb::arg("limits") = LimitPairs{})
      .def("has_manifest", &DcpReader::has_manifest)
      // (entries, storage [(fqn, offset | None, index | None, file, file offset, length)],
      //  save_id, checkpoint_id, version)
      .def("metadata",
           [](const DcpReader& r) {
             const DcpMetadata& md = r.metadata();
             nb::list entries, storage;
             for (const auto& e : md.entries) entries.append(entry_to_py(e));
             for (const auto& s : md.storage_order)
               storage.append(nb::make_tuple(s.fqn, opt_ints(s.offset), s.index ? nb::cast(*s.index) : nb::none(),
                                             s.storage.relative_path, s.storage.offset, s.storage.length));
             auto opt = [](const std::optional<std::string>& v) { return v ? nb::cast(*v) : nb::none(); };
             return nb::make_tuple(entries, storage, opt(md.save_id), opt(md.checkpoint_id), opt(md.version));
           })
      .def(
          "chunk",
          [](DcpReader& r, const std::string& fqn, const Ints& offsets, const std::string& framework) {
            std::shared_ptr<const Tensor> t;
            {
              nb::gil_scoped_release nogil;
              t = r.chunk(fqn, offsets);
            }
            ToPy conv;
            conv.framework = framework;
            return conv.tensor(*t);
          },
          nb::arg("fqn"), nb::arg("offsets"), nb::arg("framework") = "torch")
      .def(
          "bytes_item",
          [](DcpReader& r, const std::string& fqn, bool weights_only) {
            std::string b;
            {
              nb::gil_scoped_release nogil;
              b = r.bytes_item(fqn, weights_only);
            }
            return nb::bytes(b.data(), b.size());
          },
          nb::arg("fqn"), nb::arg("weights_only") = true);
}

}  // namespace tensorseal::py
