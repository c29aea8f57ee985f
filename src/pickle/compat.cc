// pickle: Python 2 <-> 3 global-name mapping applied when protocol < 3 (fix_imports).
//
// Data tables copied from CPython 3.11 Lib/_compat_pickle.py (IMPORT_MAPPING,
// NAME_MAPPING, REVERSE_IMPORT_MAPPING, REVERSE_NAME_MAPPING), generated with
//   python -c "import _compat_pickle"  (identical in CPython 3.11.2 and 3.11.7).
// CPython's Unpickler.find_class applies the forward tables to GLOBAL/STACK_GLOBAL/INST
// names when the stream's protocol is < 3; its Pickler applies the reverse tables to
// GLOBAL names at protocol < 3. Name pairs are looked up first, then module names.
#include "pickle/compat.h"

#include <algorithm>
#include <iterator>

#include "pickle/keys.h"
#include "util/text.h"

namespace tensorseal::detail::pickle {
namespace {

struct ModuleMap { std::string_view from, to; };
struct NameMap { std::string_view from_module, from_name, to_module, to_name; };

constexpr ModuleMap kImportMapping[] = {
    {"BaseHTTPServer", "http.server"},
    {"CGIHTTPServer", "http.server"},
    {"ConfigParser", "configparser"},
    {"Cookie", "http.cookies"},
    {"Dialog", "tkinter.dialog"},
    {"DocXMLRPCServer", "xmlrpc.server"},
    {"FileDialog", "tkinter.filedialog"},
    {"HTMLParser", "html.parser"},
    {"Queue", "queue"},
    {"ScrolledText", "tkinter.scrolledtext"},
    {"SimpleDialog", "tkinter.simpledialog"},
    {"SimpleHTTPServer", "http.server"},
    {"SimpleXMLRPCServer", "xmlrpc.server"},
    {"SocketServer", "socketserver"},
    {"StringIO", "io"},
    {"Tix", "tkinter.tix"},
    {"Tkconstants", "tkinter.constants"},
    {"Tkdnd", "tkinter.dnd"},
    {"Tkinter", "tkinter"},
    {"UserDict", "collections"},
    {"UserList", "collections"},
    {"UserString", "collections"},
    {"__builtin__", "builtins"},
    {"_abcoll", "collections.abc"},
    {"_elementtree", "xml.etree.ElementTree"},
    {"_winreg", "winreg"},
    {"anydbm", "dbm"},
    {"cPickle", "pickle"},
    {"cStringIO", "io"},
    {"commands", "subprocess"},
    {"cookielib", "http.cookiejar"},
    {"copy_reg", "copyreg"},
    {"dbhash", "dbm.bsd"},
    {"dbm", "dbm.ndbm"},
    {"dumbdbm", "dbm.dumb"},
    {"dummy_thread", "_dummy_thread"},
    {"gdbm", "dbm.gnu"},
    {"htmlentitydefs", "html.entities"},
    {"httplib", "http.client"},
    {"markupbase", "_markupbase"},
    {"repr", "reprlib"},
    {"robotparser", "urllib.robotparser"},
    {"test.test_support", "test.support"},
    {"thread", "_thread"},
    {"tkColorChooser", "tkinter.colorchooser"},
    {"tkCommonDialog", "tkinter.commondialog"},
    {"tkFileDialog", "tkinter.filedialog"},
    {"tkFont", "tkinter.font"},
    {"tkMessageBox", "tkinter.messagebox"},
    {"tkSimpleDialog", "tkinter.simpledialog"},
    {"ttk", "tkinter.ttk"},
    {"urllib2", "urllib.request"},
    {"urlparse", "urllib.parse"},
    {"whichdb", "dbm"},
    {"xmlrpclib", "xmlrpc.client"},
};
constexpr NameMap kNameMapping[] = {
    {"UserDict", "IterableUserDict", "collections", "UserDict"},
    {"UserDict", "UserDict", "collections", "UserDict"},
    {"UserList", "UserList", "collections", "UserList"},
    {"UserString", "UserString", "collections", "UserString"},
    {"__builtin__", "basestring", "builtins", "str"},
    {"__builtin__", "intern", "sys", "intern"},
    {"__builtin__", "long", "builtins", "int"},
    {"__builtin__", "reduce", "functools", "reduce"},
    {"__builtin__", "unichr", "builtins", "chr"},
    {"__builtin__", "unicode", "builtins", "str"},
    {"__builtin__", "xrange", "builtins", "range"},
    {"_multiprocessing", "Connection", "multiprocessing.connection", "Connection"},
    {"_socket", "fromfd", "socket", "fromfd"},
    {"exceptions", "ArithmeticError", "builtins", "ArithmeticError"},
    {"exceptions", "AssertionError", "builtins", "AssertionError"},
    {"exceptions", "AttributeError", "builtins", "AttributeError"},
    {"exceptions", "BaseException", "builtins", "BaseException"},
    {"exceptions", "BufferError", "builtins", "BufferError"},
    {"exceptions", "BytesWarning", "builtins", "BytesWarning"},
    {"exceptions", "DeprecationWarning", "builtins", "DeprecationWarning"},
    {"exceptions", "EOFError", "builtins", "EOFError"},
    {"exceptions", "EnvironmentError", "builtins", "EnvironmentError"},
    {"exceptions", "Exception", "builtins", "Exception"},
    {"exceptions", "FloatingPointError", "builtins", "FloatingPointError"},
    {"exceptions", "FutureWarning", "builtins", "FutureWarning"},
    {"exceptions", "GeneratorExit", "builtins", "GeneratorExit"},
    {"exceptions", "IOError", "builtins", "IOError"},
    {"exceptions", "ImportError", "builtins", "ImportError"},
    {"exceptions", "ImportWarning", "builtins", "ImportWarning"},
    {"exceptions", "IndentationError", "builtins", "IndentationError"},
    {"exceptions", "IndexError", "builtins", "IndexError"},
    {"exceptions", "KeyError", "builtins", "KeyError"},
    {"exceptions", "KeyboardInterrupt", "builtins", "KeyboardInterrupt"},
    {"exceptions", "LookupError", "builtins", "LookupError"},
    {"exceptions", "MemoryError", "builtins", "MemoryError"},
    {"exceptions", "NameError", "builtins", "NameError"},
    {"exceptions", "NotImplementedError", "builtins", "NotImplementedError"},
    {"exceptions", "OSError", "builtins", "OSError"},
    {"exceptions", "OverflowError", "builtins", "OverflowError"},
    {"exceptions", "PendingDeprecationWarning", "builtins", "PendingDeprecationWarning"},
    {"exceptions", "ReferenceError", "builtins", "ReferenceError"},
    {"exceptions", "RuntimeError", "builtins", "RuntimeError"},
    {"exceptions", "RuntimeWarning", "builtins", "RuntimeWarning"},
    {"exceptions", "StandardError", "builtins", "Exception"},
    {"exceptions", "StopIteration", "builtins", "StopIteration"},
    {"exceptions", "SyntaxError", "builtins", "SyntaxError"},
    {"exceptions", "SyntaxWarning", "builtins", "SyntaxWarning"},
    {"exceptions", "SystemError", "builtins", "SystemError"},
    {"exceptions", "SystemExit", "builtins", "SystemExit"},
    {"exceptions", "TabError", "builtins", "TabError"},
    {"exceptions", "TypeError", "builtins", "TypeError"},
    {"exceptions", "UnboundLocalError", "builtins", "UnboundLocalError"},
    {"exceptions", "UnicodeDecodeError", "builtins", "UnicodeDecodeError"},
    {"exceptions", "UnicodeEncodeError", "builtins", "UnicodeEncodeError"},
    {"exceptions", "UnicodeError", "builtins", "UnicodeError"},
    {"exceptions", "UnicodeTranslateError", "builtins", "UnicodeTranslateError"},
    {"exceptions", "UnicodeWarning", "builtins", "UnicodeWarning"},
    {"exceptions", "UserWarning", "builtins", "UserWarning"},
    {"exceptions", "ValueError", "builtins", "ValueError"},
    {"exceptions", "Warning", "builtins", "Warning"},
    {"exceptions", "ZeroDivisionError", "builtins", "ZeroDivisionError"},
    {"itertools", "ifilter", "builtins", "filter"},
    {"itertools", "ifilterfalse", "itertools", "filterfalse"},
    {"itertools", "imap", "builtins", "map"},
    {"itertools", "izip", "builtins", "zip"},
    {"itertools", "izip_longest", "itertools", "zip_longest"},
    {"multiprocessing", "AuthenticationError", "multiprocessing.context", "AuthenticationError"},
    {"multiprocessing", "BufferTooShort", "multiprocessing.context", "BufferTooShort"},
    {"multiprocessing", "ProcessError", "multiprocessing.context", "ProcessError"},
    {"multiprocessing", "TimeoutError", "multiprocessing.context", "TimeoutError"},
    {"multiprocessing.forking", "Popen", "multiprocessing.popen_fork", "Popen"},
    {"multiprocessing.process", "Process", "multiprocessing.context", "Process"},
    {"socket", "_socketobject", "socket", "SocketType"},
    {"urllib", "ContentTooShortError", "urllib.error", "ContentTooShortError"},
    {"urllib", "getproxies", "urllib.request", "getproxies"},
    {"urllib", "pathname2url", "urllib.request", "pathname2url"},
    {"urllib", "quote", "urllib.parse", "quote"},
    {"urllib", "quote_plus", "urllib.parse", "quote_plus"},
    {"urllib", "unquote", "urllib.parse", "unquote"},
    {"urllib", "unquote_plus", "urllib.parse", "unquote_plus"},
    {"urllib", "url2pathname", "urllib.request", "url2pathname"},
    {"urllib", "urlcleanup", "urllib.request", "urlcleanup"},
    {"urllib", "urlencode", "urllib.parse", "urlencode"},
    {"urllib", "urlopen", "urllib.request", "urlopen"},
    {"urllib", "urlretrieve", "urllib.request", "urlretrieve"},
    {"urllib2", "HTTPError", "urllib.error", "HTTPError"},
    {"urllib2", "URLError", "urllib.error", "URLError"},
    {"whichdb", "whichdb", "dbm", "whichdb"},
};
constexpr ModuleMap kReverseImportMapping[] = {
    {"_bz2", "bz2"},
    {"_dbm", "dbm"},
    {"_dummy_thread", "dummy_thread"},
    {"_functools", "functools"},
    {"_gdbm", "gdbm"},
    {"_markupbase", "markupbase"},
    {"_pickle", "pickle"},
    {"_thread", "thread"},
    {"builtins", "__builtin__"},
    {"collections.abc", "_abcoll"},
    {"configparser", "ConfigParser"},
    {"copyreg", "copy_reg"},
    {"dbm", "anydbm"},
    {"dbm.bsd", "dbhash"},
    {"dbm.dumb", "dumbdbm"},
    {"dbm.gnu", "gdbm"},
    {"dbm.ndbm", "dbm"},
    {"html.entities", "htmlentitydefs"},
    {"html.parser", "HTMLParser"},
    {"http.client", "httplib"},
    {"http.cookiejar", "cookielib"},
    {"http.cookies", "Cookie"},
    {"http.server", "BaseHTTPServer"},
    {"queue", "Queue"},
    {"reprlib", "repr"},
    {"socketserver", "SocketServer"},
    {"subprocess", "commands"},
    {"test.support", "test.test_support"},
    {"tkinter", "Tkinter"},
    {"tkinter.colorchooser", "tkColorChooser"},
    {"tkinter.commondialog", "tkCommonDialog"},
    {"tkinter.constants", "Tkconstants"},
    {"tkinter.dialog", "Dialog"},
    {"tkinter.dnd", "Tkdnd"},
    {"tkinter.filedialog", "tkFileDialog"},
    {"tkinter.font", "tkFont"},
    {"tkinter.messagebox", "tkMessageBox"},
    {"tkinter.scrolledtext", "ScrolledText"},
    {"tkinter.simpledialog", "tkSimpleDialog"},
    {"tkinter.tix", "Tix"},
    {"tkinter.ttk", "ttk"},
    {"urllib.parse", "urlparse"},
    {"urllib.request", "urllib2"},
    {"urllib.robotparser", "robotparser"},
    {"winreg", "_winreg"},
    {"xmlrpc.client", "xmlrpclib"},
    {"xmlrpc.server", "SimpleXMLRPCServer"},
};
constexpr NameMap kReverseNameMapping[] = {
    {"_functools", "reduce", "__builtin__", "reduce"},
    {"_socket", "socket", "socket", "_socketobject"},
    {"builtins", "ArithmeticError", "exceptions", "ArithmeticError"},
    {"builtins", "AssertionError", "exceptions", "AssertionError"},
    {"builtins", "AttributeError", "exceptions", "AttributeError"},
    {"builtins", "BaseException", "exceptions", "BaseException"},
    {"builtins", "BrokenPipeError", "exceptions", "OSError"},
    {"builtins", "BufferError", "exceptions", "BufferError"},
    {"builtins", "BytesWarning", "exceptions", "BytesWarning"},
    {"builtins", "ChildProcessError", "exceptions", "OSError"},
    {"builtins", "ConnectionAbortedError", "exceptions", "OSError"},
    {"builtins", "ConnectionError", "exceptions", "OSError"},
    {"builtins", "ConnectionRefusedError", "exceptions", "OSError"},
    {"builtins", "ConnectionResetError", "exceptions", "OSError"},
    {"builtins", "DeprecationWarning", "exceptions", "DeprecationWarning"},
    {"builtins", "EOFError", "exceptions", "EOFError"},
    {"builtins", "EnvironmentError", "exceptions", "EnvironmentError"},
    {"builtins", "Exception", "exceptions", "Exception"},
    {"builtins", "FileExistsError", "exceptions", "OSError"},
    {"builtins", "FileNotFoundError", "exceptions", "OSError"},
    {"builtins", "FloatingPointError", "exceptions", "FloatingPointError"},
    {"builtins", "FutureWarning", "exceptions", "FutureWarning"},
    {"builtins", "GeneratorExit", "exceptions", "GeneratorExit"},
    {"builtins", "IOError", "exceptions", "IOError"},
    {"builtins", "ImportError", "exceptions", "ImportError"},
    {"builtins", "ImportWarning", "exceptions", "ImportWarning"},
    {"builtins", "IndentationError", "exceptions", "IndentationError"},
    {"builtins", "IndexError", "exceptions", "IndexError"},
    {"builtins", "InterruptedError", "exceptions", "OSError"},
    {"builtins", "IsADirectoryError", "exceptions", "OSError"},
    {"builtins", "KeyError", "exceptions", "KeyError"},
    {"builtins", "KeyboardInterrupt", "exceptions", "KeyboardInterrupt"},
    {"builtins", "LookupError", "exceptions", "LookupError"},
    {"builtins", "MemoryError", "exceptions", "MemoryError"},
    {"builtins", "ModuleNotFoundError", "exceptions", "ImportError"},
    {"builtins", "NameError", "exceptions", "NameError"},
    {"builtins", "NotADirectoryError", "exceptions", "OSError"},
    {"builtins", "NotImplementedError", "exceptions", "NotImplementedError"},
    {"builtins", "OSError", "exceptions", "OSError"},
    {"builtins", "OverflowError", "exceptions", "OverflowError"},
    {"builtins", "PendingDeprecationWarning", "exceptions", "PendingDeprecationWarning"},
    {"builtins", "PermissionError", "exceptions", "OSError"},
    {"builtins", "ProcessLookupError", "exceptions", "OSError"},
    {"builtins", "ReferenceError", "exceptions", "ReferenceError"},
    {"builtins", "RuntimeError", "exceptions", "RuntimeError"},
    {"builtins", "RuntimeWarning", "exceptions", "RuntimeWarning"},
    {"builtins", "StopIteration", "exceptions", "StopIteration"},
    {"builtins", "SyntaxError", "exceptions", "SyntaxError"},
    {"builtins", "SyntaxWarning", "exceptions", "SyntaxWarning"},
    {"builtins", "SystemError", "exceptions", "SystemError"},
    {"builtins", "SystemExit", "exceptions", "SystemExit"},
    {"builtins", "TabError", "exceptions", "TabError"},
    {"builtins", "TimeoutError", "exceptions", "OSError"},
    {"builtins", "TypeError", "exceptions", "TypeError"},
    {"builtins", "UnboundLocalError", "exceptions", "UnboundLocalError"},
    {"builtins", "UnicodeDecodeError", "exceptions", "UnicodeDecodeError"},
    {"builtins", "UnicodeEncodeError", "exceptions", "UnicodeEncodeError"},
    {"builtins", "UnicodeError", "exceptions", "UnicodeError"},
    {"builtins", "UnicodeTranslateError", "exceptions", "UnicodeTranslateError"},
    {"builtins", "UnicodeWarning", "exceptions", "UnicodeWarning"},
    {"builtins", "UserWarning", "exceptions", "UserWarning"},
    {"builtins", "ValueError", "exceptions", "ValueError"},
    {"builtins", "Warning", "exceptions", "Warning"},
    {"builtins", "ZeroDivisionError", "exceptions", "ZeroDivisionError"},
    {"builtins", "chr", "__builtin__", "unichr"},
    {"builtins", "filter", "itertools", "ifilter"},
    {"builtins", "int", "__builtin__", "long"},
    {"builtins", "map", "itertools", "imap"},
    {"builtins", "range", "__builtin__", "xrange"},
    {"builtins", "str", "__builtin__", "unicode"},
    {"builtins", "zip", "itertools", "izip"},
    {"collections", "UserDict", "UserDict", "IterableUserDict"},
    {"collections", "UserList", "UserList", "UserList"},
    {"collections", "UserString", "UserString", "UserString"},
    {"dbm", "whichdb", "whichdb", "whichdb"},
    {"functools", "reduce", "__builtin__", "reduce"},
    {"http.server", "CGIHTTPRequestHandler", "CGIHTTPServer", "CGIHTTPRequestHandler"},
    {"http.server", "SimpleHTTPRequestHandler", "SimpleHTTPServer", "SimpleHTTPRequestHandler"},
    {"itertools", "filterfalse", "itertools", "ifilterfalse"},
    {"itertools", "zip_longest", "itertools", "izip_longest"},
    {"multiprocessing.connection", "Connection", "_multiprocessing", "Connection"},
    {"multiprocessing.context", "AuthenticationError", "multiprocessing", "AuthenticationError"},
    {"multiprocessing.context", "BufferTooShort", "multiprocessing", "BufferTooShort"},
    {"multiprocessing.context", "Process", "multiprocessing.process", "Process"},
    {"multiprocessing.context", "ProcessError", "multiprocessing", "ProcessError"},
    {"multiprocessing.context", "TimeoutError", "multiprocessing", "TimeoutError"},
    {"multiprocessing.popen_fork", "Popen", "multiprocessing.forking", "Popen"},
    {"socket", "fromfd", "_socket", "fromfd"},
    {"sys", "intern", "__builtin__", "intern"},
    {"tkinter.filedialog", "FileDialog", "FileDialog", "FileDialog"},
    {"tkinter.filedialog", "LoadFileDialog", "FileDialog", "LoadFileDialog"},
    {"tkinter.filedialog", "SaveFileDialog", "FileDialog", "SaveFileDialog"},
    {"tkinter.simpledialog", "SimpleDialog", "SimpleDialog", "SimpleDialog"},
    {"urllib.error", "ContentTooShortError", "urllib", "ContentTooShortError"},
    {"urllib.error", "HTTPError", "urllib2", "HTTPError"},
    {"urllib.error", "URLError", "urllib2", "URLError"},
    {"urllib.parse", "quote", "urllib", "quote"},
    {"urllib.parse", "quote_plus", "urllib", "quote_plus"},
    {"urllib.parse", "unquote", "urllib", "unquote"},
    {"urllib.parse", "unquote_plus", "urllib", "unquote_plus"},
    {"urllib.parse", "urlencode", "urllib", "urlencode"},
    {"urllib.request", "getproxies", "urllib", "getproxies"},
    {"urllib.request", "pathname2url", "urllib", "pathname2url"},
    {"urllib.request", "url2pathname", "urllib", "url2pathname"},
    {"urllib.request", "urlcleanup", "urllib", "urlcleanup"},
    {"urllib.request", "urlopen", "urllib", "urlopen"},
    {"urllib.request", "urlretrieve", "urllib", "urlretrieve"},
    {"xmlrpc.server", "DocCGIXMLRPCRequestHandler", "DocXMLRPCServer", "DocCGIXMLRPCRequestHandler"},
    {"xmlrpc.server", "DocXMLRPCRequestHandler", "DocXMLRPCServer", "DocXMLRPCRequestHandler"},
    {"xmlrpc.server", "DocXMLRPCServer", "DocXMLRPCServer", "DocXMLRPCServer"},
    {"xmlrpc.server", "ServerHTMLDoc", "DocXMLRPCServer", "ServerHTMLDoc"},
    {"xmlrpc.server", "XMLRPCDocGenerator", "DocXMLRPCServer", "XMLRPCDocGenerator"},
};

template <std::size_t N1, std::size_t N2>
std::pair<std::string, std::string> apply(const ModuleMap (&modules)[N1], const NameMap (&names)[N2],
                                          std::string_view module, std::string_view name) {
  // Tables are sorted, so binary search.
  auto n = std::lower_bound(std::begin(names), std::end(names), std::pair{module, name},
                            [](const NameMap& e, const std::pair<std::string_view, std::string_view>& k) {
                              return std::pair{e.from_module, e.from_name} < k;
                            });
  if (n != std::end(names) && n->from_module == module && n->from_name == name)
    return {std::string(n->to_module), std::string(n->to_name)};
  auto m = std::lower_bound(std::begin(modules), std::end(modules), module,
                            [](const ModuleMap& e, std::string_view k) { return e.from < k; });
  if (m != std::end(modules) && m->from == module) return {std::string(m->to), std::string(name)};
  return {std::string(module), std::string(name)};
}

}  // namespace

std::pair<std::string, std::string> py2_to_py3_name(std::string_view module, std::string_view name) {
  return apply(kImportMapping, kNameMapping, module, name);
}

std::pair<std::string, std::string> py3_to_py2_name(std::string_view module, std::string_view name) {
  return apply(kReverseImportMapping, kReverseNameMapping, module, name);
}

std::optional<Complex> complex_from_args(const std::vector<Value>& args) {
  if (args.size() > 2) return std::nullopt;
  double parts[2] = {0.0, 0.0};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Value& a = args[i];
    if (a.is(Value::Kind::kFloat)) parts[i] = a.as_float();
    else if (a.is(Value::Kind::kInt)) parts[i] = static_cast<double>(a.as_int());  // round-to-nearest, as float(int)
    else if (a.is(Value::Kind::kBool)) parts[i] = a.as_bool() ? 1.0 : 0.0;
    else return std::nullopt;
  }
  return Complex{parts[0], parts[1]};
}

