// The canonical pickle writer (src/pickle/writer.cc; spec docs/formats/pickle.md).
//
// Golden bytes are CPython 3.11's pickle.dumps(v, protocol=2) for the same value. The
// writer's output for every real protocol-2 fixture of gen_pickle.py must equal the
// fixture byte for byte. The test also leaves pickles in
// build/pickle_writer_out/ for tests/fixtures/check_pickle_writer.py (real pickle.loads).
#include <cmath>
#include <filesystem>
#include <fstream>

#include "pickle_test_util.h"

namespace tensorseal::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

std::string write(const Value& v, detail::pickle::Writer::Hooks hooks = {}) {
  detail::pickle::Writer w(std::move(hooks));
  return w.finish(v);
}

Value str(const char* s) { return Value::str(s); }

Value dict(std::vector<std::pair<Value, Value>> items, DictKind kind = DictKind::kDict) {
  Value d = Value::dict(kind);
  for (auto& [k, v] : items) d.as_dict().set(k, v);
  return d;
}

Value set(std::vector<Value> items, bool frozen = false) {
  auto s = std::make_shared<Set>();
  s->items = std::move(items);
  s->frozen = frozen;
  return Value(s);
}

Value object(Value callable, std::vector<Value> args, Construct how = Construct::kReduce) {
  auto o = std::make_shared<Object>();
  o->callable = std::make_shared<Value>(std::move(callable));
  o->args = std::make_shared<Value>(Value::tuple(std::move(args)));
  o->how = how;
  return Value(o);
}

Value ordered_dict_with_metadata() {
  Value od = dict({{str("a"), Value(1)}}, DictKind::kOrderedDict);
  Value meta = dict({{str(""), dict({{str("version"), Value(1)}})}});
  od.as_dict().attrs = std::make_shared<Dict>();
  od.as_dict().attrs->set(str("_metadata"), meta);
  return od;
}

TEST(PickleWriter, GoldenBytesEqualCPython) {
  Value shared_list = Value::list();
  const std::vector<std::pair<Value, std::string>> cases = {
      {Value(), "80024e2e"},
      {Value(true), "8002882e"},
      {Value(false), "8002892e"},
      {Value(-1), "80024affffffff2e"},
      {Value(255), "80024bff2e"},
      {Value(256), "80024d00012e"},
      {Value(65535), "80024dffff2e"},
      {Value(65536), "80024a000001002e"},
      {Value(std::int64_t{1} << 31), "80028a0500000080002e"},
      {Value(-(std::int64_t{1} << 31) - 1), "80028a05ffffff7fff2e"},
      {Value(BigInt{"\0\0\0\0\0\0\0\x80\0"s}), "80028a090000000000000080002e"},
      {Value(1.5), "8002473ff80000000000002e"},
      {Value(Complex{1.0, 2.0}),  // complex(1, 2): complex.__reduce__
       "8002635f5f6275696c74696e5f5f0a636f6d706c65780a7100473ff00000000000004740000000000000008671015271022e"},
      {Value::list({Value(Complex{-0.0, HUGE_VAL}), Value(Complex{0.0, 2.0})}),  // the global once, then BINGET
       "80025d710028635f5f6275696c74696e5f5f0a636f6d706c65780a7101478000000000000000477ff000000000000086710252710368014"
       "70000000000000000474000000000000000867104527105652e"},
      {str("\xc3\xa9"), "80025802000000c3a971002e"},
      {Value::bytes(""), "8002635f5f6275696c74696e5f5f0a62797465730a7100295271012e"},
      {Value::bytes("ab\xff"),
       "8002635f636f646563730a656e636f64650a710058040000006162c3bf710158060000006c6174696e3171028671035271042e"},
      {Value::bytes("xy", true),
       "8002635f5f6275696c74696e5f5f0a6279746561727261790a7100635f636f646563730a656e636f64650a7101580200000078797102580"
       "60000006c6174696e3171038671045271058571065271072e"},
      {Value::bytes("", true), "8002635f5f6275696c74696e5f5f0a6279746561727261790a7100295271012e"},
      {set({Value(1), Value(2)}), "8002635f5f6275696c74696e5f5f0a7365740a71005d7101284b014b02658571025271032e"},
      {set({Value(1)}, true), "8002635f5f6275696c74696e5f5f0a66726f7a656e7365740a71005d71014b01618571025271032e"},
      {ordered_dict_with_metadata(),
       "800263636f6c6c656374696f6e730a4f726465726564446963740a71002952710158010000006171024b01737d710358090000005f6d657"
       "4616461746171047d7105580000000071067d7107580700000076657273696f6e71084b01737373622e"},
      {dict({{str("a"), Value(2)}, {str("b"), Value(1)}}, DictKind::kCounter),
       "800263636f6c6c656374696f6e730a436f756e7465720a71007d71012858010000006171024b0258010000006271034b017585710452710"
       "52e"},
      {Value::list(), "80025d71002e"},
      {Value::dict(), "80027d71002e"},
      {Value::tuple({Value(1), Value(2), Value(3), Value(4)}), "8002284b014b024b034b047471002e"},
      {Value::list({str("a"), str("a")}), "80025d71002858010000006171016801652e"},  // equal strs: one memo entry
      {Value::list({shared_list, shared_list}), "80025d7100285d71016801652e"},      // one node: BINGET
  };
  for (const auto& [value, golden] : cases) EXPECT_EQ(hex(write(value)), golden) << repr(value);
}

