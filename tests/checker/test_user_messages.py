"""Messages a user reads from `anodize check`: Python scalar annotations, `[tool.anodize]`
keys, and files excluded by the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from anodize.checker.api import CheckConfig, check_source, collect_files
from anodize.checker.cli import run_check
from anodize.language import messages

KERNEL = """from anodize import DisjointSlice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64)
@kernel
def k(c: DisjointSlice[f32], n: {ann}) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = 1.0
"""


@pytest.mark.parametrize(("ann", "fixed"), [("int", "i64"), ("float", "f64"), ("bool", "bool_")])
def test_python_scalar_annotations_suggest_fixed_width_types(ann: str, fixed: str) -> None:
    (d,) = check_source(KERNEL.format(ann=ann), "k.py")
    assert d.code == "az-signature" and d.message == f"unsupported type `{ann}` for parameter `n`"
    assert d.help is not None and f"write `{fixed}`" in d.help and f"instead of `{ann}`" in d.help
    assert f"from anodize import {fixed}" in d.help


def test_other_annotations_keep_the_general_help() -> None:
    (d,) = check_source(KERNEL.format(ann="str"), "k.py")
    assert d.help is not None and d.help.startswith("use `Slice[T]`")
    shadowed = "class int:\n    pass\n\n\n" + KERNEL.format(ann="int")
    (d,) = check_source(shadowed, "k.py")
    assert d.help is not None and "i64" not in d.help  # a user class named `int` is not Python's int


def test_builtin_scalar_help_for_the_typer() -> None:
    assert messages.builtin_scalar_help("builtins.int") == messages.builtin_scalar_help("int")
    assert "`i64`" in (messages.builtin_scalar_help("int") or "")
    assert messages.builtin_scalar_help("Slice") is None


# ---- [tool.anodize] ------------------------------------------------------------------------


def test_unknown_config_key_is_a_located_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pp = tmp_path / "pyproject.toml"
    pp.write_text('[project]\nname = "x"\n\n[tool.anodize]\ninclude = ["src"]\nexlude = ["gen"]\n')
    (tmp_path / "a.py").write_text("x = 1\n")
    assert run_check([str(tmp_path / "a.py")]) == 2
    err = capsys.readouterr().err
    assert f"{pp}:6: unknown key `exlude` in `[tool.anodize]`; did you mean `exclude`?" in err
    assert "(known keys: `include`, `exclude`)" in err
    pp.write_text("[tool.anodize]\nstrict = true\n")
    with pytest.raises(ValueError, match=r"pyproject.toml:2: unknown key `strict` in `\[tool.anodize\]` \(known keys"):
        CheckConfig.from_pyproject(pp)
    pp.write_text('[tool]\nanodize.include = "src"\n')
    with pytest.raises(ValueError, match=r"pyproject.toml:2: `\[tool.anodize\]` `include` must be a list of strings"):
        CheckConfig.from_pyproject(pp)


def test_known_keys_load(tmp_path: Path) -> None:
    pp = tmp_path / "pyproject.toml"
    pp.write_text('[tool.anodize]\ninclude = ["src"]\nexclude = ["gen/"]\n')
    cfg = CheckConfig.from_pyproject(pp)
    assert cfg.include == ["src"] and cfg.exclude == ["gen/"] and cfg.root == tmp_path and cfg.source == pp
    pp.write_text('[project]\nname = "x"\n')
    assert CheckConfig.from_pyproject(pp).exclude == []


def test_naming_an_excluded_file_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.anodize]\nexclude = ["gen", "*_skip.py"]\n')
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "racy.py").write_text("x = 1\n")
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "b_skip.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert run_check(["gen/racy.py", "ok.py", "b_skip.py", "--format", "concise"]) == 0
    err = capsys.readouterr().err
    assert "anodize check: gen/racy.py: not checked: excluded by `gen` ([tool.anodize] exclude in " in err
    assert "anodize check: b_skip.py: not checked: excluded by `*_skip.py`" in err
    assert "ok.py: not checked" not in err and "checked 1 file: no errors" in err
    skipped: list[tuple[Path, str]] = []
    assert collect_files(["."], CheckConfig.from_pyproject(tmp_path / "pyproject.toml"), skipped) == [Path("ok.py")]
    assert skipped == []  # a directory walk skips excluded files silently