std::optional<Value> stdlib_reduce(const Object& obj) {
  if (obj.how != Construct::kReduce || !obj.callable || !obj.args) return std::nullopt;
  const Value& c = *obj.callable;
  const Value& a = *obj.args;
  if (!c.is(Value::Kind::kGlobal) || !a.is(Value::Kind::kTuple)) return std::nullopt;
  const Global& g = c.as_global();
  const std::vector<Value>& args = a.items();
  auto is = [&](std::string_view m, std::string_view n) { return g.module == m && g.name == n; };
  auto is_latin1 = [](const Value& v) {
    return v.is(Value::Kind::kStr) && (v.as_str() == "latin1" || v.as_str() == "latin-1");
  };
  auto is_utf8 = [](const Value& v) {
    return v.is(Value::Kind::kStr) && (v.as_str() == "utf-8" || v.as_str() == "utf8" || v.as_str() == "UTF-8");
  };

  if (is("collections", "OrderedDict") || is("collections", "Counter")) {
    auto d = std::make_shared<Dict>();
    d->kind = g.name == "OrderedDict" ? DictKind::kOrderedDict : DictKind::kCounter;
    if (args.empty()) return Value(std::move(d));
    if (args.size() != 1) return std::nullopt;
    KeyIndex index;
    if (args[0].is(Value::Kind::kDict)) {  // Counter(dict), OrderedDict(dict)
      for (const auto& [k, v] : args[0].as_dict().items)
        if (!dict_set(d->items, index, k, v)) return std::nullopt;
      return Value(std::move(d));
    }
    if (args[0].is(Value::Kind::kList)) {  // Python 2 OrderedDict: ([[k, v], ...],)
      for (const Value& pair : args[0].items()) {
        if (!(pair.is(Value::Kind::kList) || pair.is(Value::Kind::kTuple)) || pair.items().size() != 2)
          return std::nullopt;
        if (!dict_set(d->items, index, pair.items()[0], pair.items()[1])) return std::nullopt;
      }
      return Value(std::move(d));
    }
    return std::nullopt;
  }
  if (is("builtins", "set") || is("builtins", "frozenset")) {
    auto s = std::make_shared<Set>();
    s->frozen = g.name == "frozenset";
    if (args.empty()) return Value(std::move(s));
    if (args.size() != 1 || !(args[0].is(Value::Kind::kList) || args[0].is(Value::Kind::kTuple))) return std::nullopt;
    KeyIndex index;
    for (const Value& x : args[0].items())
      if (!set_add(s->items, index, x)) return std::nullopt;
    return Value(std::move(s));
  }
  if (is("_codecs", "encode")) {
    if (args.size() != 2 || !args[0].is(Value::Kind::kStr)) return std::nullopt;
    if (is_utf8(args[1])) {
      // Strings hold UTF-8; a lone surrogate (ED A0..BF ..) would make Python raise.
      const std::string_view t = args[0].as_str();
      for (std::size_t i = 0; i + 1 < t.size(); ++i)
        if (static_cast<unsigned char>(t[i]) == 0xED && static_cast<unsigned char>(t[i + 1]) >= 0xA0)
          return std::nullopt;
      return Value::bytes(std::string(t));
    }
    if (!is_latin1(args[1])) return std::nullopt;
    auto b = util::latin1_encode(args[0].as_str());
    if (!b) return std::nullopt;
    return Value::bytes(std::move(*b));
  }
  if (is("builtins", "bytes")) {
    if (args.empty()) return Value::bytes("");
    // bytes([104, 105]): a list or tuple of ints in 0..255.
    if (args.size() != 1 || !(args[0].is(Value::Kind::kList) || args[0].is(Value::Kind::kTuple))) return std::nullopt;
    std::string out;
    out.reserve(args[0].items().size());
    for (const Value& x : args[0].items()) {
      if (!x.is(Value::Kind::kInt) || x.as_int() < 0 || x.as_int() > 255) return std::nullopt;
      out += static_cast<char>(x.as_int());
    }
    return Value::bytes(std::move(out));
  }
  if (is("builtins", "bytearray")) {
    if (args.empty()) return Value::bytes("", true);
    if (args.size() == 1 && args[0].is(Value::Kind::kBytes) && !args[0].is_bytearray())
      return Value::bytes(std::string(args[0].as_bytes()), true);
    if (args.size() == 2 && args[0].is(Value::Kind::kStr) && is_latin1(args[1])) {
      auto b = util::latin1_encode(args[0].as_str());
      if (!b) return std::nullopt;
      return Value::bytes(std::move(*b), true);
    }
    return std::nullopt;
  }
  if (is("builtins", "complex")) {
    auto c = complex_from_args(args);
    if (!c) return std::nullopt;
    return Value(*c);
  }
  if (is("builtins", "getattr")) {
    if (args.size() != 2 || !args[0].is(Value::Kind::kGlobal) || !args[1].is(Value::Kind::kStr)) return std::nullopt;
    std::string_view attr = args[1].as_str();
    if (attr.empty() || attr.find('.') != std::string_view::npos) return std::nullopt;
    const Global& parent = args[0].as_global();
    return Value::global(parent.module, parent.name + "." + std::string(attr));
  }
  return std::nullopt;
}

}  // namespace tensorseal::detail::pickle
