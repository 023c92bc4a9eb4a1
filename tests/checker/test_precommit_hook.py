"""The `anodize-check` pre-commit hook, run for real through pre-commit.

The default run drives the manifest's hook through `pre-commit run` as a local hook of
the installed package (the entry, file types and serial run as the manifest says);
the full round trip, `pre-commit try-repo` installing the hook from a git commit of
the package into its own environment (~30 s), runs under `-m slow`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"

BAD = '''from anodize import DisjointSlice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256)
@kernel
def shift(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    c[i + 1] = 1.0
'''
GOOD = BAD.replace("c[i + 1]", "c[i]")
_PACKAGE = ("anodize", "checker", "codegen", "runtime", "pyproject.toml", "README.md", ".pre-commit-hooks.yaml")


def test_hook_manifest() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "anodize-check"]
    assert hook["entry"] == "anodize check"
    assert hook["args"] == ["--format", "concise"]  # the hook prints one line per diagnostic
    assert hook["language"] == "python"
    assert hook["types_or"] == ["python", "pyi"]
    assert hook["require_serial"] is True


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def _hook_repo(tmp: Path) -> Path:
    """A committed copy of the package (the hook is installed from a git commit)."""
    repo = tmp / "anodize-repo"
    repo.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "*.pyc")
    for name in _PACKAGE:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, repo / name)
        elif name == "README.md":
            (repo / name).write_text("anodize\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "hook under test")
    return repo


def _user_repo(tmp: Path, config: str | None = None) -> Path:
    """A git repository with one bad and one good kernel (and `config` as its pre-commit config)."""
    user = tmp / "user"
    user.mkdir()
    (user / "bad_kernel.py").write_text(BAD)
    (user / "good_kernel.py").write_text(GOOD)
    if config is not None:
        (user / ".pre-commit-config.yaml").write_text(config)
    _git(user, "init", "-q")
    _git(user, "add", "-A")
    return user


def _check_verdicts(run: Callable[[str], subprocess.CompletedProcess[str]]) -> None:
    bad = run("bad_kernel.py")
    out = bad.stdout + bad.stderr
    assert bad.returncode == 1, out
    assert "az-disjoint-index" in out
    assert "bad_kernel.py:8:" in out and "az-disjoint-index" in out
    assert "-->" not in out  # the concise format, not the full rendering
    good = run("good_kernel.py")
    assert good.returncode == 0, good.stdout + good.stderr


@pytest.mark.skipif(not PRE_COMMIT.exists() or shutil.which("git") is None, reason="needs pre-commit and git")
def test_manifest_hook_rejects_bad_kernel(tmp_path: Path) -> None:
    """The manifest's hook as a local hook over the installed `anodize` (no environment to build)."""
    (hook,) = [h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()) if h["id"] == "anodize-check"]
    local = {**hook, "language": "system"}
    user = _user_repo(tmp_path, yaml.safe_dump({"repos": [{"repo": "local", "hooks": [local]}]}))
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # `anodize` itself

    def run(file: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PRE_COMMIT), "run", "anodize-check", "--files", file],
            cwd=user, capture_output=True, text=True, env=env, timeout=300,
        )

    _check_verdicts(run)


@pytest.mark.slow
@pytest.mark.skipif(not PRE_COMMIT.exists() or shutil.which("git") is None, reason="needs pre-commit and git")
def test_try_repo_rejects_bad_kernel(tmp_path: Path) -> None:
    hook_repo = _hook_repo(tmp_path)
    user = _user_repo(tmp_path)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    env.pop("VIRTUAL_ENV", None)

    def run(file: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PRE_COMMIT), "try-repo", str(hook_repo), "anodize-check", "--files", file],
            cwd=user, capture_output=True, text=True, env=env, timeout=1500,
        )

    _check_verdicts(run)