TEST(PickleWriter, ByteIdenticalToCPythonOnRealProtocol2Pickles) {
  fs::path dir = fixture_dir("gen_pickle");
  if (!fs::exists(dir)) FAIL() << "fixtures not generated";
  int same = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string file = entry.path().filename().string();
    if (file.rfind("py3_", 0) != 0 || file.size() < 7 || file.substr(file.size() - 7) != "_p2.pkl") continue;
    std::string original = read_all(entry.path());
    detail::pickle::Parsed p = parse_bytes(original, {}, stdlib_hooks(), file);
    std::string ours = write(p.value);
    EXPECT_EQ(hex(ours), hex(original)) << file;
    same += ours == original;
  }
  EXPECT_GE(same, 20);
}

Value rich_value() {
  Value shared = Value::list({Value(1), str("shared")});
  Value big_list = Value::list();
  for (int i = 0; i < 2500; ++i) big_list.items().push_back(Value(i * 7 - 3000));
  Value many_strs = Value::list();
  for (int i = 0; i < 400; ++i) many_strs.items().push_back(Value::str("s" + std::to_string(i)));  // LONG_BINPUT
  Value obj = object(Value::global("mymod", "Thing"), {Value(1), str("x")});
  obj.as_object().state = std::make_shared<Value>(dict({{str("attr"), Value(2.5)}}));
  obj.as_object().list_items = {Value(1), Value(2)};
  obj.as_object().dict_items = {{str("k"), Value()}};
  Value newobj = object(Value::global("mymod", "New"), {}, Construct::kNewObj);
  Value newobj_ex = object(Value::global("mymod", "NewEx"), {Value(1)}, Construct::kNewObjEx);
  newobj_ex.as_object().kwargs = std::make_shared<Value>(dict({{str("b"), Value(2)}}));
  Value inst = object(Value::global("mymod", "Old"), {Value(3)}, Construct::kInst);
  Value objop = object(Value::global("mymod", "Old2"), {Value(4)}, Construct::kObj);
  Value negbig = Value(BigInt{"\x01\x02\x03\x04\x05\x06\x07\x08\x89"s});
  Value big4 = Value(BigInt{std::string(300, '\x11')});
  return dict({
      {str("none"), Value()},
      {str("ints"), Value::list({Value(0), Value(-1), Value(70000), Value(INT64_MAX), Value(INT64_MIN), negbig, big4})},
      {str("floats"), Value::list({Value(-0.0), Value(std::nan("")), Value(HUGE_VAL), Value(1e-310)})},
      {str("text"), Value::list({str(""), str("\xf0\x9f\x98\x80"), Value::bytes("\x00\x80"s), Value::bytes("", true)})},
      {Value(7), Value::tuple({Value(), Value::tuple(), Value::tuple({Value(1)}), Value::tuple({shared, shared})})},
      {Value::tuple({Value(1), str("k")}), set({Value(1), str("a"), Value::tuple({Value(2)})})},
      {str("frozen"), set({Value(1.5)}, true)},
      {str("od"), ordered_dict_with_metadata()},
      {str("counter"), dict({{str("x"), Value(3)}}, DictKind::kCounter)},
      {str("globals"),
       Value::list({Value::global("torch", "float32"), Value::global("torch.nn.modules.linear", "Linear"),
                    Value::global("torch", "nn.Module"), Value::global("builtins", "str"),
                    Value::global("builtins", "set")})},
      {str("objects"), Value::list({obj, newobj, newobj_ex, inst, objop, obj})},
      {str("big_list"), big_list},
      {str("many_strs"), many_strs},
      {str("shared_again"), shared},
  });
}

