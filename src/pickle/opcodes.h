// pickle: the opcode table of protocols 0-5, shared by the VM and the writer.
//
// Source of truth: CPython Lib/pickle.py (opcode constants) and Lib/pickletools.py
// (argument encodings and the protocol that introduced each opcode). The names are
// pickletools' names; they appear in error messages and in the "pickle.opcodes" fact.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tensorseal::detail::pickle {

// How an opcode's inline argument is encoded (pickletools' ArgumentDescriptor).
enum class Arg : std::uint8_t {
  kNone,
  kU1,         // uint1
  kU2,         // uint2 little-endian
  kI4,         // int4 little-endian (signed)
  kU4,         // uint4 little-endian
  kU8,         // uint8 little-endian
  kF8BE,       // float8 big-endian (BINFLOAT)
  kLine,       // bytes up to and excluding '\n' (decimal ints, floats, quoted strings, PERSID)
  kTwoLines,   // "module\nname\n" (GLOBAL, INST)
  kLenU1Data,  // uint1 length, then data
  kLenI4Data,  // int4 length (negative is an error), then data
  kLenU4Data,  // uint4 length, then data
  kLenU8Data,  // uint8 length, then data
};

namespace op {
// Protocol 0 (text) and 1 (binary) opcodes.
inline constexpr std::uint8_t kMark = '(';
inline constexpr std::uint8_t kStop = '.';
inline constexpr std::uint8_t kPop = '0';
inline constexpr std::uint8_t kPopMark = '1';
inline constexpr std::uint8_t kDup = '2';
inline constexpr std::uint8_t kFloat = 'F';
inline constexpr std::uint8_t kInt = 'I';
inline constexpr std::uint8_t kBinInt = 'J';
inline constexpr std::uint8_t kBinInt1 = 'K';
inline constexpr std::uint8_t kLong = 'L';
inline constexpr std::uint8_t kBinInt2 = 'M';
inline constexpr std::uint8_t kNone = 'N';
inline constexpr std::uint8_t kPersId = 'P';
inline constexpr std::uint8_t kBinPersId = 'Q';
inline constexpr std::uint8_t kReduce = 'R';
inline constexpr std::uint8_t kString = 'S';
inline constexpr std::uint8_t kBinString = 'T';
inline constexpr std::uint8_t kShortBinString = 'U';
inline constexpr std::uint8_t kUnicode = 'V';
inline constexpr std::uint8_t kBinUnicode = 'X';
inline constexpr std::uint8_t kAppend = 'a';
inline constexpr std::uint8_t kBuild = 'b';
inline constexpr std::uint8_t kGlobal = 'c';
inline constexpr std::uint8_t kDict = 'd';
inline constexpr std::uint8_t kEmptyDict = '}';
inline constexpr std::uint8_t kAppends = 'e';
inline constexpr std::uint8_t kGet = 'g';
inline constexpr std::uint8_t kBinGet = 'h';
inline constexpr std::uint8_t kInst = 'i';
inline constexpr std::uint8_t kLongBinGet = 'j';
inline constexpr std::uint8_t kList = 'l';
inline constexpr std::uint8_t kEmptyList = ']';
inline constexpr std::uint8_t kObj = 'o';
inline constexpr std::uint8_t kPut = 'p';
inline constexpr std::uint8_t kBinPut = 'q';
inline constexpr std::uint8_t kLongBinPut = 'r';
inline constexpr std::uint8_t kSetItem = 's';
inline constexpr std::uint8_t kTuple = 't';
inline constexpr std::uint8_t kEmptyTuple = ')';
inline constexpr std::uint8_t kSetItems = 'u';
inline constexpr std::uint8_t kBinFloat = 'G';
// Protocol 2.
inline constexpr std::uint8_t kProto = 0x80;
inline constexpr std::uint8_t kNewObj = 0x81;
inline constexpr std::uint8_t kExt1 = 0x82;
inline constexpr std::uint8_t kExt2 = 0x83;
inline constexpr std::uint8_t kExt4 = 0x84;
inline constexpr std::uint8_t kTuple1 = 0x85;
inline constexpr std::uint8_t kTuple2 = 0x86;
inline constexpr std::uint8_t kTuple3 = 0x87;
inline constexpr std::uint8_t kNewTrue = 0x88;
inline constexpr std::uint8_t kNewFalse = 0x89;
inline constexpr std::uint8_t kLong1 = 0x8a;
inline constexpr std::uint8_t kLong4 = 0x8b;
// Protocol 3.
inline constexpr std::uint8_t kBinBytes = 'B';
inline constexpr std::uint8_t kShortBinBytes = 'C';
// Protocol 4.
inline constexpr std::uint8_t kShortBinUnicode = 0x8c;
inline constexpr std::uint8_t kBinUnicode8 = 0x8d;
inline constexpr std::uint8_t kBinBytes8 = 0x8e;
inline constexpr std::uint8_t kEmptySet = 0x8f;
inline constexpr std::uint8_t kAddItems = 0x90;
inline constexpr std::uint8_t kFrozenSet = 0x91;
inline constexpr std::uint8_t kNewObjEx = 0x92;
inline constexpr std::uint8_t kStackGlobal = 0x93;
inline constexpr std::uint8_t kMemoize = 0x94;
inline constexpr std::uint8_t kFrame = 0x95;
// Protocol 5.
inline constexpr std::uint8_t kByteArray8 = 0x96;
inline constexpr std::uint8_t kNextBuffer = 0x97;
inline constexpr std::uint8_t kReadonlyBuffer = 0x98;
}  // namespace op

