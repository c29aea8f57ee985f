"""What `git status` shows for a re-saved checkpoint under tseal's clean filter, with
the real git (docs/cli.md, "tseal git-setup"; README, "git and pre-commit").

git stores the filtered (canonical) blob but records in the index the stat data of the
work-tree file it added, its size included. For a tracked file whose stat differs, git
runs the filter and compares blobs, except when the size differs: a new size is a
change without reading the file. So after re-saving unchanged weights:

- the same size (the same bytes, or another archive prefix of the same length): clean;
- another size (torch.save through a longer temporary name): ` M` until `git add`, which
  stages nothing and records the new size; `git diff` shows nothing meanwhile, and no
  configuration (core.checkStat, core.trustctime, update-index --refresh) changes it;
- `tensorseal.torch.save` writes the canonical bytes, the blob's own size: clean once
  the recorded file is canonical (after a checkout, or once added so).
"""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import torch

import tensorseal.torch as tst
from conftest import tseal_bin


def weights() -> dict:
    g = torch.Generator().manual_seed(0)
    return {"layer1.weight": torch.randn(4, 3, generator=g), "layer1.bias": torch.zeros(4), "step": 7}


@pytest.fixture()
def env(tmp_path):
    """git that sees neither the user's nor the system's config, the built tseal on PATH."""
    home = tmp_path / "home"
    home.mkdir()
    e = dict(os.environ)
    e.pop("XDG_CONFIG_HOME", None)
    e.update({
        "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": os.path.dirname(os.path.abspath(tseal_bin())) + os.pathsep + e.get("PATH", ""),
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    })
    return e


def git(repo, env, *args, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run(["git", *map(str, args)], cwd=repo, env=env, capture_output=True, text=True)
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def status(repo, env, *config) -> str:
    return git(repo, env, *config, "status", "--porcelain").stdout


def recorded_size(repo, env, name) -> int:
    """The size the index records for `name` (that of the work-tree file git added)."""
    debug = git(repo, env, "ls-files", "--stage", "--debug", name).stdout
    return int(debug.split("size: ")[1].split()[0])


def save_via(save, name):
    """Saves with `save` to a temporary `name`, then renames over model.pt (the atomic
    pattern): a new inode; torch.save's zip names its archive folder after `name`."""
    def go(w, path):
        tmp = path.with_name(name)
        save(w, tmp)
        os.replace(tmp, path)
    return go


def committed_repo(tmp_path, env, first_save=torch.save):
    assert shutil.which("git"), "git is installed where tensorseal's tests run"
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, env, "init", "-q", "-b", "main")
    subprocess.run([tseal_bin(), "git-setup"], cwd=repo, env=env, check=True, capture_output=True)
    first_save(weights(), repo / "model.pt")
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-q", "-m", "weights")
    assert status(repo, env) == ""
    return repo


SAME_SIZE = {
    "same_name": torch.save,                      # torch 2.13 repeats its bytes; a new mtime
    "same_length_name": save_via(torch.save, "mode1.pt"),  # other bytes, same size, new inode
}


@pytest.mark.parametrize("how", sorted(SAME_SIZE))
def test_a_resave_of_the_same_size_keeps_status_clean(tmp_path, env, how):
    repo = committed_repo(tmp_path, env)
    path = repo / "model.pt"
    before = path.read_bytes()
    SAME_SIZE[how](weights(), path)
    assert path.stat().st_size == len(before) == recorded_size(repo, env, "model.pt")
    assert (path.read_bytes() == before) == (how == "same_name")
    # git sees another mtime (and inode), runs the filter, finds the same blob.
    assert status(repo, env) == ""
    assert git(repo, env, "diff", "--stat").stdout == ""
    git(repo, env, "add", "model.pt")
    assert status(repo, env) == ""
    assert git(repo, env, "diff", "--cached", "--stat").stdout == ""