TEST(PickleWriter, RoundTripKeepsValuesAndSharing) {
  Value v = rich_value();
  std::string bytes = write(v);
  detail::pickle::Parsed p = parse_bytes(bytes, {}, stdlib_hooks());
  EXPECT_TRUE(equal(p.value, v)) << describe(p.value).substr(0, 2000);
  EXPECT_EQ(p.protocol, 2);
  // Sharing survives: the same node in two places is one node after reading back.
  const Dict& d = p.value.as_dict();
  const Value* tup = d.find(Value(7));
  ASSERT_NE(tup, nullptr);
  EXPECT_EQ(tup->items()[3].items()[0].node(), tup->items()[3].items()[1].node());
  EXPECT_EQ(d.find(std::string_view("shared_again"))->node(), tup->items()[3].items()[0].node());
  const auto& objects = d.find(std::string_view("objects"))->items();
  EXPECT_EQ(objects[0].node(), objects[5].node());
  // Canonical: writing what was read gives the same bytes again.
  EXPECT_EQ(write(p.value), bytes);
  EXPECT_NE(fact(p, "pickle.opcodes").find("LONG_BINPUT"), std::string::npos);
  EXPECT_NE(fact(p, "pickle.opcodes").find("LONG4:1"), std::string::npos);
  EXPECT_NE(fact(p, "pickle.opcodes").find("INST:1"), std::string::npos);
  EXPECT_NE(fact(p, "pickle.opcodes").find("OBJ:1"), std::string::npos);
  EXPECT_NE(fact(p, "pickle.opcodes").find("NEWOBJ_EX:1"), std::string::npos);
}

TEST(PickleWriter, BatchesOf1000LikeCPython) {
  Value l = Value::list();
  for (int i = 0; i < 2001; ++i) l.items().push_back(Value(1));
  detail::pickle::Parsed p = parse_bytes(write(l));
  EXPECT_EQ(fact(p, "pickle.opcodes"), "APPEND:1,APPENDS:2,BININT1:2001,BINPUT:1,EMPTY_LIST:1,MARK:2,PROTO:1,STOP:1");
  Value d = Value::dict();
  for (int i = 0; i < 1000; ++i) d.as_dict().set(Value(i), Value());
  EXPECT_EQ(fact(parse_bytes(write(d)), "pickle.opcodes"),
            "BININT1:256,BININT2:744,BINPUT:1,EMPTY_DICT:1,MARK:1,NONE:1000,PROTO:1,SETITEMS:1,STOP:1");
}

