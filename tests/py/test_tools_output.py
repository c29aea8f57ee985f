"""Tools own their outputs: inspect and scan give the same JSON from the CLI and from
Python; the CLI's conventions (error lines, --threads, limit flags); Python's limits=
keyword; errors raised by Python code read like the core's."""
from __future__ import annotations

import json

import pytest
import torch

import tensorseal
from conftest import run_tseal
from tensorseal import _tensorseal as _core

EVIL = b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00id\x85R."
READING_COMMANDS = ("inspect", "hash", "scan", "canon", "convert", "diff", "explain", "verify")


@pytest.fixture()
def files(tmp_path):
    pt = tmp_path / "m.pt"
    torch.save({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(2)}, pt)
    st = tmp_path / "m.safetensors"
    tensorseal.save({"x": torch.zeros(3), "y": torch.ones(2, 2, dtype=torch.bfloat16)}, st,
                    metadata={"format": "pt"})
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(EVIL)
    return pt, st, evil


def cli_json(*args):
    r = run_tseal(*args, "--json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def test_inspect_json_is_one_vocabulary(files):
    pt, st, _ = files
    for p in (pt, st):
        got = tensorseal.inspect(p)
        assert got == cli_json("inspect", p)
        assert list(got) == ["file", "format", "content_hash", "tensors", "metadata"]
        assert got["file"] == str(p) and got["content_hash"] == tensorseal.hash(p)
        for t in got["tensors"]:
            assert list(t) == ["path", "dtype", "shape", "nbytes", "sha256", "alias_of", "type", "quantization",
                               "attributes", "layout", "parts"]
    assert tensorseal.inspect(pt)["metadata"] == {}
    assert tensorseal.inspect(st)["metadata"] == {"format": "pt"}
    t = {t["path"]: t for t in tensorseal.inspect(st)["tensors"]}
    assert t["y"] == {"path": "y", "dtype": "bfloat16", "shape": [2, 2], "nbytes": 8, "sha256": t["y"]["sha256"], "alias_of": None,
                      "type": "torch.Tensor", "quantization": None, "attributes": None, "layout": "strided",
                      "parts": None}


def test_scan_json_is_one_vocabulary(files):
    pt, _, evil = files
    for p in (pt, evil):
        got = tensorseal.scan(p)
        assert got == cli_json("scan", p)
        assert list(got) == ["file", "format", "verdict", "findings", "interpretations", "incomplete"]
        for f in got["findings"]:
            assert list(f) == ["module", "name", "verdict", "count", "where", "reason"]
    assert tensorseal.scan(evil)["findings"][0]["verdict"] == "dangerous"


def test_every_reading_command_takes_the_limit_flags_and_threads():
    for cmd in READING_COMMANDS:
        out = run_tseal(cmd, "--help").stdout
        for name in tensorseal.Limits.defaults():
            assert "--" + name.replace("_", "-") in out, (cmd, name)
        assert "--threads" in out or cmd == "explain", cmd


def test_lowered_limit_fails_with_its_rule_and_raised_one_reads(files):
    pt, st, _ = files
    r = run_tseal("inspect", pt, "--max-alloc", "1")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"tseal: error: {pt}") and "[pickle/max-alloc]" in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert run_tseal("inspect", pt, "--max-alloc", str(1 << 40)).returncode == 0
    r = run_tseal("scan", st, "--max-entries", "1")
    assert r.returncode == 2 and "[safetensors/too-many-tensors]" in r.stderr, r.stderr
    assert run_tseal("scan", st, "--max-entries", "3").returncode == 0  # 2 tensors + __metadata__
    for args in (("hash", st), ("diff", st, st), ("explain", st, st), ("convert", st, st.with_suffix(".npz"))):
        r = run_tseal(*args, "--max-entries", "1")
        assert r.returncode == 2 and "[safetensors/too-many-tensors]" in r.stderr, (args, r.stderr)
    r = run_tseal("verify", st, "--max-entries", "1", "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["files"][0]["rule"] == "safetensors/too-many-tensors"


def test_limit_flag_out_of_range_is_a_parse_error():
    r = run_tseal("inspect", "x.pt", "--max-ndim", str(1 << 32))
    assert r.returncode == 2 and r.stderr.startswith("tseal: error: "), r.stderr


def test_parse_errors_are_error_lines():
    r = run_tseal("inspect")
    assert r.returncode == 2 and r.stderr.startswith("tseal: error: "), r.stderr
    r = run_tseal("hash", "--no-such-flag", "x")
    assert r.returncode == 2 and r.stderr.startswith("tseal: error: "), r.stderr


def test_hash_and_verify_report_unreadable_files_alike(files, tmp_path):
    pt, st, _ = files
    txt = tmp_path / "notes.txt"
    txt.write_text("plain text\n")
    for cmd in ("hash", "verify"):
        r = run_tseal(cmd, pt, txt, st)
        assert r.returncode == 2, (cmd, r.stderr)
        assert r.stderr.splitlines() == [r.stderr.splitlines()[0]], r.stderr
        assert r.stderr.startswith(f"tseal: error: {txt}: ") and "[detect/unknown-format]" in r.stderr, r.stderr
        assert len(r.stdout.splitlines()) == 2 and str(txt) not in r.stdout, (cmd, r.stdout)


def test_python_limits_keyword(files):
    pt, st, _ = files
    assert [n for n, _ in _core.limit_defaults()] == [f for f in tensorseal.Limits.__dataclass_fields__]
    assert tensorseal.Limits.defaults()["max_alloc"] == 1 << 33
    low = {"max_entries": 1}
    for call in (lambda: tensorseal.read(st, limits=low), lambda: tensorseal.load(st, limits=low),
                 lambda: tensorseal.load_bytes(st.read_bytes(), limits=low),
                 lambda: tensorseal.inspect(st, limits=tensorseal.Limits(max_entries=1)),
                 lambda: tensorseal.hash(st, limits=low), lambda: tensorseal.scan(st, limits=low),
                 lambda: tensorseal.diff(st, st, limits=low), lambda: tensorseal.explain(st, st, limits=low)):
        with pytest.raises(tensorseal.LimitError) as e:
            call()
        assert e.value.rule == "safetensors/too-many-tensors" and "[safetensors/too-many-tensors]" in str(e.value)
    res = tensorseal.verify(st, limits=low)
    assert res["files"][0]["status"] == "error" and res["files"][0]["rule"] == "safetensors/too-many-tensors"
    with pytest.raises(tensorseal.LimitError) as e:
        tensorseal.load(pt, limits=tensorseal.Limits(max_alloc=1))
    assert e.value.rule == "pickle/max-alloc"
    assert set(tensorseal.load(st, limits={"max_entries": 3, "max_alloc": None})) == {"x", "y"}
    assert tensorseal.inspect(pt, limits=tensorseal.Limits(max_alloc=1 << 40)) == tensorseal.inspect(pt)


def test_python_limits_are_checked(files):
    _, st, _ = files
    for bad in ({"max_bogus": 1}, {"max_ndim": 1 << 32}, {"max_alloc": -1}, {"max_alloc": 1.5}, [("max_alloc", 1)]):
        with pytest.raises(tensorseal.InvalidArgumentError) as e:
            tensorseal.load(st, limits=bad)
        assert "[api/invalid-argument]" in str(e.value), bad


def test_python_errors_render_like_the_cli(files, tmp_path):
    pt, _, evil = files
    with pytest.raises(tensorseal.InvalidArgumentError) as e:
        tensorseal.load(pt, framework="jax")
    assert str(e.value) == "[api/invalid-argument] unknown framework 'jax' (use 'torch' or 'numpy')"
    assert e.value.rule == "api/invalid-argument" and e.value.file == "" and e.value.offset is None
    out = tmp_path / "model.unknownext"
    with pytest.raises(tensorseal.InvalidArgumentError) as e:
        tensorseal.save({"w": torch.ones(1)}, out)
    assert str(e.value) == f"{out}: [api/invalid-argument] cannot tell the format from the extension; pass format="
    assert e.value.file == str(out)
    import tensorseal.torch as tst
    with pytest.raises(tensorseal.UnsafePickleError) as e:
        tst.load(evil)
    assert e.value.rule == "scan/dangerous-global" and e.value.file == str(evil)
    assert str(e.value) == (f"{evil}: [scan/dangerous-global] weights_only load refused 1 global(s) outside the "
                            f"safe set: posix.system (dangerous); first at {e.value.detail.rsplit('first at ', 1)[1]}")
    with pytest.raises(tensorseal.InternalError):
        raise tensorseal.errors.error("api/made-up", "x")
