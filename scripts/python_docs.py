"""Writes docs/python.md, the Python API page, from the package's docstrings.

    .venv/bin/python scripts/python_docs.py           # (re)writes docs/python.md
    .venv/bin/python scripts/python_docs.py --check   # exit 1 with a diff when it is stale
    .venv/bin/python scripts/python_docs.py --gaps    # docstrings lacking Args/Raises/Example

What is documented: every name in the ``__all__`` of the modules in MODULES, each under
the module that defines it (a class of tensorseal.errors re-exported by ``tensorseal``
is documented in tensorseal.errors and linked from tensorseal). Classes list their
public methods and properties; methods that implement a base class of another package
(torch's StorageWriter...) are named, their documentation is that package's.

Docstrings are Google style where they have sections: a line ``Args:``, ``Returns:``,
``Raises:``, ``Attributes:`` or ``Example:`` at the docstring's own indentation, then
indented ``name: text`` items (``Args``, ``Raises``, ``Attributes``), prose (``Returns``)
or code (``Example``, ``>>>`` prompts optional). Everything else is prose, in the reST
the docstrings use: double-backquoted literals, ``:class:`` roles, ``::`` and indented
blocks and doctests become Markdown. The output depends only on the docstrings and
signatures: names sorted, no addresses, no paths of the machine it runs on.

Without PYTHONPATH it imports the package staged in build/python (``make build``).
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import inspect
import os
import pathlib
import re
import sys
import textwrap
import typing
from typing import Any, Dict, List, Optional, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "python.md"
REGENERATE = ".venv/bin/python scripts/python_docs.py"

# The modules users import, in the page's order. Each must have an __all__.
MODULES = ["tensorseal", "tensorseal.torch", "tensorseal.safetensors", "tensorseal.dcp", "tensorseal.errors",
           "tensorseal.limits", "tensorseal.objects", "tensorseal.lightning"]
SECTIONS = {"Args": "Parameters", "Arguments": "Parameters", "Parameters": "Parameters", "Returns": "Returns",
            "Raises": "Raises", "Attributes": "Attributes", "Example": "Example", "Examples": "Example"}
OPTIONAL_PACKAGES = {"safetensors"}  # bases from these are left out: they depend on what is installed
WIDTH = 100  # signatures longer than this get one parameter per line


# ---- what is documented ---------------------------------------------------------

@dataclasses.dataclass
class Entry:
    """One documented object: a function, a class or a type alias of a module."""
    module: str       # the documented module it is listed under
    name: str         # its name there
    obj: Any
    kind: str         # "function", "class" or "alias"

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


def import_modules() -> Dict[str, Any]:
    if "PYTHONPATH" not in os.environ and (ROOT / "build" / "python" / "tensorseal").is_dir():
        sys.path.insert(0, str(ROOT / "build" / "python"))
    return {name: importlib.import_module(name) for name in MODULES}


def is_alias(obj: Any) -> bool:
    """A type alias such as ``PathLike = Union[str, os.PathLike[str]]`` (not a bare
    ``typing.Dict``)."""
    return typing.get_origin(obj) is not None and bool(typing.get_args(obj))


def kind_of(obj: Any) -> str:
    if is_alias(obj):
        return "alias"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    raise SystemExit(f"{obj!r} is neither a function, a class nor a type alias")


def home(obj: Any, listing: str) -> str:
    """The documented module an object belongs to: the one that defines it when that is
    documented, else the one listing it (tensorseal for the functions of _api)."""
    mod = getattr(obj, "__module__", None) if kind_of(obj) != "alias" else None
    return mod if mod in MODULES else listing


def collect(modules: Dict[str, Any]) -> Tuple[Dict[str, List[Entry]], Dict[str, List[Tuple[str, Entry]]]]:
    """(entries by module, re-exports by module: (name, the entry documented elsewhere))."""
    entries: Dict[str, List[Entry]] = {m: [] for m in MODULES}
    where: Dict[int, Entry] = {}
    for m in MODULES:
        names = getattr(modules[m], "__all__", None)
        if names is None:
            raise SystemExit(f"{m} has no __all__: say what it exports")
        for name in names:
            obj = getattr(modules[m], name)
            h = home(obj, m)
            if h == m and id(obj) not in where:
                e = Entry(m, name, obj, kind_of(obj))
                entries[m].append(e)
                where[id(obj)] = e
    reexports: Dict[str, List[Tuple[str, Entry]]] = {m: [] for m in MODULES}
    for m in MODULES:
        for name in modules[m].__all__:
            e = where.get(id(getattr(modules[m], name)))
            if e is None:
                raise SystemExit(f"{m}.{name} is documented nowhere: its module {home(getattr(modules[m], name), m)} "
                                 "must be in MODULES and export it in __all__")
            if e.module != m:
                reexports[m].append((name, e))
    order = {"function": 0, "class": 1, "alias": 2}
    for m in MODULES:
        entries[m].sort(key=lambda e: (order[e.kind], e.name.lower(), e.name))
        reexports[m].sort(key=lambda r: (r[0].lower(), r[0]))
    return entries, reexports


def is_ours(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "tensorseal"


def members(cls: type) -> Tuple[List[Tuple[str, Any]], Dict[str, List[str]]]:
    """The public methods and properties tensorseal's classes in ``cls``'s MRO define,
    sorted; and, apart, those that implement a base class of another package (by base)."""
    own: List[Tuple[str, Any]] = []
    implements: Dict[str, List[str]] = {}
    foreign = [b for b in cls.__mro__ if not is_ours(b) and b is not object]
    seen = set()
    for klass in cls.__mro__:
        if not is_ours(klass):
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            if not isinstance(raw, (staticmethod, classmethod, property)) and not inspect.isfunction(raw):
                continue
            seen.add(name)
            base = next((b for b in foreign if name in vars(b)), None)
            if base is not None:
                implements.setdefault(f"{base.__module__}.{base.__qualname__}", []).append(name)
            else:
                own.append((name, raw))
    own.sort()
    for names in implements.values():
        names.sort()
    return own, dict(sorted(implements.items()))


# ---- signatures -------------------------------------------------------------------

class _Text:
    """An annotation shown as given (inspect shows other objects by their repr)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def annotation_text(a: Any) -> str:
    if isinstance(a, str):  # from __future__ import annotations: as written, without forward-ref quotes
        return re.sub(r"""(['"])([\w.\[\], ]+)\1""", r"\2", a)
    if isinstance(a, typing.ForwardRef):
        return a.__forward_arg__
    if a is type(None):
        return "None"
    if inspect.isclass(a) and not typing.get_args(a):
        if a.__module__ in ("builtins", "typing") or is_ours(a):
            return a.__qualname__
        return f"{a.__module__}.{a.__qualname__}"
    origin, args = typing.get_origin(a), typing.get_args(a)
    if origin is typing.Union:
        return f"Union[{', '.join(annotation_text(x) for x in args)}]"
    return repr(a).replace("typing.", "")