TEST(PickleWriter, FixImportsNamesLikeCPython) {
  // Protocol 2 writes Python 2 names; readers map them back (what CPython does, lossy
  // where CPython's tables are: BrokenPipeError is written as exceptions.OSError).
  std::string b = write(Value::list({Value::global("builtins", "set"), Value::global("copyreg", "_reconstructor"),
                                     Value::global("builtins", "BrokenPipeError")}));
  EXPECT_NE(b.find("c__builtin__\nset\n"), std::string::npos);
  EXPECT_NE(b.find("ccopy_reg\n_reconstructor\n"), std::string::npos);
  EXPECT_NE(b.find("cexceptions\nOSError\n"), std::string::npos);
  EXPECT_EQ(describe(parse_bytes(b).value), "[Gbuiltins.set,Gcopyreg._reconstructor,Gbuiltins.OSError]");
  // Nested names go through getattr, as CPython's protocol < 4 does.
  std::string n = write(Value::global("torch", "nn.Module"));
  EXPECT_NE(n.find("c__builtin__\ngetattr\n"), std::string::npos);
  EXPECT_EQ(describe(parse_bytes(n, {}, stdlib_hooks()).value), "Gtorch.nn.Module");
}

TEST(PickleWriter, BadGlobalName) {
  EXPECT_EQ(rule_of([] { (void)write(Value::global("m\xc3\xa9", "x")); }), detail::pickle::rules::kWriteGlobalName.id);
  EXPECT_EQ(rule_of([] { (void)write(Value::global("m", "a\nb")); }), detail::pickle::rules::kWriteGlobalName.id);
  EXPECT_EQ(rule_of([] { (void)write(Value::global("", "x")); }), detail::pickle::rules::kWriteGlobalName.id);
}

TEST(PickleWriter, BadValues) {
  EXPECT_EQ(rule_of([] { (void)write(Value::str("\xff")); }), detail::pickle::rules::kWriteBadValue.id);
  auto o = std::make_shared<Object>();
  EXPECT_EQ(rule_of([&] { (void)write(Value(o)); }), detail::pickle::rules::kWriteBadValue.id);
  detail::pickle::Writer w({});
  EXPECT_EQ(rule_of([&] { w.tuple(std::size_t{4}); }), detail::pickle::rules::kWriteBadValue.id);
}

TEST(PickleWriter, TooDeep) {
  Value root = Value::list();
  Value cur = root;
  for (int i = 0; i < 6000; ++i) {
    Value next = Value::list();
    cur.items().push_back(next);
    cur = next;
  }
  EXPECT_EQ(rule_of([&] { (void)write(root); }), detail::pickle::rules::kWriteTooDeep.id);
  // Unlink iteratively so the destructor does not recurse 6000 levels.
  cur = root;
  while (!cur.items().empty()) {
    Value next = cur.items()[0];
    cur.items().clear();
    cur = next;
  }
}

TEST(PickleWriter, TensorsAndStoragesGoThroughHooks) {
  auto storage = Storage::owned(std::vector<std::byte>(4));
  auto tensor = make_contiguous(DType::kFloat32, {1}, storage);
  Value t(tensor);
  Value v = Value::list({t, t, Value(storage)});
  EXPECT_EQ(rule_of([&] { (void)write(v); }), detail::pickle::rules::kWriteNoHook.id);
  EXPECT_EQ(rule_of([&] { (void)write(Value(storage)); }), detail::pickle::rules::kWriteNoHook.id);
  int tensor_calls = 0, storage_calls = 0;
  detail::pickle::Writer::Hooks h;
  h.tensor = [&](detail::pickle::Writer& w, const Tensor& x) {
    if (!w.begin_node(&x)) return;
    ++tensor_calls;
    w.global("torch._utils", "_rebuild_tensor_v2");
    w.begin_tuple(2);
    w.value(Value(0));
    w.value(Value::tuple({Value(1)}));
    w.end_tuple(2);
    w.reduce();
    w.end_node(&x);
  };
  h.storage = [&](detail::pickle::Writer& w, const Storage&) {
    ++storage_calls;
    w.begin_tuple(5);
    for (const char* s : {"storage", "0", "cpu"}) w.value(Value::str(s));
    w.global("torch", "FloatStorage");
    w.value(Value(1));
    w.end_tuple(5);
    w.binpersid();
  };
  std::string b = write(v, h);
  EXPECT_EQ(tensor_calls, 1) << "second use is a BINGET";
  EXPECT_EQ(storage_calls, 1);
  detail::pickle::Hooks rh;
  rh.persistent_load = [](const Value& pid, std::uint64_t) { return pid; };
  detail::pickle::Parsed p = parse_bytes(b, {}, rh);
  EXPECT_EQ(p.value.items()[0].node(), p.value.items()[1].node());
  EXPECT_EQ(describe(p.value.items()[0]), "R0<Gtorch._utils._rebuild_tensor_v2>(i0,(i1))");
  EXPECT_EQ(describe(p.value.items()[2]), "(u73746f72616765,u30,u637075,Gtorch.FloatStorage,i1)");
}

