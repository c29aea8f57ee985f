"""Where users already work: git and pre-commit, with the real `git` and the real
`pre-commit` package in temporary repositories.

- `tseal canon --check FILE...` (exit 0 / 1 naming each file / 2), `tseal canon --stdin
  --stdout` and `tseal inspect --textconv`;
- `tseal git-setup` installs the diff driver (`git diff` names the changed tensor) and
  the clean filter (re-saving the same weights leaves `git status` clean, where without
  it the fresh `torch.save` bytes show as a change);
- the hooks of .pre-commit-hooks.yaml, run by pre-commit as local `language: system`
  hooks with the same entries and `files` patterns: they fail on a hand-made malicious
  pickle and on a non-canonical file, and pass on canonical ones.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess
import sys

import pytest
import torch
import yaml

import tensorseal
import tensorseal.torch as tst
from conftest import ROOT, run_tseal, tseal_bin

# GLOBAL posix.system, ("true",), REDUCE: what torch.save of an os.system payload
# holds, written by hand (protocol 2).
EVIL_PICKLE = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."


def weights(scale: float = 1.0) -> dict:
    g = torch.Generator().manual_seed(0)
    return {
        "layer1.weight": torch.randn(4, 3, generator=g) * scale,
        "layer1.bias": torch.zeros(4),
        "layer2.weight": torch.randn(2, 4, generator=g),
        "step": 7,
    }


@pytest.fixture()
def env(tmp_path):
    """An environment whose git sees neither the user's nor the system's config, with
    the built tseal first on PATH (git runs `tseal ...` from its config)."""
    home = tmp_path / "home"
    home.mkdir()
    e = dict(os.environ)
    e.pop("XDG_CONFIG_HOME", None)
    e.update({
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": os.path.dirname(os.path.abspath(tseal_bin())) + os.pathsep + e.get("PATH", ""),
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-cache"),
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    })
    return e


def sh(args, cwd, env, check=True, input=None):
    r = subprocess.run(list(map(str, args)), cwd=cwd, env=env, capture_output=True, input=input)
    if check:
        assert r.returncode == 0, (args, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"))
    return r


def text(r) -> str:
    return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


@pytest.fixture()
def repo(tmp_path, env):
    d = tmp_path / "repo"
    d.mkdir()
    sh(["git", "init", "-q", "-b", "main"], d, env)
    return d


def commit_all(repo, env, message="c"):
    sh(["git", "add", "-A"], repo, env)
    sh(["git", "commit", "-q", "--no-verify", "-m", message], repo, env)


def status(repo, env) -> str:
    return sh(["git", "status", "--porcelain"], repo, env).stdout.decode()


# ---- tseal canon --check / --stdin --stdout / inspect --textconv -------------------

def test_canon_check_exit_status_and_lines(tmp_path):
    saved = tmp_path / "saved.pt"
    torch.save(weights(), saved)
    canon = tmp_path / "canon.pt"
    assert run_tseal("canon", saved, "-o", canon).returncode == 0
    st = tmp_path / "w.safetensors"
    tensorseal.save({k: v for k, v in weights().items() if k != "step"}, st)

    r = run_tseal("canon", "--check", canon, st)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    before = saved.read_bytes()
    r = run_tseal("canon", "--check", canon, saved, st)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    assert lines[0].startswith(f"{saved}: not canonical: differs from its canonical torch-zip bytes at byte ")
    assert saved.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "canon.pt", "saved.pt", "w.safetensors"]
    legacy = tmp_path / "legacy.pt"
    torch.save(weights(), legacy, _use_new_zipfile_serialization=False)
    r = run_tseal("canon", "--check", legacy)
    assert r.returncode == 1 and "a torch-legacy file; its canonical form is torch-zip" in r.stdout
    # Unreadable input: the usual one-line error, exit 2, the other files still checked.
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    r = run_tseal("canon", "--check", junk, saved)
    assert r.returncode == 2
    assert r.stderr.startswith(f"tseal: error: {junk}: ") and "[detect/unknown-format]" in r.stderr
    assert r.stdout.startswith(f"{saved}: not canonical")
    assert tensorseal.is_canonical(canon) and not tensorseal.is_canonical(saved)
    with pytest.raises(tensorseal.Error):
        tensorseal.is_canonical(junk)


def test_canon_stdin_stdout_is_canon(tmp_path):
    saved = tmp_path / "saved.pt"
    torch.save(weights(), saved)
    canon = tmp_path / "canon.pt"
    assert run_tseal("canon", saved, "-o", canon).returncode == 0
    r = subprocess.run([tseal_bin(), "canon", "--stdin", "--stdout"], input=saved.read_bytes(), capture_output=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == canon.read_bytes() and r.stdout != saved.read_bytes()
    # A file's --stdout is the same; a dangerous pickle is refused (exit 1, nothing out).
    assert subprocess.run([tseal_bin(), "canon", str(saved), "--stdout"], capture_output=True).stdout == r.stdout
    r = subprocess.run([tseal_bin(), "canon", "--stdin", "--stdout"], input=EVIL_PICKLE, capture_output=True)
    assert (r.returncode, r.stdout) == (1, b"") and b"posix.system" in r.stderr
    r = subprocess.run([tseal_bin(), "canon", "--stdin", "--stdout"], input=b"junk", capture_output=True)
    assert r.returncode == 2 and r.stdout == b"" and r.stderr.startswith(b"tseal: error: <stdin>")


def test_textconv_lines(tmp_path):
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save(weights(), a)
    w = weights()
    w = {k: w[k] for k in reversed(list(w))}  # another dict order: the same text
    torch.save(w, b)
    ta, tb = run_tseal("inspect", "--textconv", a), run_tseal("inspect", "--textconv", b)
    assert ta.returncode == 0 and ta.stdout == tb.stdout
    lines = ta.stdout.splitlines()
    assert lines[0] == "format torch-zip" and lines[1] == "content_hash " + tensorseal.hash(a)
    t = weights()["layer2.weight"]
    assert f"tensor layer2.weight: float32 [2, 4] sha256:{hashlib.sha256(t.numpy().tobytes()).hexdigest()}" in lines
    assert "value step: 7" in lines
    paths = [line.split(" ", 1)[1].split(": ", 1)[0] for line in lines[2:]]
    assert paths == sorted(paths) == ["layer1.bias", "layer1.weight", "layer2.weight", "step"]


# ---- git: the diff driver and the clean filter ------------------------------------

def test_git_setup_installs_attributes_and_config(repo, env, tmp_path):
    r = sh([tseal_bin(), "git-setup"], repo, env)
    attrs = (repo / ".gitattributes").read_text().splitlines()
    for ext in ("pt", "pth", "bin", "ckpt", "safetensors"):
        assert f"*.{ext} diff=tseal filter=tseal" in attrs
    get = lambda key: sh(["git", "config", "--local", "--get", key], repo, env).stdout.decode().strip()
    assert get("diff.tseal.textconv") == "tseal inspect --textconv"
    assert get("filter.tseal.clean") == "tseal canon --stdin --stdout"
    assert b"added *.pt diff=tseal filter=tseal" in r.stdout
    # Idempotent; lines already there (and others) are kept once.
    sh([tseal_bin(), "git-setup"], repo, env)
    assert (repo / ".gitattributes").read_text().splitlines() == attrs
    # --global: the user's attributes file and config, from anywhere.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = sh([tseal_bin(), "git-setup"], elsewhere, env, check=False)
    assert r.returncode == 2 and b"[git/command-failed]" in r.stderr
    sh([tseal_bin(), "git-setup", "--global"], elsewhere, env)
    g = pathlib.Path(env["HOME"]) / ".config" / "git" / "attributes"
    assert "*.ckpt diff=tseal filter=tseal" in g.read_text().splitlines()
    assert sh(["git", "config", "--global", "--get", "diff.tseal.textconv"], elsewhere, env).stdout.strip() == \
        b"tseal inspect --textconv"


def test_git_diff_names_the_changed_tensor(repo, env):
    sh([tseal_bin(), "git-setup"], repo, env)
    torch.save(weights(), repo / "model.pt")
    commit_all(repo, env)
    w = weights()
    w["layer2.weight"] = w["layer2.weight"] + 1
    torch.save(w, repo / "model.pt")
    diff = sh(["git", "diff"], repo, env).stdout.decode()
    changed = [l for l in diff.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert any(l.startswith("-tensor layer2.weight: float32 [2, 4] sha256:") for l in changed), diff
    assert any(l.startswith("+tensor layer2.weight: float32 [2, 4] sha256:") for l in changed), diff
    assert not any("layer1" in l for l in changed), diff
    assert "Binary files" not in diff
    commit_all(repo, env)
    log = sh(["git", "log", "-p", "-1"], repo, env).stdout.decode()
    assert "+tensor layer2.weight" in log
    # Without the driver git sees only binary files.
    raw = sh(["git", "diff", "--no-textconv", "HEAD~1", "HEAD"], repo, env).stdout.decode()
    assert "Binary files" in raw and "layer2.weight" not in raw


# Two ways the same weights get new bytes (torch 2.13's zip torch.save of the same
# tensors to the same name repeats its bytes): a legacy save keys storages by memory
# address, and a zip save through a temporary name (the atomic-save pattern) embeds
# that name's stem as the archive's prefix.
def save_legacy(w, path):
    torch.save(w, path, _use_new_zipfile_serialization=False)


def save_via_temp_name(w, path):
    tmp = path.with_name(path.name + ".tmp")
    torch.save(w, tmp)
    os.replace(tmp, path)


RESAVES = {"legacy": (save_legacy, save_legacy), "renamed": (torch.save, save_via_temp_name)}


def resave(repo, env, how):
    """Save, commit, save the same weights again: asserts the bytes differ."""
    first_save, second_save = RESAVES[how]
    w1 = weights()
    first_save(w1, repo / "model.pt")
    first = (repo / "model.pt").read_bytes()
    commit_all(repo, env)
    w2 = weights()  # new tensors while w1 lives: other addresses
    second_save(w2, repo / "model.pt")
    second = (repo / "model.pt").read_bytes()
    assert first != second
    assert all(torch.equal(w1[k], w2[k]) for k in w1 if k != "step")


@pytest.mark.parametrize("how", sorted(RESAVES))
def test_without_the_filter_a_resave_is_a_change(repo, env, how):
    resave(repo, env, how)
    sh(["git", "add", "-A"], repo, env)
    assert status(repo, env) == "M  model.pt\n"


@pytest.mark.parametrize("how", sorted(RESAVES))
def test_clean_filter_keeps_status_clean_after_a_resave(repo, env, how):
    sh([tseal_bin(), "git-setup"], repo, env)
    resave(repo, env, how)
    # git add runs the filter: the same canonical blob, nothing staged. (Before it,
    # `git status` may list the file when its size changed: git takes a new size for
    # a change without running the filter.)
    sh(["git", "add", "-A"], repo, env)
    assert status(repo, env) == ""
    assert sh(["git", "diff", "--cached", "--stat"], repo, env).stdout == b""
    # The stored blob is the canonical file; it loads with stock torch as the weights.
    blob = sh(["git", "cat-file", "blob", "HEAD:model.pt"], repo, env).stdout
    (repo / "stored.pt").write_bytes(blob)
    assert run_tseal("canon", "--check", repo / "stored.pt").returncode == 0
    loaded = torch.load(repo / "stored.pt", weights_only=True)
    assert torch.equal(loaded["layer2.weight"], weights()["layer2.weight"])
    (repo / "stored.pt").unlink()
    # A real change is still one.
    torch.save(weights(scale=2.0), repo / "model.pt")
    sh(["git", "add", "-A"], repo, env)
    assert status(repo, env) == "M  model.pt\n"


# ---- pre-commit -----------------------------------------------------------------

def hooks_manifest() -> list:
    return yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())


def local_config() -> str:
    """The manifest's hooks as local `language: system` hooks running the built tseal
    (pre-commit would otherwise pip-install this repository: a full C++ build)."""
    hooks = []
    for h in hooks_manifest():
        assert h["entry"].startswith("tseal ") and h["language"] == "python"
        hooks.append({**h, "language": "system", "entry": tseal_bin() + h["entry"][len("tseal"):]})
    return yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]}, sort_keys=False)


def pre_commit(repo, env, *args):
    return sh([sys.executable, "-m", "pre_commit", *args], repo, env, check=False)


def test_hooks_manifest_is_valid_for_pre_commit(env):
    r = sh([sys.executable, "-m", "pre_commit", "validate-manifest", ROOT / ".pre-commit-hooks.yaml"], ROOT, env)
    assert r.returncode == 0
    ids = [h["id"] for h in hooks_manifest()]
    assert ids == ["tseal-scan", "tseal-canon-check"]


def test_pre_commit_hooks(repo, env):
    (repo / ".pre-commit-config.yaml").write_text(local_config())
    canon = repo / "canon.pt"
    tst.save({k: v for k, v in weights().items()}, canon)
    tensorseal.save({k: v for k, v in weights().items() if k != "step"}, repo / "w.safetensors")
    (repo / "notes.txt").write_text("not a checkpoint, not matched by the hooks' files\n")
    sh(["git", "add", "-A"], repo, env)
    r = pre_commit(repo, env, "run", "--all-files")
    assert r.returncode == 0, text(r)
    assert text(r).count("Passed") == 2

    # A non-canonical (fresh torch.save) file fails canon-check, naming it; scan passes.
    torch.save(weights(), repo / "saved.pt")
    sh(["git", "add", "saved.pt"], repo, env)
    r = pre_commit(repo, env, "run", "tseal-canon-check", "--files", "saved.pt", "canon.pt")
    assert r.returncode == 1 and "saved.pt: not canonical" in text(r) and "canon.pt: not" not in text(r), text(r)
    assert pre_commit(repo, env, "run", "tseal-scan", "--files", "saved.pt").returncode == 0

    # A malicious pickle fails scan, naming the global.
    (repo / "evil.pt").write_bytes(EVIL_PICKLE)
    sh(["git", "add", "evil.pt"], repo, env)
    r = pre_commit(repo, env, "run", "tseal-scan", "--files", "evil.pt", "canon.pt")
    assert r.returncode == 1 and "posix.system" in text(r) and "dangerous" in text(r), text(r)

    # As a git hook: the commit is refused, then goes through once the files are fixed.
    assert pre_commit(repo, env, "install").returncode == 0
    r = sh(["git", "commit", "-q", "-m", "bad"], repo, env, check=False)
    assert r.returncode != 0 and "posix.system" in text(r) and "saved.pt: not canonical" in text(r), text(r)
    assert sh(["git", "rev-parse", "--verify", "-q", "HEAD"], repo, env, check=False).returncode != 0
    sh(["git", "rm", "-q", "--cached", "evil.pt"], repo, env)
    (repo / "evil.pt").unlink()
    assert run_tseal("canon", "--in-place", repo / "saved.pt").returncode == 0
    sh(["git", "add", "-A"], repo, env)
    r = sh(["git", "commit", "-q", "-m", "good"], repo, env, check=False)
    assert r.returncode == 0, text(r)