def clean_default(value: Any, where: str) -> str:
    text = repr(value)
    if re.search(r" at 0x[0-9a-f]+", text):
        raise SystemExit(f"{where}: the default {text} shows an address; give it a stable repr")
    return text


def parameters(obj: Any, drop_self: bool) -> List[inspect.Parameter]:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    params = list(sig.parameters.values())
    if drop_self and params and params[0].name in ("self", "cls"):
        params = params[1:]
    return params


def signature(name: str, obj: Any, where: str, drop_self: bool = False) -> str:
    sig = inspect.signature(obj)
    params = parameters(obj, drop_self)
    parts: List[str] = []
    pos_only = False
    kw_marker = True
    for p in params:
        q = p.replace(annotation=_Text(annotation_text(p.annotation)) if p.annotation is not p.empty else p.empty)
        if p.kind is p.POSITIONAL_ONLY:
            pos_only = True
        elif pos_only:
            parts.append("/")
            pos_only = False
        if p.kind is p.VAR_POSITIONAL:
            kw_marker = False
        elif p.kind is p.KEYWORD_ONLY and kw_marker:
            parts.append("*")
            kw_marker = False
        if q.default is not q.empty:
            text = str(q.replace(default=p.empty))
            text += (" = " if q.annotation is not q.empty else "=") + clean_default(p.default, where)
        else:
            text = str(q)
        parts.append(text)
    if pos_only:
        parts.append("/")
    ret = ""
    if sig.return_annotation is not sig.empty and not inspect.isclass(obj):
        ret = f" -> {annotation_text(sig.return_annotation)}"
    one_line = f"{name}({', '.join(parts)}){ret}"
    if len(one_line) <= WIDTH:
        return one_line
    return f"{name}(\n" + "".join(f"    {p},\n" for p in parts) + f"){ret}"