TEST(PickleWriter, TupleBuildingBlocks) {
  const char* expect[] = {"EMPTY_TUPLE:1,", "TUPLE1:1", "TUPLE2:1", "TUPLE3:1", "TUPLE:1", "TUPLE:1"};
  for (std::size_t n = 0; n <= 5; ++n) {
    detail::pickle::Writer w({});
    std::vector<Value> items(n, Value(1));
    w.tuple(std::span<const Value>(items));
    detail::pickle::Parsed p = parse_bytes(w.finish(Value()));
    EXPECT_NE(fact(p, "pickle.opcodes").find(expect[n]), std::string::npos) << n << " " << fact(p, "pickle.opcodes");
    EXPECT_EQ(fact(p, "pickle.memo"), n ? "puts=1 gets=0" : "puts=0 gets=0") << "CPython memoizes tuples except ()";
  }
  detail::pickle::Writer w({});
  w.mark();
  w.value(Value(1));
  w.tuple_from_mark();
  w.raw("0");  // POP, then finish() writes the real root
  std::string b = w.finish(Value(2));
  EXPECT_EQ(hex(b), "8002284b01747100304b022e");
  EXPECT_EQ(describe(parse_bytes(b).value), "i2");
}

// Leaves pickles for tests/fixtures/check_pickle_writer.py, which loads each with the
// real pickle.loads and compares describe() with the .expected file written here.
TEST(PickleWriter, LeavesPicklesForTheCPythonCheck) {
  fs::path out = fs::path(TENSORSEAL_BINARY_DIR) / "pickle_writer_out";
  fs::create_directories(out);
  Value shared = Value::list({Value(1)});
  std::vector<std::pair<std::string, Value>> cases = {
      {"scalars", Value::list({Value(), Value(true), Value(-5), Value(70000), Value(INT64_MIN),
                               Value(BigInt{std::string(300, '\x7f')}), Value(-0.0), Value(1e308),
                               str("\xe6\x97\xa5")})},
      {"bytes", Value::list({Value::bytes(""), Value::bytes("\x00\xff\x80"s), Value::bytes("", true),
                             Value::bytes("ab", true)})},
      {"containers", Value::tuple({Value::tuple(), Value::tuple({Value(1)}), Value::list({shared, shared}),
                                   set({Value(1), Value(2)}), set({str("f")}, true), dict({{Value(1), str("one")}})})},
      {"ordered_dict_metadata", ordered_dict_with_metadata()},
      {"counter", dict({{str("a"), Value(2)}, {str("b"), Value(1)}}, DictKind::kCounter)},
      {"rich_plain", [] {
         Value l = Value::list();
         for (int i = 0; i < 3000; ++i) l.items().push_back(Value::str("k" + std::to_string(i % 700)));
         return dict({{str("list"), l}, {str("nested"), Value::list({Value::list({Value::list()})})}});
       }()},
  };
  for (const auto& [name, value] : cases) {
    std::ofstream(out / (name + ".pkl"), std::ios::binary) << write(value);
    std::ofstream(out / (name + ".expected"), std::ios::binary) << describe(value);
    // And they read back to the same value here.
    EXPECT_TRUE(equal(parse_bytes(write(value), {}, stdlib_hooks()).value, value)) << name;
  }
}

}  // namespace
}  // namespace tensorseal::testing