inline constexpr int kHighestProtocol = 5;

struct OpInfo {
  std::string_view name;   // empty: not an opcode
  std::int8_t proto = -1;  // protocol that introduced it
  Arg arg = Arg::kNone;
};

namespace detail_ {
constexpr std::array<OpInfo, 256> make_table() {
  std::array<OpInfo, 256> t{};
  auto set = [&](std::uint8_t c, std::string_view n, int p, Arg a) {
    t[c] = OpInfo{n, static_cast<std::int8_t>(p), a};
  };
  set(op::kMark, "MARK", 0, Arg::kNone);
  set(op::kStop, "STOP", 0, Arg::kNone);
  set(op::kPop, "POP", 0, Arg::kNone);
  set(op::kPopMark, "POP_MARK", 1, Arg::kNone);
  set(op::kDup, "DUP", 0, Arg::kNone);
  set(op::kFloat, "FLOAT", 0, Arg::kLine);
  set(op::kInt, "INT", 0, Arg::kLine);
  set(op::kBinInt, "BININT", 1, Arg::kI4);
  set(op::kBinInt1, "BININT1", 1, Arg::kU1);
  set(op::kLong, "LONG", 0, Arg::kLine);
  set(op::kBinInt2, "BININT2", 1, Arg::kU2);
  set(op::kNone, "NONE", 0, Arg::kNone);
  set(op::kPersId, "PERSID", 0, Arg::kLine);
  set(op::kBinPersId, "BINPERSID", 1, Arg::kNone);
  set(op::kReduce, "REDUCE", 0, Arg::kNone);
  set(op::kString, "STRING", 0, Arg::kLine);
  set(op::kBinString, "BINSTRING", 1, Arg::kLenI4Data);
  set(op::kShortBinString, "SHORT_BINSTRING", 1, Arg::kLenU1Data);
  set(op::kUnicode, "UNICODE", 0, Arg::kLine);
  set(op::kBinUnicode, "BINUNICODE", 1, Arg::kLenU4Data);
  set(op::kAppend, "APPEND", 0, Arg::kNone);
  set(op::kBuild, "BUILD", 0, Arg::kNone);
  set(op::kGlobal, "GLOBAL", 0, Arg::kTwoLines);
  set(op::kDict, "DICT", 0, Arg::kNone);
  set(op::kEmptyDict, "EMPTY_DICT", 1, Arg::kNone);
  set(op::kAppends, "APPENDS", 1, Arg::kNone);
  set(op::kGet, "GET", 0, Arg::kLine);
  set(op::kBinGet, "BINGET", 1, Arg::kU1);
  set(op::kInst, "INST", 0, Arg::kTwoLines);
  set(op::kLongBinGet, "LONG_BINGET", 1, Arg::kU4);
  set(op::kList, "LIST", 0, Arg::kNone);
  set(op::kEmptyList, "EMPTY_LIST", 1, Arg::kNone);
  set(op::kObj, "OBJ", 1, Arg::kNone);
  set(op::kPut, "PUT", 0, Arg::kLine);
  set(op::kBinPut, "BINPUT", 1, Arg::kU1);
  set(op::kLongBinPut, "LONG_BINPUT", 1, Arg::kU4);
  set(op::kSetItem, "SETITEM", 0, Arg::kNone);
  set(op::kTuple, "TUPLE", 0, Arg::kNone);
  set(op::kEmptyTuple, "EMPTY_TUPLE", 1, Arg::kNone);
  set(op::kSetItems, "SETITEMS", 1, Arg::kNone);
  set(op::kBinFloat, "BINFLOAT", 1, Arg::kF8BE);
  set(op::kProto, "PROTO", 2, Arg::kU1);
  set(op::kNewObj, "NEWOBJ", 2, Arg::kNone);
  set(op::kExt1, "EXT1", 2, Arg::kU1);
  set(op::kExt2, "EXT2", 2, Arg::kU2);
  set(op::kExt4, "EXT4", 2, Arg::kI4);
  set(op::kTuple1, "TUPLE1", 2, Arg::kNone);
  set(op::kTuple2, "TUPLE2", 2, Arg::kNone);
  set(op::kTuple3, "TUPLE3", 2, Arg::kNone);
  set(op::kNewTrue, "NEWTRUE", 2, Arg::kNone);
  set(op::kNewFalse, "NEWFALSE", 2, Arg::kNone);
  set(op::kLong1, "LONG1", 2, Arg::kLenU1Data);
  set(op::kLong4, "LONG4", 2, Arg::kLenI4Data);
  set(op::kBinBytes, "BINBYTES", 3, Arg::kLenU4Data);
  set(op::kShortBinBytes, "SHORT_BINBYTES", 3, Arg::kLenU1Data);
  set(op::kShortBinUnicode, "SHORT_BINUNICODE", 4, Arg::kLenU1Data);
  set(op::kBinUnicode8, "BINUNICODE8", 4, Arg::kLenU8Data);
  set(op::kBinBytes8, "BINBYTES8", 4, Arg::kLenU8Data);
  set(op::kEmptySet, "EMPTY_SET", 4, Arg::kNone);
  set(op::kAddItems, "ADDITEMS", 4, Arg::kNone);
  set(op::kFrozenSet, "FROZENSET", 4, Arg::kNone);
  set(op::kNewObjEx, "NEWOBJ_EX", 4, Arg::kNone);
  set(op::kStackGlobal, "STACK_GLOBAL", 4, Arg::kNone);
  set(op::kMemoize, "MEMOIZE", 4, Arg::kNone);
  set(op::kFrame, "FRAME", 4, Arg::kU8);
  set(op::kByteArray8, "BYTEARRAY8", 5, Arg::kLenU8Data);
  set(op::kNextBuffer, "NEXT_BUFFER", 5, Arg::kNone);
  set(op::kReadonlyBuffer, "READONLY_BUFFER", 5, Arg::kNone);
  return t;
}
}  // namespace detail_

// Indexed by opcode byte. 68 opcodes are defined; every other byte has an empty name.
inline constexpr std::array<OpInfo, 256> kOpTable = detail_::make_table();

inline constexpr std::string_view op_name(std::uint8_t code) {
  return kOpTable[code].name.empty() ? std::string_view("?") : kOpTable[code].name;
}

}  // namespace tensorseal::detail::pickle
