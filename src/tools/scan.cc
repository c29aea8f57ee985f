// `scan`: classification of the globals a file's pickles reference. Reading never
// executes anything, so scanning a hostile file is safe; the verdict says what a
// stock loader (pickle.load / torch.load(weights_only=False)) would have run.
#include "tensorseal/scan.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "dcp/constants.h"
#include "pickle/vm.h"
#include "tools/json.h"
#include "tools/scan.h"
#include "torch/composite.h"

namespace tensorseal {
namespace {

// torch's weights_only allowlist (torch/_weights_only_unpickler.py) plus numpy's array
// reconstruction and the inert builtins protocol 2 uses.
constexpr std::array<std::string_view, 47> kSafe = {
    "collections.OrderedDict",
    "collections.Counter",
    "torch.nn.parameter.Parameter",
    "torch.Size",
    "torch.Tensor",
    "torch.device",
    "torch.storage.UntypedStorage",
    "torch.storage.TypedStorage",
    "torch.UntypedStorage",
    "torch.serialization._get_layout",
    "torch.storage._load_from_bytes",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_qtensor",
    "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_sparse_csr_tensor",
    "torch._utils._rebuild_wrapper_subclass",
    "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_device_tensor_from_numpy",
    "torch._utils._rebuild_nested_tensor",
    "torch._tensor._rebuild_from_type_v2",
    // jagged nested tensors (allowed by weights_only once torch.nested / torch._dynamo are imported)
    "torch.nested._internal.nested_tensor._rebuild_njt",
    "torch.nested._internal.nested_tensor.NestedTensor",
    "torch._dynamo.decorators._DimRange",
    // DTensors: is_weights_only_dtensor_class (torch/composite.h holds the classes)
    "torch.per_tensor_affine",
    "torch.per_channel_affine",
    "torch.per_tensor_symmetric",
    "torch.per_channel_symmetric",
    "torch.per_channel_affine_float_qparams",
    "_codecs.encode",
    "builtins.set",
    "builtins.frozenset",
    "builtins.complex",
    "builtins.bytearray",
    "builtins.bytes",
    "builtins.slice",
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
    "numpy.ndarray",
    "numpy.dtype",
    "numpy.core.multiarray.scalar",
    "numpy._core.multiarray.scalar",
    // protocol >= 5 arrays: frombuffer(buf, dtype).reshape(shape, order); numpy refuses
    // object dtypes from a buffer, so it rebuilds data only.
    "numpy.core.numeric._frombuffer",
    "numpy._core.numeric._frombuffer",
};

// DTensor and its spec's classes, allowed by weights_only once torch.distributed.tensor
// is imported: DTensor only at its own module (kDTensorTypes' first), as torch names it.
bool is_weights_only_dtensor_class(std::string_view module, std::string_view name) {
  const auto& home = detail::torch::kDTensorTypes[0];
  return (module == home.module && name == home.name) || detail::torch::is_dtensor_spec_class(module, name);
}

// Whole modules whose every name can run code, touch files, processes or the network.
// The list and its sources: docs/security.md ("Dangerous globals").
constexpr auto kDangerousModules = std::to_array<std::string_view>({
    "os",
    "posix",
    "nt",
    "subprocess",
    "_posixsubprocess",
    "sys",
    "runpy",
    "importlib",
    "pickle",
    "_pickle",
    "cPickle",
    "marshal",
    "ctypes",
    "socket",
    "shutil",
    "pty",
    "commands",
    "webbrowser",
    "code",
    "codeop",
    "asyncio",
    "multiprocessing",
    "_thread",
    "threading",
    "signal",
    "tempfile",
    "urllib",
    "http",
    "ftplib",
    "smtplib",
    "telnetlib",
    "bdb",
    "pdb",
    "timeit",
    "trace",
    "profile",
    "cProfile",
    "distutils",
    "setuptools",
    "pip",
    "zipimport",
    "imp",
    "types",
    "dill",
    // Gadget modules: pydoc.locate imports any name, pydoc.pipepager runs a shell;
    // venv/ensurepip run pip in a subprocess; idlelib's run/rpc/debugger execute code;
    // imaplib.IMAP4_stream and platform.popen run commands;
    // _io/io open files.
    "pydoc",
    "venv",
    "ensurepip",
    "idlelib",
    "imaplib",
    "platform",
    "_io",
    "io",
    // Private stdlib twins and gadgets found since (docs/security.md): the C halves of
    // operator/functools (attrgetter, methodcaller, partial, reduce, call); _pyio.open;
    // ctypes' C half; sockets; doctest/site/compileall/py_compile run or compile code;
    // archives, databases and compressors open files for writing.
    "operator",
    "_operator",
    "functools",
    "_functools",
    "_pyio",
    "_ctypes",
    "_socket",
    "_winapi",
    "_subprocess",
    "doctest",
    "site",
    "compileall",
    "py_compile",
    "zipapp",
    "socketserver",
    "xmlrpc",
    "shelve",
    "dbm",
    "sqlite3",
    "tarfile",
    "zipfile",
    "gzip",
    "bz2",
    "lzma",
    "fileinput",
});

// Dotted prefixes (module paths) every name under which is dangerous.
constexpr auto kDangerousPrefixes = std::to_array<std::string_view>({
    "torch.utils.collect_env",                          // run(command) via subprocess
    "torch.utils.cpp_extension",                        // load/load_inline compile and import code
    "numpy.f2py",                                       // compiles and imports Fortran/C
    "numpy.distutils", "numpy.testing._private.utils",  // runstring exec()s a string
    "logging.config",                                   // listen()/fileConfig evaluate configuration code
    "logging.handlers",                                 // file, socket, SMTP and HTTP writers
    "torch._C._jit", "torch.jit",                       // load/compile TorchScript programs
    "torch.package",                                    // PackageImporter imports code from the archive
    "torch.hub",                                        // downloads and runs hubconf.py
    "torch.fx.graph_module",                            // _forward_from_src exec()s generated source
    "torch._inductor.codecache",                        // PyCodeCache.load compiles and imports source
    "numpy.testing",                                    // numpy.testing._private.utils.runstring, re-exported
    "numpy.ctypeslib",                                  // load_library loads a shared library
    "numpy.lib.npyio", "numpy.lib._npyio_impl",         // load/save/savez: pickles and files
});

// Single names that execute code or reach anything through attribute access.
constexpr auto kDangerousNames = std::to_array<std::string_view>({
    "builtins.eval",
    "builtins.exec",
    "builtins.execfile",
    "builtins.compile",
    "builtins.getattr",
    "builtins.setattr",
    "builtins.delattr",
    "builtins.open",
    "builtins.file",
    "builtins.__import__",
    "io.open",
    "_io.open",
    "io.open_code",
    "_io.open_code",
    "io.FileIO",
    "_io.FileIO",  // builtins.open's own names
    "builtins.globals",
    "builtins.locals",
    "builtins.vars",
    "builtins.input",
    "builtins.raw_input",
    "builtins.breakpoint",
    "builtins.apply",
    "builtins.reload",
    "builtins.exit",
    "builtins.quit",
    "builtins.help",
    "builtins.memoryview",
    "operator.attrgetter",
    "operator.itemgetter",
    "operator.methodcaller",
    "functools.partial",
    "functools.reduce",
    "functools.partialmethod",
    "torch.serialization.load",
    "torch.load",
    "torch.hub.load",
    "torch.hub.load_state_dict_from_url",
    "torch.jit.load",
    "numpy.load",
    "numpy.lib.npyio.load",
    "copyreg._reconstructor",
    "copyreg.__newobj__",
    "copyreg.__newobj_ex__",
    "builtins.__build_class__",
    "numpy.memmap",
    "numpy.fromfile",
    "numpy.loadtxt",
    "numpy.genfromtxt",
    "numpy.savez",
    "numpy.savez_compressed",
    "numpy.tofile",
});

// Single gadgets outside the modules above: file writes and command runners.
constexpr std::array<std::string_view, 8> kDangerousGadgets = {
    "torch.save",
    "torch.serialization.save",
    "torch._C.PyTorchFileWriter",  // write any file
    "logging.FileHandler",
    "logging.basicConfig",       // create/append files
    "uuid._get_command_stdout",  // runs a command
    "numpy.save",
    "numpy.savetxt",  // write any file
};

// A name the last component of which runs code or commands wherever it is reached
// from (e.g. a module that happens to import os: "X.os.system").
// Also gadget methods reached through a class ("code.InteractiveInterpreter.runsource",
// "pathlib.Path.touch") and loaders of other pickles.
constexpr auto kDangerousLeaves = std::to_array<std::string_view>({
    "system",
    "popen",
    "popen2",
    "popen3",
    "execv",
    "execve",
    "execl",
    "execlp",
    "execvp",
    "spawnv",
    "spawnl",
    "eval",
    "exec",
    "__import__",
    "execfile",
    "compile",
    "runsource",
    "runcode",
    "runctx",
    "runcall",
    "run",
    "run_path",
    "run_module",
    "_run_code",
    "_run_module_code",
    "spawn",
    "spawnve",
    "spawnvp",
    "fork_exec",
    "check_output",
    "check_call",
    "getoutput",
    "getstatusoutput",
    "Popen",
    "pipepager",
    "tempfilepager",
    "locate",
    "import_module",
    "load_inline",
    "loads",
    "runstring",
    "startfile",
    "touch",
    "write_text",
    "write_bytes",
    "unlink",
    "rmtree",
});

// Attribute walks no value class needs: through these a dotted name reaches any
// object ("torch._utils._rebuild_tensor.__globals__", "builtins.open.__call__").
bool is_dunder(std::string_view part) { return part.size() > 4 && part.starts_with("__") && part.ends_with("__"); }

std::string fold(std::string_view module) {
  if (module == "__builtin__") return "builtins";
  if (module == "copy_reg") return "copyreg";
  return std::string(module);
}

bool is_torch_dtype_or_storage(std::string_view module, std::string_view name) {
  if (module != "torch") return false;
  if (dtype_from_name(name)) return true;
  if (dtype_from_legacy_storage(name)) return true;
  return name == "strided" || name == "sparse_coo" || name == "sparse_csr" || name == "sparse_csc" ||
         name == "sparse_bsr" || name == "sparse_bsc" || name == "_mkldnn";
}

// torch's dense legacy tensor classes (torch._tensor_classes, which torch's weights_only
// loader allows): the tensor type torch 0.1's tar format pickles beside each tensor.
bool is_legacy_tensor_class(std::string_view module, std::string_view name) {
  constexpr std::array<std::string_view, 10> kClasses = {"BFloat16Tensor", "BoolTensor",  "ByteTensor", "CharTensor",
                                                         "DoubleTensor",   "FloatTensor", "HalfTensor", "IntTensor",
                                                         "LongTensor",     "ShortTensor"};
  return (module == "torch" || module == "torch.cuda") &&
         std::find(kClasses.begin(), kClasses.end(), name) != kClasses.end();
}

}  // namespace

std::string_view verdict_name(Verdict v) noexcept {
  switch (v) {
    case Verdict::kSafe:
      return "safe";
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kDangerous:
      return "dangerous";
  }
  return "unknown";
}

Verdict classify_global(std::string_view module_in, std::string_view name, std::string* reason) {
  const std::string module = fold(module_in);
  const std::string full = module + "." + std::string(name);
  auto say = [&](Verdict v, std::string why) {
    if (reason) *reason = std::move(why);
    return v;
  };
  if (module == detail::pickle::kComputedModule)
    return say(Verdict::kDangerous, "a name built at load time: the loader imports whatever it evaluates to");
  if (module == detail::tools::kUnfollowedModule)
    return say(Verdict::kDangerous, "the loader unpickles a payload reached this way, which scan cannot follow");
  if (module == detail::tools::kLatentModule)
    return say(Verdict::kDangerous, "crashes or corrupts torch < 2.10's weights_only unpickler (CVE-2026-24747)");
  // The name the loader resolves: module, then `name` walked attribute by attribute.
  // A dangerous name reached through any module that holds it ("torch.serialization.
  // torch.load", "numpy.core.builtins.eval") is that name.
  for (std::size_t dot = full.find('.'); dot != std::string::npos; dot = full.find('.', dot + 1)) {
    const std::string_view tail = std::string_view(full).substr(dot + 1);
    for (auto d : kDangerousNames)
      if (d == tail) return say(Verdict::kDangerous, "reaches " + std::string(d) + ", which can execute code");
    for (auto d : kDangerousGadgets)
      if (d == tail)
        return say(Verdict::kDangerous, "reaches " + std::string(d) + ", which writes files or runs commands");
  }
  {
    std::size_t begin = 0;
    while (begin <= name.size()) {
      const std::size_t dot = std::min(name.find('.', begin), name.size());
      if (is_dunder(name.substr(begin, dot - begin)) && (dot < name.size() || begin > 0))
        return say(Verdict::kDangerous, "walks attribute '" + std::string(name.substr(begin, dot - begin)) +
                                            "', which reaches arbitrary objects");
      begin = dot + 1;
    }
  }
  if (module == "torch._C" && (name.starts_with("_jit") || name.starts_with("_import_ir_module") ||
                               name.starts_with("import_ir_module") || name.starts_with("_load_for_lite")))
    return say(Verdict::kDangerous, "loads or compiles TorchScript programs");
  for (auto d : kDangerousNames)
    if (d == full) return say(Verdict::kDangerous, "can execute code or reach arbitrary objects");
  for (auto d : kDangerousGadgets)
    if (d == full) return say(Verdict::kDangerous, "writes files or runs commands");
  for (auto p : kDangerousPrefixes)
    if (full.starts_with(p) && full.size() > p.size() && full[p.size()] == '.')
      return say(Verdict::kDangerous, "'" + std::string(p) + "' compiles, runs or writes on load");
  // Every dotted component of the path: a dangerous module reached as an attribute of
  // another ("numpy.core.os.system") is as dangerous as imported directly.
  std::size_t begin = 0;
  while (begin <= full.size()) {
    const std::size_t dot = std::min(full.find('.', begin), full.size());
    const std::string_view part = std::string_view(full).substr(begin, dot - begin);
    const bool last = dot == full.size();
    for (auto m : kDangerousModules)
      if (m == part && !last)
        return say(Verdict::kDangerous, "reaches module '" + std::string(part) +
                                            "', which can run commands, import code or touch the system");
    if (last && begin > 0)
      for (auto leaf : kDangerousLeaves)
        if (leaf == part) return say(Verdict::kDangerous, "'" + std::string(part) + "' runs code or commands");
    begin = dot + 1;
  }
  if (module == "copyreg" && name == "_reconstructor") return say(Verdict::kDangerous, "calls an arbitrary class");
  for (auto s : kSafe)
    if (s == full) return say(Verdict::kSafe, "allowed by torch's weights_only loader");
  if (is_weights_only_dtensor_class(module, name)) return say(Verdict::kSafe, "allowed by torch's weights_only loader");
  if (is_torch_dtype_or_storage(module, name)) return say(Verdict::kSafe, "torch dtype, layout or storage class");
  if (is_legacy_tensor_class(module, name)) return say(Verdict::kSafe, "torch legacy tensor class");
  for (auto s : detail::dcp::kMetadataGlobals)
    if (s == full) return say(Verdict::kSafe, "inert value class of torch.distributed.checkpoint's .metadata");
  return say(Verdict::kUnknown, "not on the safe list: loading it with pickle imports and runs this name");
}

namespace detail::tools {

ScanReport summarize(const std::string& file, Format format, const std::vector<GlobalRef>& globals) {
  ScanReport r;
  r.file = file;
  r.format = format;
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  for (const auto& g : globals) {
    auto key = std::pair(g.module, g.name);
    auto it = index.find(key);
    if (it != index.end()) {
      r.findings[it->second].count++;
      continue;
    }
    ScanFinding f;
    f.module = g.module;
    f.name = g.name;
    f.where = g.where;
    f.count = 1;
    f.verdict = classify_global(g.module, g.name, &f.reason);
    index.emplace(key, r.findings.size());
    r.findings.push_back(std::move(f));
    if (static_cast<int>(r.findings.back().verdict) > static_cast<int>(r.verdict))
      r.verdict = r.findings.back().verdict;
  }
  return r;
}

}  // namespace detail::tools

ScanReport scan(const Checkpoint& c) { return detail::tools::summarize(c.file, c.format, c.globals); }

void require_safe(const ScanReport& r) {
  std::vector<const ScanFinding*> bad;
  for (const auto& f : r.findings)
    if (f.verdict != Verdict::kSafe) bad.push_back(&f);
  if (bad.empty()) return;
  std::string names;
  for (std::size_t i = 0; i < bad.size() && i < 8; ++i)
    names +=
        (i ? ", " : "") + bad[i]->module + "." + bad[i]->name + " (" + std::string(verdict_name(bad[i]->verdict)) + ")";
  const Rule rule = bad[0]->verdict == Verdict::kDangerous ? rules::kDangerousGlobal : rules::kUnknownGlobal;
  throw Error(rule,
              fmt::format("weights_only load refused {} global(s) outside the safe set: {}; first at {}", bad.size(),
                          names, bad[0]->where),
              r.file);
}

std::string to_json(const ScanReport& r) {
  using detail::tools::ojson;
  ojson j;
  j["file"] = r.file;
  j["format"] = format_name(r.format);
  j["verdict"] = verdict_name(r.verdict);
  ojson findings = ojson::array();
  for (const auto& f : r.findings)
    findings.push_back({{"module", f.module},
                        {"name", f.name},
                        {"verdict", verdict_name(f.verdict)},
                        {"count", f.count},
                        {"where", f.where},
                        {"reason", f.reason}});
  j["findings"] = std::move(findings);
  j["interpretations"] = r.interpretations;
  j["incomplete"] = r.incomplete;
  if (r.incomplete) j["error"] = r.error;
  return detail::tools::dump(j);
}

}  // namespace tensorseal