# ---- docstrings -------------------------------------------------------------------

@dataclasses.dataclass
class Doc:
    prose: str = ""
    sections: Dict[str, str] = dataclasses.field(default_factory=dict)  # section -> raw body (dedented)


def own_doc(obj: Any) -> str:
    """The object's own docstring (not inherited, not the one dataclasses makes up)."""
    doc = obj.__doc__ if not isinstance(obj, property) else obj.fget.__doc__
    if inspect.isclass(obj):
        doc = vars(obj).get("__doc__")
        if dataclasses.is_dataclass(obj) and doc and doc.startswith(obj.__name__ + "("):
            doc = None
    return inspect.cleandoc(doc) if doc else ""


def parse(doc: str) -> Doc:
    out = Doc()
    prose: List[str] = []
    current: Optional[List[str]] = None
    for line in doc.splitlines():
        m = re.fullmatch(r"(\w+):\s*", line)
        if m and m.group(1) in SECTIONS:
            current = []
            out.sections[SECTIONS[m.group(1)]] = current  # type: ignore[assignment]
            continue
        if current is not None and (not line.strip() or line[:1].isspace()):
            current.append(line)
            continue
        current = None
        prose.append(line)
    out.prose = "\n".join(prose).strip("\n")
    for k, lines in list(out.sections.items()):
        out.sections[k] = inspect.cleandoc("\n".join(lines))  # type: ignore[arg-type]
    return out


def items(body: str) -> List[Tuple[str, str]]:
    """``name: text`` items of an Args/Raises/Attributes section (continuations indented)."""
    out: List[Tuple[str, str]] = []
    after_blank = True
    for line in body.splitlines():
        if not line.strip():
            after_blank = True
            continue
        m = re.fullmatch(r"([\w.*]+(?:\s*\([^)]*\))?):\s*(.*)", line)
        if m and not line[:1].isspace():
            out.append((re.sub(r"\s*\(.*", "", m.group(1)), m.group(2).strip()))
        elif out and not (after_blank and not line[:1].isspace()):
            out[-1] = (out[-1][0], (out[-1][1] + " " + line.strip()).strip())
        else:  # a sentence of its own ("Nothing.")
            out.append(("", line.strip()))
        after_blank = False
    return out


def inline(text: str) -> str:
    """reST inline markup as Markdown (a literal may span lines)."""
    text = re.sub(r":(?:py:)?(?:class|func|meth|attr|mod|exc|data|obj):`~?([^`]+)`", r"``\1``", text)
    text = text.replace("\\ ", "")
    return re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)


def code_block(lines: List[str]) -> List[str]:
    body = textwrap.dedent("\n".join(lines)).strip("\n").splitlines()
    if any(line.startswith(">>>") for line in body):  # a doctest: its output as comments
        body = [re.sub(r"^(>>>|\.\.\.)( |$)", "", line) if line.startswith((">>>", "...")) else
                ("# " + line if line.strip() else line) for line in body]
    return ["```python", *body, "```"]


def markdown(text: str) -> str:
    """Prose of a docstring as Markdown: doctests and indented (or ``::``) blocks as
    fenced Python, inline reST as Markdown."""
    lines = text.splitlines()
    chunks: List[str] = []
    prose: List[str] = []

    def flush() -> None:
        chunk = "\n".join(prose).strip("\n")
        if chunk:
            chunks.append(inline(chunk))
        prose.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        after_break = not prose or not prose[-1].strip() or prose[-1].endswith("::")
        doctest = line.lstrip().startswith(">>>")
        if not (doctest or (line.strip() and indent >= 4 and after_break)):
            prose.append(line)
            i += 1
            continue
        block = []
        while i < len(lines):
            cur = lines[i]
            if doctest and not cur.strip():
                break  # a doctest ends at a blank line
            if not doctest and cur.strip() and len(cur) - len(cur.lstrip()) < indent:
                break  # an indented block ends at a line indented less
            block.append(cur)
            i += 1
        last = next((j for j in range(len(prose) - 1, -1, -1) if prose[j].strip()), None)
        if last is not None and prose[last].endswith("::"):  # "text::" introduces the block
            prose[last] = prose[last][:-3] if prose[last].endswith(" ::") else prose[last][:-1]
        flush()
        chunks.append("\n".join(code_block(block)))
    flush()
    return "\n\n".join(chunks)


