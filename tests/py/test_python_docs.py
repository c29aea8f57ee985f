"""docs/python.md is what scripts/python_docs.py makes of the docstrings, so the Python
API page cannot drift from the code; every public callable has a docstring, and those
of the modules whose docstrings are complete (Args for every parameter, Raises, an
Example) stay complete."""
from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "python_docs.py"
REGENERATE = ".venv/bin/python scripts/python_docs.py"
# Modules whose docstrings follow the sections in full; the others (tensorseal's own
# functions in _api.py and _pickle.py, tensorseal.dcp) have prose docstrings still.
COMPLETE = ("tensorseal.torch", "tensorseal.safetensors", "tensorseal.errors", "tensorseal.limits",
            "tensorseal.objects")


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("python_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["python_docs"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def modules(gen):
    return gen.import_modules()


def test_docs_python_md_is_what_the_docstrings_give():
    r = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0, (
        f"docs/python.md differs from what the docstrings give; regenerate it with `{REGENERATE}` "
        f"(from the repository root) and commit it.\n{r.stdout[-6000:]}{r.stderr[-2000:]}")


def test_generation_is_deterministic_and_machine_independent(gen, modules):
    text = gen.render(modules)
    assert text == gen.render(modules)
    assert str(ROOT) not in text and os.path.expanduser("~") + "/" not in text
    assert " at 0x" not in text
    assert text == (ROOT / "docs" / "python.md").read_text(encoding="utf-8")


def test_every_public_callable_has_a_docstring(gen, modules):
    missing = [name for name, what in gen.gaps(modules) if what == "no docstring"]
    # Properties and methods of tensorseal.dcp's plugins lack some (dcp.py is not
    # complete yet); everything else has one.
    missing = [name for name in missing if not name.startswith("tensorseal.dcp.")]
    assert missing == []


def test_complete_modules_document_every_parameter_exception_and_an_example(gen, modules):
    gaps = [f"{name}: {what}" for name, what in gen.gaps(modules) if name.startswith(tuple(m + "." for m in COMPLETE))]
    assert gaps == [], "\n".join(gaps)


def test_the_page_covers_every_exported_name_and_submodule(gen, modules):
    import tensorseal
    assert set(tensorseal._SUBMODULES) <= {m.split(".", 1)[1] for m in gen.MODULES if "." in m}
    text = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    for m in gen.MODULES:
        assert f"## `{m}`" in text
        for name in modules[m].__all__:
            assert f"`{m}.{name}`" in text, f"{m}.{name}"
    assert "#### `safe_open.get_tensor`" in text  # methods too
    assert "`tensorseal.Error` ([`tensorseal.errors.Error`](#tensorsealerrorserror-1))" in text  # re-exports linked


def test_docstring_sections_render(gen):
    doc = gen.parse(inspect.cleandoc('''Does a thing.

    More prose with ``code`` and :class:`tensorseal.Error`::

        x = 1

    Args:
        a: the first
            line continues.
        b (int): the second.

    Raises:
        ValueError: when bad.

    Example:
        >>> f(1)
        2
    '''))
    assert doc.prose.startswith("Does a thing.")
    assert gen.items(doc.sections["Parameters"]) == [("a", "the first line continues."), ("b", "the second.")]
    assert gen.items(doc.sections["Raises"]) == [("ValueError", "when bad.")]
    md = gen.markdown(doc.prose)
    assert "`code` and `tensorseal.Error`:\n\n```python\nx = 1\n```" in md
    assert gen.code_block(doc.sections["Example"].splitlines()) == ["```python", "f(1)", "# 2", "```"]
