"""`tseal diff --report`: the HTML report is self-contained and renders in headless
Chromium with its summary, plots and sortable table.

The binary comes from $TSEAL_BIN, else <repo>/build/tseal (see conftest.py).
"""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import torch
from safetensors.torch import save_file

from conftest import run_tseal

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/setup.sh installs it)")


def chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A float32 model against its bfloat16 round trip, with one tensor renamed and one
    added: every part of the report has something to show."""
    d = tmp_path_factory.mktemp("report")
    torch.manual_seed(0)
    a = {f"layer{i}.weight": torch.randn(64, 32) for i in range(8)}
    a.update({f"layer{i}.bias": torch.randn(64) for i in range(8)})
    a["steps"] = torch.arange(5)
    b = {k: (v.to(torch.bfloat16).to(torch.float32) if v.is_floating_point() else v.clone()) for k, v in a.items()}
    b["layer3.bias"] = a["layer3.bias"].clone()  # identical
    b["head.extra"] = torch.ones(3)
    save_file(a, d / "a.safetensors")
    save_file(b, d / "b.safetensors")
    out = d / "diff.html"
    r = run_tseal("diff", d / "a.safetensors", d / "b.safetensors", "--report", out)
    assert r.returncode == 1, r.stderr
    return {"dir": d, "html": out, "text": out.read_text(encoding="utf-8"), "stdout": r.stdout}


def test_report_is_self_contained(report):
    html = report["text"]
    assert html.startswith("<!DOCTYPE html>")
    # Nothing is fetched: no external scripts, styles, images or fonts.
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html, re.I)
    assert "<link" not in html.lower()
    assert not re.search(r"<script[^>]+src", html, re.I)
    assert "@import" not in html and "url(" not in html
    # Written atomically: no temp file is left beside it.
    assert sorted(p.name for p in report["dir"].iterdir()) == ["a.safetensors", "b.safetensors", "diff.html"]


@needs_chromium
def test_report_renders_in_chromium(report):
    r = chromium("--dump-dom", report["html"].as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    summary = re.search(r'<div id="summary" class="differ"><b>([^<]*)</b>', dom)
    assert summary, dom[:2000]
    # The verdict is DiffReport::verdict(), the line `tseal diff` prints.
    assert summary.group(1) == "16 of 18 tensors differ (1 only in B)"
    # The error plot: one bar per tensor with an error (15 rounded float tensors), a dot
    # for each of the others (steps, layer3.bias).
    plot = re.search(r'<svg id="error-plot".*?</svg>', dom, re.S).group(0)
    assert len(re.findall(r'<rect class="bar"', plot)) == 15
    assert len(re.findall(r'<circle class="dot"', plot)) == 2
    # ULP histograms of the worst tensors (at most six).
    hists = re.search(r'<div id="ulp-histograms".*?</div>', dom, re.S).group(0)
    assert len(re.findall(r'<svg class="ulp-hist"', hists)) == 6
    # The per-tensor table: one row per tensor compared in both files.
    table = re.search(r'<table id="tensor-table">.*?</table>', dom, re.S).group(0)
    rows = re.findall(r'<tr class="row ([a-z-]+)">', table)
    assert len(rows) == 17
    assert rows.count("different") == 15 and rows.count("identical") == 2
    one_sided = re.search(r'<table id="one-sided">.*?</table>', dom, re.S).group(0)
    assert "head.extra" in one_sided


@needs_chromium
def test_table_sorts_on_click(report, tmp_path):
    # Click "max abs" twice (descending) after the page's own script has run.
    html = report["text"].replace(
        "</body>",
        "<script>var th=document.querySelectorAll('#tensor-table th')[6];th.click();th.click();</script></body>")
    page = tmp_path / "sorted.html"
    page.write_text(html, encoding="utf-8")
    r = chromium("--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    table = re.search(r'<table id="tensor-table">.*?</table>', r.stdout, re.S).group(0)
    values = [float(v) for v in re.findall(r'<td class="num" data-v="([^"]+)">[^<]*</td><td class="num" data-v="[^"]+">'
                                           r'[^<]*</td><td class="num" data-v="[^"]+">[^<]*</td><td data-v', table)]
    assert len(values) == 17
    assert values == sorted(values, reverse=True)
    assert values[0] > 0 and values[-1] == 0


@needs_chromium
def test_report_screenshot(report, tmp_path):
    png = tmp_path / "report.png"
    r = chromium("--hide-scrollbars", "--window-size=1200,1600", f"--screenshot={png}", report["html"].as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # a blank page is a few kB


def test_report_write_failure_leaves_nothing(report, tmp_path):
    d = report["dir"]
    r = run_tseal("diff", d / "a.safetensors", d / "b.safetensors", "--report", tmp_path / "no" / "such" / "r.html")
    assert r.returncode == 2
    assert "io/" in r.stderr
    assert not (tmp_path / "no").exists()