# ---- rendering ----------------------------------------------------------------------

class Page:
    """Markdown lines, with links resolved to GitHub's heading anchors at the end (two
    headings of one slug, `error` and `Error`, get GitHub's -1 suffix in page order)."""

    def __init__(self) -> None:
        self.lines: List[str] = []
        self.slugs: Dict[str, str] = {}   # key -> anchor
        self.seen: Dict[str, int] = {}    # slug -> headings with it so far

    def heading(self, level: int, title: str, key: str) -> None:
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        n = self.seen.get(slug, 0)
        self.seen[slug] = n + 1
        self.slugs[key] = slug if n == 0 else f"{slug}-{n}"
        self.lines += ["#" * level + " " + title, ""]

    @staticmethod
    def link(text: str, key: str) -> str:
        return f"[{text}](#\0{key}\0)"

    def text(self) -> str:
        text = "\n".join(self.lines)
        text = re.sub("\0([^\0]+)\0", lambda m: self.slugs[m.group(1)], text)
        return re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"


def render_parameters(params: List[inspect.Parameter], doc: Doc, where: str) -> List[str]:
    described = dict(items(doc.sections.get("Parameters", "")))
    out = []
    for p in params:
        star = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        facts = []
        if p.annotation is not p.empty:
            facts.append(f"`{annotation_text(p.annotation)}`")
        if p.default is not p.empty:
            facts.append(f"default `{clean_default(p.default, where)}`")
        head = f"- `{star}{p.name}`" + (f" ({', '.join(facts)})" if facts else "")
        text = described.pop(p.name, described.pop(star + p.name, ""))
        out.append(head + (f": {inline(text)}" if text else ""))
    for name in described:  # documented but not in the signature: a mistake in the docstring
        raise SystemExit(f"{where}: Args names '{name}', which is not a parameter")
    return (["**Parameters**", "", *out, ""]) if out else []


def render_sections(doc: Doc) -> List[str]:
    out: List[str] = []
    if "Returns" in doc.sections:
        out += [f"**Returns**: {markdown(doc.sections['Returns'])}", ""]
    for title in ("Attributes", "Raises"):
        if title in doc.sections:
            out += [f"**{title}**", ""]
            out += [f"- `{n}`: {inline(t)}" if n else f"- {inline(t)}" for n, t in items(doc.sections[title])]
            out.append("")
    if "Example" in doc.sections:
        out += ["**Example**", "", *code_block(doc.sections["Example"].splitlines()), ""]
    return out


def unwrap(obj: Any) -> Tuple[Any, bool]:
    """(the function, whether its first parameter is bound) of a class attribute."""
    if isinstance(obj, staticmethod):
        return obj.__func__, False
    if isinstance(obj, classmethod):
        return obj.__func__, True
    return obj, True


def render_callable(page: Page, level: int, title: str, key: str, shown_name: str, obj: Any,
                    drop_self: bool = False) -> None:
    doc = parse(own_doc(obj))
    page.heading(level, f"`{title}`", key)
    page.lines += ["```python", signature(shown_name, obj, key, drop_self), "```", ""]
    if doc.prose:
        page.lines += [markdown(doc.prose), ""]
    page.lines += render_parameters(parameters(obj, drop_self), doc, key)
    page.lines += render_sections(doc)


def has_constructor(cls: type) -> bool:
    """Whether the class documents a constructor of its own (exception subclasses take
    their base's, shown there)."""
    return "__init__" in vars(cls) or dataclasses.is_dataclass(cls)


