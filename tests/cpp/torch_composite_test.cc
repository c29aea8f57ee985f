// Composite tensors (torch/composite.h): encode writes the rebuild call torch.save
// writes, composite_of reads the same record back, through a torch file too; a call the
// reader's checks refuse fails with its rule id.
#include <gtest/gtest.h>

#include <cstring>

#include "tensorseal/tensorseal.h"
#include "test_util.h"
#include "torch/composite.h"

namespace tensorseal {
namespace {

using detail::torch::composite_of;
using detail::torch::encode;

std::shared_ptr<const Tensor> ints(std::vector<std::int64_t> shape, std::vector<std::int64_t> xs) {
  std::vector<std::byte> b(xs.size() * 8);
  std::memcpy(b.data(), xs.data(), b.size());  // little-endian hosts only, as the library
  return make_contiguous(DType::kInt64, std::move(shape), Storage::owned(std::move(b), DType::kInt64));
}

std::shared_ptr<const Tensor> floats(std::vector<std::int64_t> shape, std::size_t n) {
  std::vector<float> xs(n);
  for (std::size_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i) + 0.5f;
  std::vector<std::byte> b(n * 4);
  std::memcpy(b.data(), xs.data(), b.size());
  return make_contiguous(DType::kFloat32, std::move(shape), Storage::owned(std::move(b), DType::kFloat32));
}

// The fields composite_of fills, compared; parts by their tensors' content.
void expect_same(const Composite& a, const Composite& b) {
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.stride, b.stride);
  EXPECT_EQ(a.requires_grad, b.requires_grad);
  EXPECT_EQ(a.parameter, b.parameter);
  ASSERT_EQ(a.parts.size(), b.parts.size());
  for (std::size_t i = 0; i < a.parts.size(); ++i) {
    EXPECT_EQ(a.parts[i].first, b.parts[i].first);
    EXPECT_EQ(a.parts[i].second->shape, b.parts[i].second->shape) << a.parts[i].first;
    std::vector<std::byte> sa, sb;
    const auto ba = a.parts[i].second->contiguous_bytes(sa);
    const auto bb = b.parts[i].second->contiguous_bytes(sb);
    EXPECT_TRUE(std::equal(ba.begin(), ba.end(), bb.begin(), bb.end())) << a.parts[i].first;
  }
  EXPECT_EQ(a.coalesced.has_value(), b.coalesced.has_value());
  EXPECT_EQ(a.requires_grad, b.requires_grad);
  EXPECT_EQ(a.ragged_idx, b.ragged_idx);
  EXPECT_EQ(a.type.module, b.type.module);
  EXPECT_EQ(a.stride, b.stride);
  EXPECT_EQ(a.storage_offset, b.storage_offset);
  EXPECT_EQ(repr(a.attributes, 400), repr(b.attributes, 400));
}

Composite make(std::string layout, std::vector<std::int64_t> shape,
               std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>> parts) {
  Composite c;
  c.layout = std::move(layout);
  c.shape = std::move(shape);
  c.parts = std::move(parts);
  return c;
}

Composite coo() {
  Composite c = make("sparse_coo", {3, 4}, {{"indices", ints({2, 2}, {0, 2, 1, 3})}, {"values", floats({2}, 2)}});
  c.coalesced = Value(true);
  return c;
}

Composite csc() {
  return make("sparse_csc", {3, 2},
              {{"ccol_indices", ints({3}, {0, 1, 2})}, {"row_indices", ints({2}, {0, 2})}, {"values", floats({2}, 2)}});
}

// Two components of 2 and 1 elements in a buffer of 3.
Composite nested(std::int64_t second_offset = 2) {
  return make("nested", {2},
              {{"buffer", floats({3}, 3)},
               {"sizes", ints({2, 1}, {2, 1})},
               {"strides", ints({2, 1}, {1, 1})},
               {"offsets", ints({2}, {0, second_offset})}});
}

Composite jagged() {
  Composite c = make("jagged", {2}, {{"values", floats({5, 2}, 10)}, {"offsets", ints({3}, {0, 3, 5})}});
  c.requires_grad = true;
  c.state = Value::dict();
  return c;
}

Composite dtensor() {
  auto local = floats({2, 3}, 6);
  Value slots = Value::dict();
  slots.as_dict().items.emplace_back(Value::str("_local_tensor"), Value(local));
  auto spec = std::make_shared<Object>();  // stays an opaque object when read
  spec->callable = std::make_shared<Value>(Value::global("torch.distributed.tensor._dtensor_spec", "DTensorSpec"));
  spec->args = std::make_shared<Value>(Value::tuple());
  slots.as_dict().items.emplace_back(Value::str("_spec"), Value(spec));
  Composite c = make("dtensor", {4, 3}, {{"local_tensor", local}});
  c.type = Global{"torch.distributed.tensor", "DTensor"};
  c.stride = {3, 1};
  c.state = Value::tuple({Value(), slots});
  c.layout_arg = Value::global("torch", "strided");
  c.device = Value::str("cpu");
  return c;
}

Composite meta() {
  Composite c = make("meta", {4, 0, 3}, {});
  c.dtype = DType::kBFloat16;
  c.stride = {1, 12, 4};  // a transposed view's strides
  c.requires_grad = true;
  return c;
}

// A Parameter of `c` (frozen: requires_grad False).
Composite parameter(Composite c, bool requires_grad) {
  c.parameter = requires_grad;
  return c;
}

// `c` with Python attributes, as a torch.Tensor's __dict__ holds them.
Composite attributed(Composite c) {
  Value a = Value::dict();
  a.as_dict().items.emplace_back(Value::str("tag"), Value::str("x"));
  a.as_dict().items.emplace_back(Value::str("n"), Value(std::int64_t{5}));
  c.attributes = a;
  return c;
}

const Object& object(const Value& v) {
  EXPECT_TRUE(v.is(Value::Kind::kObject));
  return v.as_object();
}

std::string callable(const Value& v) {
  const Global& g = object(v).callable->as_global();
  return g.module + "." + g.name;
}

TEST(TorchComposite, EncodeThenDecodeGivesTheRecordBack) {
  for (const Composite& c :
       {coo(), csc(), nested(), jagged(), dtensor(), meta(), parameter(coo(), true), parameter(nested(), false),
        parameter(meta(), false), attributed(coo()), attributed(csc()), attributed(nested()), attributed(meta()),
        parameter(attributed(coo()), false), parameter(attributed(meta()), true)}) {
    SCOPED_TRACE(c.layout);
    const Value v = encode(c);
    auto back = composite_of(object(v));
    ASSERT_TRUE(back);
    expect_same(c, *back);
    // Decoding the encoded call and encoding it again writes the same call.
    EXPECT_EQ(repr(encode(*back), 4000), repr(v, 4000));
  }
}

TEST(TorchComposite, EncodeWritesTorchsCalls) {
  EXPECT_EQ(callable(encode(coo())), "torch._utils._rebuild_sparse_tensor");
  EXPECT_EQ(callable(encode(nested())), "torch._utils._rebuild_nested_tensor");
  EXPECT_EQ(callable(encode(jagged())), "torch._tensor._rebuild_from_type_v2");
  const Value d = encode(dtensor());
  ASSERT_EQ(object(d).args->items().size(), 4u);
  EXPECT_EQ(object(d).args->items()[1].as_global().module, "torch.distributed.tensor");
  EXPECT_EQ(object(d).args->items()[2].items().size(), 8u);
  // Tensor.__reduce_ex__ on the meta device: (torch.<dtype>, size, stride, requires_grad).
  const Value m = encode(meta());
  EXPECT_EQ(callable(m), "torch._utils._rebuild_meta_tensor_no_storage");
  EXPECT_EQ(repr(*object(m).args, 200), "(torch.bfloat16, (4, 0, 3), (1, 12, 4), True)");
}

// Through a torch file: the writer writes the encoded call, the reader checks it
// (torch/rebuild.cc) and composite_of decodes the same record.
TEST(TorchComposite, RoundTripsThroughATorchFile) {
  for (const Composite& c :
       {coo(), csc(), nested(), jagged(), dtensor(), meta(), parameter(csc(), true), parameter(meta(), true),
        attributed(coo()), attributed(nested()), attributed(meta()), parameter(attributed(nested()), true)}) {
    SCOPED_TRACE(c.layout);
    Value root = Value::dict();
    root.as_dict().items.emplace_back(Value::str("t"), encode(c));
    const std::string file = write_bytes(root, Format::kTorchZip);
    const Checkpoint read = read_bytes(testing::bytes_of(file), "composite.pt");
    const Value* t = read.root.as_dict().find(std::string_view("t"));
    ASSERT_TRUE(t && t->is(Value::Kind::kObject));
    auto back = composite_of(t->as_object());
    ASSERT_TRUE(back);
    expect_same(c, *back);
  }
}

// Parameter.__reduce_ex__: _rebuild_parameter(<the tensor's call>, requires_grad,
// OrderedDict()); any other form stays an ordinary object, and a tensor subclass's
// Parameter is never written through it.
TEST(TorchComposite, AParameterIsTorchsCallAroundTheTensors) {
  const Value p = encode(parameter(coo(), false));
  EXPECT_EQ(callable(p), "torch._utils._rebuild_parameter");
  const auto& a = object(p).args->items();
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(callable(a[0]), "torch._utils._rebuild_sparse_tensor");
  EXPECT_EQ(repr(a[1], 20), "False");
  EXPECT_EQ(a[2].as_dict().kind, DictKind::kOrderedDict);
  // Hooks of None (an older form): not decoded as a composite.
  auto hooks_none = std::make_shared<Object>(object(p));
  hooks_none->args = std::make_shared<Value>(Value::tuple({a[0], a[1], Value()}));
  EXPECT_FALSE(composite_of(*hooks_none));
  EXPECT_EQ(testing::rule_of([&] { (void)encode(parameter(jagged(), true)); }), "torch-writer/cannot-write");
  EXPECT_EQ(testing::rule_of([&] { (void)encode(parameter(dtensor(), true)); }), "torch-writer/cannot-write");
}

// Tensor.__reduce_ex__ of a sparse, nested or meta torch.Tensor with attributes:
// _rebuild_from_type_v2(<its rebuild function>, torch.Tensor, <its arguments>,
// {attributes}); a Parameter's go to _rebuild_parameter_with_state. Attributes that
// hold tensors, or are empty, stay an ordinary object; forms torch does not write are
// refused.
TEST(TorchComposite, AttributesAreTorchsFromTypeV2AroundTheCall) {
  const Value plain = encode(coo());
  const Value v = encode(attributed(coo()));
  EXPECT_EQ(callable(v), "torch._tensor._rebuild_from_type_v2");
  const auto& a = object(v).args->items();
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0].as_global().module + "." + a[0].as_global().name, "torch._utils._rebuild_sparse_tensor");
  EXPECT_EQ(a[1].as_global().module + "." + a[1].as_global().name, "torch.Tensor");
  EXPECT_EQ(repr(a[2], 4000), repr(*object(plain).args, 4000));
  EXPECT_EQ(repr(a[3], 200), "{'tag': 'x', 'n': 5}");
  auto with_state = [&](Value state) {
    auto o = std::make_shared<Object>(object(v));
    o->args = std::make_shared<Value>(Value::tuple({a[0], a[1], a[2], std::move(state)}));
    return composite_of(*o);
  };
  Value holds_tensor = Value::dict();
  holds_tensor.as_dict().items.emplace_back(Value::str("t"), Value(coo().parts[0].second));
  EXPECT_FALSE(with_state(holds_tensor));
  EXPECT_FALSE(with_state(Value::dict()));
  EXPECT_FALSE(with_state(Value()));
  EXPECT_TRUE(with_state(a[3]));
  // A Parameter's: _rebuild_parameter_with_state(<the call>, requires_grad, OrderedDict(), {attributes}).
  const Value p = encode(parameter(attributed(coo()), true));
  EXPECT_EQ(callable(p), "torch._utils._rebuild_parameter_with_state");
  ASSERT_EQ(object(p).args->items().size(), 4u);
  EXPECT_EQ(repr(object(p).args->items()[0], 4000), repr(plain, 4000));
  EXPECT_EQ(repr(object(p).args->items()[3], 200), "{'tag': 'x', 'n': 5}");
  for (const Composite& c : {attributed(jagged()), attributed(dtensor())})
    EXPECT_EQ(testing::rule_of([&] { (void)encode(c); }), "torch-writer/cannot-write") << c.layout;
  Composite bad = coo();
  bad.attributes = holds_tensor;
  EXPECT_EQ(testing::rule_of([&] { (void)encode(bad); }), "torch-writer/cannot-write");
}

