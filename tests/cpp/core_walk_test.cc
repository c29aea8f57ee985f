// core/walk.h: the path rules shared by collect_tensors, diff's flatten and the torch
// writer's storage plan.
#include "core/walk.h"
#include "test_util.h"
#include "tools/diff_walk.h"

namespace tensorseal {
namespace {

using detail::core::Reach;

std::shared_ptr<Tensor> tensor() {
  return make_contiguous(DType::kUInt8, {1}, Storage::owned(std::vector<std::byte>(1)));
}

// Records every (path, kind) the walker reaches.
class Recorder : public detail::core::Visitor {
 public:
  bool enter(const Value& v, const std::string& path) override {
    seen.push_back(path + ":" + std::string(kind_name(v.kind())));
    return true;
  }
  std::vector<std::string> seen;
};

// An nn.Module-like object: state {"_parameters": {"weight": t}, "training": True,
// "_modules": {"fc": module2}}, args (3,), kwargs {"k": t2}, plus list and dict items.
Value module_tree(const std::shared_ptr<Tensor>& t, const std::shared_ptr<Tensor>& t2) {
  auto inner = std::make_shared<Object>();
  inner->callable = std::make_shared<Value>(Value::global("torch.nn", "Linear"));
  auto inner_state = Value::dict();
  auto inner_params = Value::dict(DictKind::kOrderedDict);
  inner_params.as_dict().set(Value::str("bias"), Value(t2));
  inner_state.as_dict().set(Value::str("_parameters"), inner_params);
  inner->state = std::make_shared<Value>(inner_state);

  auto o = std::make_shared<Object>();
  o->callable = std::make_shared<Value>(Value::global("torch.nn", "Sequential"));
  o->args = std::make_shared<Value>(Value::tuple({Value(3)}));
  auto kw = Value::dict();
  kw.as_dict().set(Value::str("k"), Value(7));
  o->kwargs = std::make_shared<Value>(kw);
  auto state = Value::dict();
  auto params = Value::dict(DictKind::kOrderedDict);
  params.as_dict().set(Value::str("weight"), Value(t));
  state.as_dict().set(Value::str("_parameters"), params);
  state.as_dict().set(Value::str("training"), Value(true));
  auto modules = Value::dict(DictKind::kOrderedDict);
  modules.as_dict().set(Value::str("fc"), Value(inner));
  state.as_dict().set(Value::str("_modules"), modules);
  o->state = std::make_shared<Value>(state);
  o->list_items = {Value(1)};
  o->dict_items = {{Value(4), Value(2.5)}};
  Value root = Value::dict();
  root.as_dict().set(Value::str("model"), Value(o));
  return root;
}

TEST(CoreWalk, PathRules) {
  Recorder r;
  detail::core::walk(module_tree(tensor(), tensor()), r);
  EXPECT_EQ(r.seen, (std::vector<std::string>{":dict", "model:object", "model.args.0:int", "model.kwargs:dict",
                                              "model.kwargs.k:int", "model:dict", "model.weight:tensor",
                                              "model.training:bool", "model:dict", "model.fc:object", "model.fc:dict",
                                              "model.fc.bias:tensor", "model.0:int", "model.4:float"}));
}

TEST(CoreWalk, NonDictStateAndOddKeys) {
  auto o = std::make_shared<Object>();
  o->state = std::make_shared<Value>(Value::tuple({Value(1)}));
  Value root = Value::dict();
  root.as_dict().set(Value::tuple({Value(1), Value::str("a")}), Value(o));
  root.as_dict().set(Value(-2), Value::list({Value()}));
  Recorder r;
  detail::core::walk(root, r);
  EXPECT_EQ(r.seen, (std::vector<std::string>{":dict", "(1, 'a'):object", "(1, 'a').state:tuple",
                                              "(1, 'a').state.0:int", "-2:list", "-2.0:None"}));
  EXPECT_EQ(detail::core::key_text(Value::str("x.y")), "x.y");
  EXPECT_EQ(detail::core::key_text(Value(12)), "12");
  EXPECT_EQ(detail::core::key_text(Value::str(std::string(100, 'z')), 10).size(), 100u);  // str: never cut
  EXPECT_EQ(detail::core::path_join("", "a"), "a");
  EXPECT_EQ(detail::core::path_join("a", "b"), "a.b");
}

TEST(CoreWalk, EverythingReachesKeysAttrsAndCallables) {
  auto o = std::make_shared<Object>();
  o->callable = std::make_shared<Value>(Value::global("m", "f"));
  o->args = std::make_shared<Value>(Value::tuple({Value(1)}));
  Value d = Value::dict(DictKind::kOrderedDict);
  d.as_dict().set(Value::str("k"), Value(o));
  d.as_dict().attrs = std::make_shared<Dict>();
  d.as_dict().attrs->set(Value::str("_metadata"), Value(2));
  Recorder paths, all;
  detail::core::walk(d, paths);
  detail::core::walk(d, all, Reach::kEverything);
  EXPECT_EQ(paths.seen, (std::vector<std::string>{":dict", "k:object", "k.args.0:int"}));
  EXPECT_EQ(all.seen, (std::vector<std::string>{":dict", ":str", "k:object", "k:global", "k.args:tuple", "k.args.0:int",
                                                ":str", ":int"}));
}

// Declining a node skips everything under it.
TEST(CoreWalk, VisitorDecidesWhatToEnter) {
  class Shallow : public detail::core::Visitor {
   public:
    bool enter(const Value& v, const std::string& path) override {
      paths.push_back(path);
      return v.is(Value::Kind::kDict);
    }
    bool enter_state(const Value&) override { return false; }
    std::vector<std::string> paths;
  } s;
  detail::core::walk(module_tree(tensor(), tensor()), s);
  EXPECT_EQ(s.paths, (std::vector<std::string>{"", "model"}));
}

// diff's flatten and collect_tensors name tensors alike; flatten lists a tied tensor
// under every path, collect_tensors once.
TEST(CoreWalk, FlattenAndCollectTensorsAgree) {
  auto t = tensor(), t2 = tensor();
  Value root = module_tree(t, t2);
  const auto refs = collect_tensors(root);
  const auto flat = detail::tools::flatten(root);
  ASSERT_EQ(refs.size(), 2u);
  ASSERT_EQ(flat.tensors.size(), 2u);
  for (std::size_t i = 0; i < refs.size(); ++i) EXPECT_EQ(refs[i].path, flat.tensors[i].path);
  EXPECT_EQ(refs[0].path, "model.weight");
  EXPECT_EQ(refs[1].path, "model.fc.bias");
  root.as_dict().set(Value::str("tied"), Value(t));
  EXPECT_EQ(collect_tensors(root).size(), 2u);
  ASSERT_EQ(detail::tools::flatten(root).tensors.size(), 3u);
  EXPECT_EQ(detail::tools::flatten(root).tensors[2].path, "tied");
}

}  // namespace
}  // namespace tensorseal