def public_bases(cls: type) -> List[str]:
    """The direct bases to show: a private base of tensorseal's by its own bases; none of
    a package that is optional (safetensors: SafetensorError has its base only where
    it is installed, as its docstring says), so the page is the same everywhere."""
    out: List[str] = []
    for b in cls.__bases__:
        if b is object or b.__module__.split(".")[0] in OPTIONAL_PACKAGES:
            continue
        if is_ours(b) and b.__name__.startswith("_"):
            out += [x for x in public_bases(b) if x not in out]
        elif b.__module__ == "builtins" or is_ours(b):
            out.append(b.__qualname__)
        else:
            mod = b.__module__
            public = sys.modules.get(mod.lstrip("_"))  # _pickle.UnpicklingError is pickle's
            if mod.startswith("_") and getattr(public, b.__name__, None) is b:
                mod = mod.lstrip("_")
            out.append(f"{mod}.{b.__qualname__}")
    return out


def render_class(page: Page, e: Entry) -> None:
    cls = e.obj
    doc = parse(own_doc(cls))
    page.heading(3, f"`{e.qualname}`", e.qualname)
    if has_constructor(cls):
        page.lines += ["```python", signature(e.qualname, cls, e.qualname), "```", ""]
    bases = public_bases(cls)
    if bases:
        page.lines += ["Bases: " + ", ".join(f"`{b}`" for b in bases), ""]
    if doc.prose:
        page.lines += [markdown(doc.prose), ""]
    if has_constructor(cls):
        page.lines += render_parameters(parameters(cls, False), doc, e.qualname)
    page.lines += render_sections(doc)
    own, implements = members(cls)
    for base, names in implements.items():
        page.lines += [f"Implements `{base}` (documented there): " + ", ".join(f"`{n}`" for n in names) + ".", ""]
    for name, raw in own:
        key = f"{e.qualname}.{name}"
        if isinstance(raw, property):
            pdoc = own_doc(raw)
            page.heading(4, f"`{e.name}.{name}`", key)
            page.lines += ["Property." + (" " + markdown(pdoc) if pdoc else ""), ""]
            continue
        fn, bound = unwrap(raw)
        render_callable(page, 4, f"{e.name}.{name}", key, name, fn, drop_self=bound)


def annotations_of(obj: Any) -> List[Tuple[str, Dict[str, Any]]]:
    """(annotation text, the namespace its names resolve in) of a callable's parameters
    and result."""
    fn = obj.__init__ if inspect.isclass(obj) else obj
    space = getattr(fn, "__globals__", None) or vars(sys.modules[obj.__module__])
    out = []
    for p in parameters(obj, False):
        if p.annotation is not p.empty:
            out.append((annotation_text(p.annotation), space))
    ret = inspect.signature(obj).return_annotation if not inspect.isclass(obj) else inspect.Signature.empty
    if ret is not inspect.Signature.empty:
        out.append((annotation_text(ret), space))
    return out


def aliases_in_signatures(entries: Dict[str, List[Entry]]) -> Dict[str, str]:
    """Every type alias a documented signature names (``LimitsArg``...): name -> definition."""
    found: Dict[str, str] = {}
    callables: List[Any] = []
    for m in MODULES:
        for e in entries[m]:
            if e.kind == "function" or (e.kind == "class" and has_constructor(e.obj)):
                callables.append(e.obj)
            if e.kind == "class":
                callables += [unwrap(raw)[0] for _, raw in members(e.obj)[0] if not isinstance(raw, property)]
    for c in callables:
        for text, space in annotations_of(c):
            for name in re.findall(r"[A-Za-z_]\w*", text):
                value = space.get(name)
                if value is not None and is_alias(value):
                    definition = annotation_text(value)
                    if found.setdefault(name, definition) != definition:
                        raise SystemExit(f"two type aliases named {name}: {found[name]} and {definition}")
    return dict(sorted(found.items()))