TEST(TorchComposite, AComponentOutsideTheBufferIsRefusedWithItsRule) {
  Value root = Value::dict();
  root.as_dict().items.emplace_back(Value::str("t"), encode(nested(/*second_offset=*/3)));
  const std::string file = write_bytes(root, Format::kTorchZip);
  EXPECT_EQ(testing::rule_of([&] { (void)read_bytes(testing::bytes_of(file), "bad.pt"); }), "torch/bad-rebuild-args");
}

TEST(TorchComposite, EncodeRefusesAnIncompleteRecord) {
  Composite c = coo();
  c.parts.pop_back();  // no values
  EXPECT_EQ(testing::rule_of([&] { (void)encode(c); }), "torch-writer/cannot-write");
  Composite d = dtensor();
  d.type = Global{"my.module", "DTensor"};
  EXPECT_EQ(testing::rule_of([&] { (void)encode(d); }), "torch-writer/cannot-write");
  Composite m = meta();
  m.stride.pop_back();
  EXPECT_EQ(testing::rule_of([&] { (void)encode(m); }), "torch-writer/cannot-write");
  Composite u = nested();
  u.layout = "sparse_xyz";
  EXPECT_EQ(testing::rule_of([&] { (void)encode(u); }), "torch-writer/cannot-write");
}

TEST(TorchComposite, DTensorClassesAreOneList) {
  EXPECT_TRUE(detail::torch::is_dtensor_type(Global{"torch.distributed._tensor.api", "DTensor"}));
  EXPECT_FALSE(detail::torch::is_dtensor_type(Global{"torch.distributed.tensor", "Shard"}));
  EXPECT_EQ(dtensor_types().size(), 4u);
  // scan allows what torch's weights_only loader allows: DTensor at its own module only.
  EXPECT_EQ(classify_global("torch.distributed.tensor", "DTensor"), Verdict::kSafe);
  EXPECT_EQ(classify_global("torch.distributed.tensor.placement_types", "Shard"), Verdict::kSafe);
  EXPECT_NE(classify_global("torch.distributed._tensor.api", "DTensor"), Verdict::kSafe);
}

}  // namespace
}  // namespace tensorseal
