// Canonical legacy torch bytes (the format of torch.save(..., _use_new_zipfile_
// serialization=False) and of the payloads inside pickle.dumps(storage)):
//
//   pickle(magic) pickle(1001) pickle(sys_info) pickle(object) pickle(keys) {u64 numel, bytes}*
//
// with storage keys "0","1",... in first-use order instead of memory addresses, the
// key list in that order, sys_info as torch 2.x writes it on little-endian machines,
// and each pickle canonical (protocol 2, fresh memo).
#include "pickle/writer.h"
#include "torch/constants.h"
#include "torch/emit.h"
#include "torch/format.h"
#include "torch/plan.h"
#include "util/endian.h"

namespace tensorseal::detail::torch {

namespace {
std::string plain_pickle(const Value& v) {
  pickle::Writer w({});
  return w.finish(v);
}
}  // namespace

void write_torch_legacy(const Value& root, const WriteOptions&, io::Sink& sink) {
  torch::StoragePlan plan(root);
  pickle::Writer pw(torch::make_hooks(plan, true));
  const std::string object = pw.finish(root);

  // 0x1950a86a20f9469cfc6c as pickle's minimal two's complement (10 bytes, LE).
  const std::string magic_le("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10);
  sink.write(plain_pickle(Value(BigInt{magic_le})));
  sink.write(plain_pickle(Value(torch::kLegacyProtocolVersion)));
  Value sys = Value::dict();
  sys.as_dict().set(Value::str("protocol_version"), Value(torch::kLegacyProtocolVersion));
  sys.as_dict().set(Value::str("little_endian"), Value(true));
  Value sizes = Value::dict();
  sizes.as_dict().set(Value::str("short"), Value(2));
  sizes.as_dict().set(Value::str("int"), Value(4));
  sizes.as_dict().set(Value::str("long"), Value(4));
  sys.as_dict().set(Value::str("type_sizes"), sizes);
  sink.write(plain_pickle(sys));
  sink.write(object);
  std::vector<Value> keys;
  for (auto* s : plan.used()) keys.push_back(Value::str(s->key));
  sink.write(plain_pickle(Value::list(std::move(keys))));
  for (auto* s : plan.used()) {
    const std::uint64_t item = itemsize(s->dtype);
    std::string n;
    util::append_le<std::uint64_t>(n, item ? s->nbytes / item : s->nbytes);
    sink.write(n);
    s->for_each_run([&](std::span<const std::byte> run) { sink.write(run); });
  }
}

}  // namespace tensorseal::detail::torch
