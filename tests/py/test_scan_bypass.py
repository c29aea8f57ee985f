"""`tseal scan` against the bypass classes of issue 32 (docs/security.md, "What scan
follows"): qualified names as find_class resolves them, nested payloads reached other
ways than REDUCE(torch.storage._load_from_bytes), payloads that run before the stream
breaks, stacked pickles, and the latent exploits of torch < 2.10's weights_only
unpickler (CVE-2026-24747).

The files come from tests/py/producers/scan_bypass.py, each hostile one with a
marker-only payload. The ground truth is proved first, in a subprocess: the standard
loader named by the case ran the payload (its marker file exists; for the latent class,
today's weights_only loader refuses the file). Then scan must flag every hostile file
(exit 1, verdict dangerous, naming the global) and call every benign twin, made by the
real producer, safe (exit 0). The counts per class are printed."""
from __future__ import annotations

import collections
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from conftest import tseal_bin  # noqa: E402

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE / "producers"))
import scan_bypass  # noqa: E402


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    d = tmp_path_factory.mktemp("bypass")
    cases = scan_bypass.build(d / "files")
    spec = d / "cases.json"
    spec.write_text(json.dumps(cases))
    truth = d / "truth.json"
    subprocess.run([sys.executable, str(HERE / "producers" / "scan_bypass.py"), str(spec), str(truth)], cwd=d,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300,
                   check=True)
    ran = json.loads(truth.read_text())
    for name, case in cases.items():
        case.update(ran[name])
    return cases


def scan(path):
    out = subprocess.run([tseal_bin(), "scan", "--json", path], capture_output=True, text=True)
    report = json.loads(out.stdout) if out.returncode in (0, 1) and out.stdout else None
    return out.returncode, report, out.stderr


def named(report, want: str) -> bool:
    names = [f'{f["module"]}.{f["name"]}' for f in report["findings"] if f["verdict"] != "safe"]
    if want.endswith("<") or "<" in want:
        return any(n.startswith(want) for n in names)
    return want in names


def test_ground_truth(cases):
    """Every hostile case's payload ran under its loader; no benign twin made a marker."""
    not_run = [f'{n} ({c["loader"]}: {c["error"]})' for n, c in cases.items() if not c["benign"] and not c["ran"]]
    assert not not_run, "the loader did not run these payloads:\n" + "\n".join(not_run)
    assert all(not c["ran"] for c in cases.values() if c["benign"])
    benign_errors = [f'{n}: {c["error"]}' for n, c in cases.items() if c["benign"] and c["error"]]
    assert not benign_errors, benign_errors


def test_scan_flags_every_class(cases):
    counts = collections.defaultdict(collections.Counter)
    failures = []
    for name, c in sorted(cases.items()):
        rc, report, err = scan(c["file"])
        row = counts[c["cls"]]
        if c["benign"]:
            row["benign"] += 1
            if rc != 0:
                row["false positive"] += 1
                failures.append(f"{name}: benign twin scans exit {rc}: {err.strip() or report['findings']}")
            continue
        row["hostile"] += 1
        if rc == 1 and report["verdict"] == "dangerous" and all(named(report, w) for w in c["names"]):
            row["error, globals named" if report["incomplete"] else "flagged"] += 1
            continue
        row["missed"] += 1
        failures.append(f"{name}: exit {rc}, verdict {report and report['verdict']}, want {c['names']}; "
                        f"findings {report and [(f['module'], f['name'], f['verdict']) for f in report['findings']]}"
                        f" {err.strip()}")
    print("\nscan bypass classes (hostile: flagged / error with globals named / missed; benign: false positives):")
    for cls, row in sorted(counts.items()):
        print(f"  {cls:10s} hostile {row['hostile']:2d}: flagged {row['flagged']:2d}, "
              f"error+globals {row['error, globals named']:2d}, missed {row['missed']:2d}; "
              f"benign {row['benign']:2d}: false positives {row['false positive']}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)


def test_latent_findings_name_the_cve(cases):
    for name, c in cases.items():
        if c["cls"] == "latent" and not c["benign"]:
            rc, report, _ = scan(c["file"])
            reasons = [f["reason"] for f in report["findings"] if f["module"] == "<latent>"]
            assert rc == 1 and reasons and all("CVE-2026-24747" in r for r in reasons), (name, report)


def test_human_output_lists_the_globals_of_a_broken_stream(cases):
    """A payload that ran before the stream broke: exit 1 with the globals listed, not
    a bare exit-2 error."""
    c = cases["broken/truncated_frame"]
    out = subprocess.run([tseal_bin(), "scan", c["file"]], capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    assert ": dangerous (" in out.stdout.splitlines()[0] and "posix.system" in out.stdout