def test_a_resave_of_another_size_shows_modified_until_git_add(tmp_path, env):
    repo = committed_repo(tmp_path, env)
    path = repo / "model.pt"
    old_size = path.stat().st_size
    save_via(torch.save, "model.pt.tmp")(weights(), path)  # archive folder "model.pt", not "model"
    assert path.stat().st_size != old_size == recorded_size(repo, env, "model.pt")

    # A new size is a change to git's stat check, before any filter runs.
    assert status(repo, env) == " M model.pt\n"
    assert status(repo, env) == " M model.pt\n"  # status does not refresh it either
    # Yet git diff, which compares filtered content, shows nothing and exits 0.
    assert git(repo, env, "diff").stdout == ""
    assert git(repo, env, "diff", "--quiet", check=False).returncode == 0
    # No configuration helps: the size is always compared; refresh will not take it.
    for config in (("-c", "core.checkStat=minimal"), ("-c", "core.trustctime=false"),
                   ("-c", "core.checkStat=minimal", "-c", "core.trustctime=false")):
        assert status(repo, env, *config) == " M model.pt\n", config
    for refresh in ("--refresh", "--really-refresh"):
        r = git(repo, env, "update-index", refresh, check=False)
        assert (r.returncode, r.stdout) == (1, "model.pt: needs update\n"), (refresh, r.stderr)
        assert status(repo, env) == " M model.pt\n", refresh

    # git add runs the filter: the same blob, nothing staged, the new size recorded.
    head_blob = git(repo, env, "rev-parse", "HEAD:model.pt").stdout
    git(repo, env, "add", "model.pt")
    assert git(repo, env, "diff", "--cached", "--stat").stdout == ""
    assert git(repo, env, "diff", "--cached", "--quiet", check=False).returncode == 0
    assert status(repo, env) == ""
    assert git(repo, env, "rev-parse", ":model.pt").stdout == head_blob
    assert recorded_size(repo, env, "model.pt") == path.stat().st_size
    r = git(repo, env, "commit", "-q", "-m", "nothing", check=False)
    assert r.returncode == 1 and "nothing to commit" in r.stdout


def test_the_safe_refresh_adds_only_unchanged_content(tmp_path, env):
    # `git diff --quiet -- FILE && git add -- FILE` (docs/cli.md): adds the re-saved
    # file, never a real change.
    repo = committed_repo(tmp_path, env)
    save_via(torch.save, "model.pt.tmp")(weights(), repo / "model.pt")
    assert git(repo, env, "diff", "--quiet", "--", "model.pt", check=False).returncode == 0
    git(repo, env, "add", "--", "model.pt")
    assert status(repo, env) == ""
    changed = weights()
    changed["layer1.bias"] = changed["layer1.bias"] + 1
    save_via(torch.save, "model.pt.tmp")(changed, repo / "model.pt")
    assert git(repo, env, "diff", "--quiet", "--", "model.pt", check=False).returncode == 1
    assert status(repo, env) == " M model.pt\n"


def test_canonical_resaves_stay_clean(tmp_path, env):
    # The work-tree file is the blob itself: every re-save has its size.
    repo = committed_repo(tmp_path, env, first_save=tst.save)
    path = repo / "model.pt"
    blob = subprocess.run(["git", "cat-file", "blob", "HEAD:model.pt"], cwd=repo, env=env, capture_output=True,
                          check=True).stdout
    assert path.read_bytes() == blob
    for name in ("a.pt.tmp", "a-much-longer-temporary-name.pt"):
        save_via(tst.save, name)(weights(), path)
        assert status(repo, env) == "", name
    # A fresh clone holds the canonical file (no smudge filter): the same holds there,
    # while a torch.save of another size shows until git add. The filter is local
    # config, which a clone does not get: git-setup runs there too.
    clone = tmp_path / "clone"
    git(tmp_path, env, "clone", "-q", repo, clone)
    assert git(clone, env, "config", "--get", "filter.tseal.clean", check=False).returncode == 1
    subprocess.run([tseal_bin(), "git-setup"], cwd=clone, env=env, check=True, capture_output=True)
    assert status(clone, env) == ""  # .gitattributes was there already
    save_via(tst.save, "b.pt.tmp")(weights(), clone / "model.pt")
    assert status(clone, env) == ""
    torch.save(weights(), clone / "model.pt")
    assert (clone / "model.pt").stat().st_size != len(blob)
    assert status(clone, env) == " M model.pt\n"
    git(clone, env, "add", "model.pt")
    assert status(clone, env) == ""
