"""The documentation: the API reference builds (Sphinx autodoc, warnings are errors), every
public name has a docstring, the docs cite only files of this repository, and README's
pre-commit snippet is usable as written."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
PUBLIC_MODULES = ("anodize", "anodize.thread", "anodize.tile", "anodize.warp", "anodize.math", "anodize.shared", "anodize.local", "anodize.types")


# ---- the API reference ------------------------------------------------------------------


def test_api_reference_builds_without_warnings(tmp_path: Path) -> None:
    """`sphinx-build -W -b html docs/api`: offline (no intersphinx), warnings fail it."""
    pytest.importorskip("sphinx", reason="the `docs` extra (Sphinx) is not installed")
    out = tmp_path / "html"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(API), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = (out / "index.html").read_text(encoding="utf-8")
    for name in (
        "anodize.kernel",
        "anodize.launch_contract",
        "anodize.Device",
        "anodize.Buffer",
        "anodize.LaunchConfig",
        "anodize.ContractViolation",
        "anodize.KernelFault",
        "anodize.Slice",
        "anodize.f32",
        "anodize.thread.index_1d",
        "anodize.warp.shfl_down",
        "anodize.math.sqrt",
        "anodize.shared.array",
    ):
        assert f'id="{name}"' in page, f"{name} is missing from the API reference"


def test_api_conf_is_offline() -> None:
    conf = (API / "conf.py").read_text(encoding="utf-8")
    assert "sphinx.ext.intersphinx" not in conf and "intersphinx_mapping" not in conf
    assert re.search(r"extensions\s*=\s*\[\s*\"sphinx\.ext\.autodoc\"\s*\]", conf)


# ---- docstrings --------------------------------------------------------------------------


def _public(mod: object) -> list[str]:
    names = getattr(mod, "__all__", None)
    assert names is not None, f"{mod} has no __all__"
    return [n for n in names if n != "__version__"]


def _own_doc(obj: object) -> str:
    if inspect.isclass(obj):
        return obj.__dict__.get("__doc__") or ""
    return getattr(obj, "__doc__", None) or ""


def undocumented() -> list[str]:
    missing: list[str] = []
    seen: set[int] = set()
    for modname in PUBLIC_MODULES:
        mod = importlib.import_module(modname)
        if not (mod.__doc__ or "").strip():
            missing.append(modname)
        for name in _public(mod):
            obj = getattr(mod, name)
            if inspect.ismodule(obj):
                continue  # a public submodule: checked as a module above
            if not _own_doc(obj).strip():
                missing.append(f"{modname}.{name}")
            if inspect.isclass(obj) and id(obj) not in seen and obj.__module__.startswith("anodize"):
                seen.add(id(obj))
                for attr, value in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                    if (inspect.isfunction(fn) or isinstance(value, property)) and not (fn.__doc__ or "").strip():
                        missing.append(f"{modname}.{name}.{attr}")
    return missing


def test_every_public_name_has_a_docstring() -> None:
    """`anodize.__all__`, the public submodules' `__all__`, and the public methods and
    properties of the public classes: the API reference is generated from these."""
    assert undocumented() == []


def test_the_docstring_check_is_not_vacuous(monkeypatch: pytest.MonkeyPatch) -> None:
    import anodize.thread

    monkeypatch.setattr(anodize.thread.tid_x, "__doc__", None)
    assert "anodize.thread.tid_x" in undocumented()


# ---- the docs cite only this repository --------------------------------------------------

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_UP_PATH = re.compile(r"(?<![\w.])((?:\.\./)+[\w][\w./-]*)")
_ABS_PATH = re.compile(r"(?<![\w.:/])(/(?:work|home|tmp|Users|opt)/[\w./-]+)")
_DOC_NAME = re.compile(r"\b([A-Z][A-Z_]+\.md)\b")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "docs").rglob("*.rst"))]


def outside_citations(path: Path, text: str) -> list[str]:
    """Links and path citations in one document that leave the repository or name a
    file it does not hold."""
    problems: list[str] = []
    prose = _CODE.sub("", _FENCE.sub("", text))
    for target in _LINK.findall(prose):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        file = (path.parent / target.split("#")[0]).resolve()
        if not file.is_relative_to(ROOT) or not file.exists():
            problems.append(f"link to {target}")
    for cited in (c.rstrip(".") for c in _UP_PATH.findall(text)):
        file = (path.parent / cited).resolve()
        if not file.is_relative_to(ROOT) or not file.exists():
            problems.append(f"cites {cited}")
    problems.extend(f"cites {p.rstrip('.')}" for p in _ABS_PATH.findall(text))
    names = {p.name for p in ROOT.rglob("*.md") if ".git" not in p.parts}
    problems.extend(f"cites {n}, which is not in the repository" for n in _DOC_NAME.findall(text) if n not in names)
    return problems


def test_docs_cite_only_files_of_the_repository() -> None:
    found = {}
    for path in doc_files():
        problems = outside_citations(path, path.read_text(encoding="utf-8"))
        if problems:
            found[str(path.relative_to(ROOT))] = problems
    assert found == {}


def test_the_citation_check_is_not_vacuous() -> None:
    doc = ROOT / "docs" / "language.md"
    text = "See `../shared/LANGUAGE.md`, [style](../../shared/STYLE.md) and /work/shared/LANGUAGE.md.\n"
    problems = outside_citations(doc, text)
    assert "cites ../shared/LANGUAGE.md" in problems
    assert "link to ../../shared/STYLE.md" in problems
    assert "cites /work/shared/LANGUAGE.md" in problems
    assert "cites LANGUAGE.md, which is not in the repository" in problems
    assert outside_citations(doc, "[the checker](checker.md), [results](../bench/RESULTS.md)\n") == []


# ---- README's pre-commit snippets --------------------------------------------------------


def _yaml_blocks(section: str) -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index(section)
    end = readme.find("\n## ", start)
    return re.findall(r"```yaml\n(.*?)```", readme[start : end if end > 0 else None], re.S)


def test_readme_precommit_local_hook_is_usable_as_written() -> None:
    hook_ids = {h["id"] for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    configs = [yaml.safe_load(b) for b in _yaml_blocks("### pre-commit")]
    local = [r for c in configs for r in c["repos"] if r["repo"] == "local"]
    assert len(local) == 1, "README shows one `repo: local` form"
    (hook,) = local[0]["hooks"]
    assert hook["id"] in hook_ids
    assert hook["language"] == "system"
    assert hook["entry"] == "anodize check --format concise"
    assert {"id", "name", "entry", "language"} <= set(hook)  # what pre-commit requires of a local hook
    published = [r for c in configs for r in c["repos"] if r["repo"].startswith("https://")]
    assert published and all("rev" in r and [h["id"] for h in r["hooks"]] == ["anodize-check"] for r in published)


def test_checker_code_table_lists_every_code() -> None:
    """docs/checker.md's "Codes" table has one row per code of anodize/language/codes.py, and no
    row for a code that does not exist."""
    from anodize.language.codes import CODES

    text = (ROOT / "docs" / "checker.md").read_text(encoding="utf-8")
    table = text.split("## Codes", 1)[1].split("\n\n", 2)[1]
    rows = set(re.findall(r"^\| `(az-[a-z0-9-]+)`", table, re.M))
    assert rows, "no code table under '## Codes'"
    assert sorted(set(CODES) - rows) == [], "codes missing from docs/checker.md's table"
    assert sorted(rows - set(CODES)) == [], "rows of docs/checker.md's table that are no code"
