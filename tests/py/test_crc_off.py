"""Archives torch writes without CRCs (torch.serialization.set_crc32_options(False)):
every CRC field is 0, torch reads them, and so does tensorseal -- "not recorded" is a
verify warning, not corruption. One zeroed CRC among real ones stays a mismatch."""
from __future__ import annotations

import io
import json
import subprocess
import zipfile

import pytest

torch = pytest.importorskip("torch")

import tensorseal  # noqa: E402
from conftest import tseal_bin  # noqa: E402


def save(obj, crc: bool) -> bytes:
    buf = io.BytesIO()
    torch.serialization.set_crc32_options(crc)
    try:
        torch.save(obj, buf)
    finally:
        torch.serialization.set_crc32_options(True)
    return buf.getvalue()


def tseal(*args):
    return subprocess.run([tseal_bin(), *map(str, args)], capture_output=True, text=True)


@pytest.fixture()
def files(tmp_path):
    sd = {"w": torch.randn(8, 8), "b": torch.arange(5), "step": 7}
    off, on = tmp_path / "off.pt", tmp_path / "on.pt"
    off.write_bytes(save(sd, False))
    on.write_bytes(save(sd, True))
    assert all(i.CRC == 0 for i in zipfile.ZipFile(off).infolist())
    return sd, off, on


def test_crc_off_reads_like_torch(files):
    sd, off, on = files
    assert torch.load(off, weights_only=True)["step"] == 7  # torch reads it
    got = tensorseal.load(str(off))
    assert torch.equal(got["w"], sd["w"]) and torch.equal(got["b"], sd["b"]) and got["step"] == 7
    assert tseal("hash", off).stdout.split()[0] == tseal("hash", on).stdout.split()[0]


def test_verify_warns_instead_of_corrupt(files):
    _, off, on = files
    r = tseal("verify", off)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"OK  {off}\n") and "WARNING" in r.stdout and "CRC" in r.stdout
    j = json.loads(tseal("verify", "--json", off).stdout)
    assert j["ok"] and len(j["files"][0]["warnings"]) == 1
    assert json.loads(tseal("verify", "--json", on).stdout)["files"][0]["warnings"] == []


def test_one_zeroed_crc_among_real_ones_is_corrupt(files, tmp_path):
    _, _, on = files
    data = bytearray(on.read_bytes())
    z = zipfile.ZipFile(io.BytesIO(bytes(data)))
    info = next(i for i in z.infolist() if i.filename.endswith("data.pkl"))
    crc = info.CRC.to_bytes(4, "little")
    # Zero it in the central directory and in the data descriptor after the data.
    for at in [i for i in range(len(data) - 3) if bytes(data[i:i + 4]) == crc]:
        data[at:at + 4] = b"\0\0\0\0"
    bad = tmp_path / "zeroed.pt"
    bad.write_bytes(bytes(data))
    r = tseal("verify", bad)
    assert r.returncode == 1 and "zip/crc-mismatch" in r.stdout, r.stdout + r.stderr


def test_unexpected_record_is_a_warning(files, tmp_path):
    _, _, on = files
    out = tmp_path / "extra.pt"
    with zipfile.ZipFile(on) as zin, zipfile.ZipFile(out, "w") as zout:
        for i in zin.infolist():
            zout.writestr(i.filename, zin.read(i))
        zout.writestr(zin.namelist()[0].split("/")[0] + "/notes.txt", "hi")
    torch.load(out, weights_only=True)  # torch ignores it
    r = tseal("verify", out)
    assert r.returncode == 0 and "WARNING" in r.stdout and "notes.txt" in r.stdout, r.stdout


def test_skip_data_storage_records_filled_in_later(tmp_path):
    """torch.save under torch.serialization.skip_data() writes every storage record's
    size with 0 for its CRC and no bytes, to be filled in place later; torch.load reads
    whatever is there. tensorseal reads such records unchecked, and verify says which."""
    sd = {"w": torch.randn(4, 4), "b": torch.arange(6)}
    p = tmp_path / "skeleton.pt"
    with torch.serialization.skip_data():
        torch.save(sd, p)
    z = zipfile.ZipFile(p)
    data = bytearray(p.read_bytes())
    for info in z.infolist():  # fill each storage record in place, as a second pass would
        if "/data/" not in info.filename:
            assert info.CRC != 0
            continue
        assert info.CRC == 0 and info.file_size > 0
        key = info.filename.rsplit("/", 1)[1]
        t = {"0": sd["w"], "1": sd["b"]}[key]
        name_len = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little")
        extra_len = int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
        at = info.header_offset + 30 + name_len + extra_len
        raw = t.numpy().tobytes()
        assert len(raw) == info.file_size
        data[at:at + len(raw)] = raw
    p.write_bytes(bytes(data))
    ref = torch.load(p, weights_only=True)
    got = tensorseal.load(p)
    assert all(torch.equal(got[k], ref[k]) and torch.equal(ref[k], sd[k]) for k in sd)
    assert tensorseal.hash(p) == tensorseal.hash(sd)
    r = tseal("verify", p)
    assert r.returncode == 0 and "skip_data" in r.stdout and "data/0" in r.stdout, r.stdout + r.stderr
    plain = tmp_path / "plain.pt"
    torch.save(sd, plain)
    r = tseal("explain", plain, p)
    assert "zip.crc_skipped" in r.stdout, r.stdout + r.stderr
