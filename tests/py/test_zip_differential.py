"""Differential fuzzing of zip directories (issue: security).

hypothesis rewrites a real torch.save archive the way attackers do — a second data.pkl
under a name differing only in case or under the very same name, before or after the
real one; a whole second archive appended (a second end-of-central-directory); a zip
comment holding an EOCD signature; stray bytes after the archive; an extra member that
is a pickle — with a harmless payload in the other pickle (it runs `touch MARKER`
through posix.system). Each file then goes through torch.load(weights_only=False) in
this process and through tensorseal:
  - tensorseal.load either refuses the file or gives exactly what torch.load gives;
  - when torch.load ran the payload, `tseal scan` does not exit 0;
  - when zipfile (what numpy.load uses for any zip) selects a different data.pkl than
    tensorseal would, tensorseal refuses."""
from __future__ import annotations

import io
import os
import pickle
import tempfile
import warnings
import zipfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorseal
from conftest import run_tseal

warnings.filterwarnings("ignore")


def base_archive() -> list:
    """(name, bytes) of a real torch.save archive, in its order."""
    b = io.BytesIO()
    torch.save({"w": torch.arange(4, dtype=torch.float32)}, b)
    with zipfile.ZipFile(io.BytesIO(b.getvalue())) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def other_archive() -> bytes:
    b = io.BytesIO()
    torch.save({"w": torch.full((4,), 7.0)}, b)
    return b.getvalue()


def payload(marker: str) -> bytes:
    class Attack:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)
    return pickle.dumps({"w": Attack()}, protocol=2)


def build(entries: list, comment: bytes, tail: bytes) -> bytes:
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are the point
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            for name, data in entries:
                z.writestr(zipfile.ZipInfo(name), data)
            z.comment = comment
    return out.getvalue() + tail


mutation = st.fixed_dictionaries({
    "alt": st.sampled_from(["none", "case", "same", "other_member"]),
    "alt_first": st.booleans(),
    "append_archive": st.booleans(),
    "comment": st.sampled_from([b"", b"hello", b"PK\x05\x06" + bytes(18)]),
    "tail": st.sampled_from([b"", b"\x00" * 7, b"garbage"]),
})


def outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - any refusal counts as one
        return "error", type(e).__name__


def zipfile_pick(data: bytes):
    """The bytes of data.pkl as zipfile (and numpy.load) resolve it: the last central
    directory entry with that exact name."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                names = [i for i in z.infolist() if i.filename.endswith("/data.pkl")]
                return z.read(names[-1]) if names else None
    except Exception:  # noqa: BLE001
        return None


BASE = base_archive()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=mutation)
def test_zip_reading_agrees_with_torch_or_refuses(m):
    with tempfile.TemporaryDirectory() as d:
        marker = os.path.join(d, "MARKER")
        evil = payload(marker)
        entries = list(BASE)
        prefix = entries[0][0].split("/")[0]
        if m["alt"] != "none":
            name = {"case": f"{prefix}/Data.pkl", "same": f"{prefix}/data.pkl",
                    "other_member": f"{prefix}/other.pkl"}[m["alt"]]
            entries = [(name, evil)] + entries if m["alt_first"] else entries + [(name, evil)]
        data = build(entries, m["comment"], m["tail"])
        if m["append_archive"]:
            data += other_archive()
        path = os.path.join(d, "x.pt")
        with open(path, "wb") as f:
            f.write(data)

        theirs = outcome(lambda: torch.load(path, weights_only=False))
        ran = os.path.exists(marker)
        ours = outcome(lambda: tensorseal.load(path))
        if ours[0] == "ok":
            assert theirs[0] == "ok", (m, theirs)
            assert list(ours[1]) == list(theirs[1]) and all(
                isinstance(ours[1][k], torch.Tensor) and torch.equal(ours[1][k], theirs[1][k]) for k in theirs[1]), m
            # zipfile (numpy.load's reader) sees the same data.pkl.
            picked = zipfile_pick(data)
            assert picked is None or picked != evil, m
        scan = run_tseal("scan", path)
        if ran:
            assert scan.returncode != 0, (m, scan.stdout)
        if m["alt"] != "none":
            # The payload pickle is in the file for some loader: scan must name it.
            assert scan.returncode != 0 and ("posix.system" in scan.stdout + scan.stderr or scan.returncode == 2), \
                (m, scan.stdout, scan.stderr)


@pytest.mark.parametrize("alt", ["case", "same"])
def test_a_hidden_data_pkl_is_never_loaded_silently(alt, tmp_path):
    """The two cases the issue names, spelled out: torch runs the first data.pkl it
    finds ignoring case; tensorseal refuses the archive and scan calls it dangerous."""
    marker = tmp_path / "MARKER"
    entries = list(BASE)
    prefix = entries[0][0].split("/")[0]
    name = f"{prefix}/Data.pkl" if alt == "case" else f"{prefix}/data.pkl"
    p = tmp_path / "x.pt"
    p.write_bytes(build([(name, payload(str(marker)))] + entries, b"", b""))
    with pytest.raises(tensorseal.Error):
        tensorseal.load(p)
    scan = run_tseal("scan", p)
    assert scan.returncode == 1 and "posix.system" in scan.stdout, scan.stdout + scan.stderr