def render(modules: Dict[str, Any]) -> str:
    entries, reexports = collect(modules)
    page = Page()
    page.heading(1, "Python API", "")
    page.lines += [
        "<!-- Generated from the docstrings by scripts/python_docs.py; do not edit. -->",
        "Every public function and class of the `tensorseal` package and its submodules, generated from their "
        f"docstrings by `scripts/python_docs.py`: edit the docstrings, then run `{REGENERATE}` "
        "(`tests/py/test_python_docs.py` fails while this page is stale). The tour is in the README.", ""]
    for m in MODULES:
        names = [(e.name, e) for e in entries[m]] + reexports[m]
        names.sort(key=lambda r: (r[0].lower(), r[0]))
        page.lines.append(f"- {page.link(f'`{m}`', m)}: " + ", ".join(page.link(f"`{n}`", e.qualname)
                                                                     for n, e in names))
    page.lines.append(f"- {page.link('Types in signatures', 'types')}")
    page.lines.append("")
    for m in MODULES:
        page.heading(2, f"`{m}`", m)
        doc = own_doc(modules[m])
        if doc:
            page.lines += [markdown(doc), ""]
        if reexports[m]:
            page.lines += ["Also here: " + ", ".join(f"`{m}.{n}` ({page.link(f'`{e.qualname}`', e.qualname)})"
                                                     for n, e in reexports[m]) + ".", ""]
        for e in entries[m]:
            if e.kind == "function":
                render_callable(page, 3, e.qualname, e.qualname, e.qualname, e.obj)
            elif e.kind == "class":
                render_class(page, e)
            else:
                page.heading(3, f"`{e.qualname}`", e.qualname)
                page.lines += ["```python", f"{e.name} = {annotation_text(e.obj)}", "```", ""]
    page.heading(2, "Types in signatures", "types")
    page.lines += ["The type aliases the signatures above name:", "", "```python"]
    page.lines += [f"{name} = {definition}" for name, definition in aliases_in_signatures(entries).items()]
    page.lines += ["```", ""]
    text = page.text()
    if str(ROOT) in text or re.search(r"\b0x[0-9a-f]{6,}\b", text):
        raise SystemExit("the page would hold a path of this machine or an address")
    return text


# ---- gaps -----------------------------------------------------------------------------

def gaps(modules: Dict[str, Any]) -> List[Tuple[str, str]]:
    """(qualified name, what its docstring lacks) for every documented callable: a
    function wants a docstring, every parameter in Args, Raises and an Example; a class
    its constructor's parameters and an Example (an exception class a docstring only);
    a method or property a docstring and its parameters."""
    entries, _ = collect(modules)
    out: List[Tuple[str, str]] = []

    def check(name: str, obj: Any, drop_self: bool, wants: Tuple[str, ...]) -> None:
        text = own_doc(obj)
        if not text:
            out.append((name, "no docstring"))
            return
        doc = parse(text)
        documented = {n.lstrip("*") for n, _ in items(doc.sections.get("Parameters", ""))}
        params = parameters(obj, drop_self) if not inspect.isclass(obj) or has_constructor(obj) else []
        missing = [p.name for p in params if p.name not in documented]
        if missing:
            out.append((name, "Args lacks " + ", ".join(missing)))
        out.extend((name, f"no {w}") for w in wants if w not in doc.sections)

    for m in MODULES:
        for e in entries[m]:
            if e.kind == "function":
                check(e.qualname, e.obj, False, ("Raises", "Example"))
            elif e.kind == "class":
                check(e.qualname, e.obj, False, () if issubclass(e.obj, BaseException) else ("Example",))
                for name, raw in members(e.obj)[0]:
                    if isinstance(raw, property):
                        if not own_doc(raw):
                            out.append((f"{e.qualname}.{name}", "no docstring"))
                        continue
                    fn, bound = unwrap(raw)
                    check(f"{e.qualname}.{name}", fn, bound, ())
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Write docs/python.md from the docstrings.")
    ap.add_argument("--check", action="store_true", help="exit 1 with a diff when docs/python.md is stale")
    ap.add_argument("--gaps", action="store_true", help="list docstrings lacking Args, Raises or an Example")
    args = ap.parse_args(argv)
    modules = import_modules()
    if args.gaps:
        for name, what in gaps(modules):
            print(f"{name}: {what}")
        return 0
    text = render(modules)
    if args.check:
        old = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if old == text:
            return 0
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                   "docs/python.md", "docs/python.md (from the docstrings)"))
        print(f"\ndocs/python.md is stale: regenerate it with `{REGENERATE}`")
        return 1
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
