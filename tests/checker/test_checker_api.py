"""check_source, the renderers, `# anodize: ignore`, and `anodize check` (exit codes, formats, config)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from anodize.language import messages
from anodize.checker.api import check_paths, check_source
from anodize.checker.cli import run_check
from anodize.language.diagnostics import render_concise, render_full, render_json
from harness import FIXTURES

RACY = """import anodize as az
from anodize import DisjointSlice, f32, kernel, thread


@kernel
def k(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    c[i + 1] = 1.0
"""


def test_syntax_error_is_one_diagnostic() -> None:
    diags = check_source("import anodize\ndef broken(:\n    pass\n", "bad.py")
    assert [(d.code, d.span.line) for d in diags] == [("az-syntax", 2)]
    assert diags[0].message.startswith("invalid syntax")


def test_syntax_error_without_anodize_too() -> None:
    diags = check_source("x = (\n", "bad.py")
    assert [d.code for d in diags] == ["az-syntax"]


def test_clean_module_without_kernels() -> None:
    assert check_source("import anodize as az\nx = 1\n", "m.py") == []


def test_messages_follow_the_style() -> None:
    diags = check_paths([FIXTURES])
    assert diags
    for d in diags:
        assert d.code in messages.CODES
        assert d.message[0] == d.message[0].lower() or d.message[0] in "`", d.message
        assert not d.message.endswith("."), d.message
    # every ownership diagnostic offers a way out
    for d in diags:
        if d.code in {"az-shared-write", "az-disjoint-index", "az-atomic", "az-unsafe", "az-barrier-divergence",
                      "az-no-contract", "az-alias", "az-launch-rank", "az-global-write", "az-index-forge",
                      "az-shared-race"}:
            assert d.help, d


def test_full_rendering_has_frame_carets_and_secondary_label() -> None:
    diags = check_source(RACY, "racy.py")
    text = render_full(diags, {"racy.py": RACY})
    assert "error[az-disjoint-index]:" in text
    assert "--> racy.py:8:5" in text
    assert "8 |     c[i + 1] = 1.0" in text
    assert "^^^^^^^^" in text
    assert "`c` is declared `DisjointSlice` here" in text  # the secondary label
    assert "= help:" in text


def test_concise_and_json() -> None:
    diags = check_source(RACY, "racy.py")
    assert render_concise(diags).splitlines() == [
        "racy.py:8:5: az-disjoint-index `c` is a `DisjointSlice`; it can only be written at this thread's own "
        "witness, not at `i + 1`"
    ]
    (obj,) = json.loads(render_json(diags))
    assert obj["code"] == "az-disjoint-index" and obj["line"] == 8 and obj["column"] == 5
    assert obj["secondary"] and obj["help"]


def test_alias_points_at_both_places() -> None:
    path = FIXTURES / "host" / "launch_same_buffer.py"
    (d, _) = [d for d in check_source(path.read_text(), str(path)) if d.code == "az-alias"]
    assert d.span.line == 12 and d.secondary and d.secondary[0].span.line == 12
    assert d.secondary[0].span.col != d.span.col


def test_ignore_comment_in_a_kernel_silences_nothing_and_is_reported() -> None:
    src = RACY.replace("c[i + 1] = 1.0", "c[i + 1] = 1.0  # anodize: ignore[az-disjoint-index]")
    diags = check_source(src, "x.py")
    assert [(d.code, d.span.line) for d in diags] == [("az-disjoint-index", 8), ("az-ignore", 8)]
    assert "with az.unsafe():" in (diags[1].help or "")


def test_ignore_comment_at_a_launch_site_silences_only_its_code() -> None:
    path = FIXTURES / "host" / "launch_same_buffer.py"
    lines = path.read_text().splitlines()
    assert "az-alias" in lines[11]
    def at_12() -> list[str]:
        return [d.code for d in check_source("\n".join(lines), str(path)) if d.span.line == 12]

    assert "az-alias" in at_12()
    lines[11] = lines[11].split("#")[0].rstrip() + "  # anodize: ignore[az-alias]"
    assert "az-alias" not in at_12()
    lines[11] = lines[11].split("#")[0].rstrip() + "  # anodize: ignore[az-no-contract]"
    assert "az-alias" in at_12()


def test_ignore_comments_at_a_launch_site_that_cannot_apply_are_reported() -> None:
    """A bare `# anodize: ignore`, an unknown code and an ignore that silences nothing are
    `az-ignore` errors on host lines (like ruff's unused `noqa`); one that works is silent."""
    path = FIXTURES / "host" / "launch_same_buffer.py"
    lines = path.read_text().splitlines()
    launch = lines[11].split("#")[0].rstrip()

    def at_12(comment: str) -> list[tuple[str, str, str | None]]:
        lines[11] = f"{launch}  {comment}"
        diags = check_source("\n".join(lines), str(path))
        return [(d.code, d.message, d.help) for d in diags if d.span.line == 12]

    assert at_12("# anodize: ignore[az-alias]") == []
    bare = at_12("# anodize: ignore")
    assert [c for c, _, _ in bare] == ["az-alias", "az-ignore"] and "without a code list" in bare[1][1]
    typo = at_12("# anodize: ignore[az-alais]")
    assert [c for c, _, _ in typo] == ["az-alias", "az-ignore"]
    assert "`az-alais`" in typo[1][1] and "`az-alias`" in (typo[1][2] or "")
    unused = at_12("# anodize: ignore[az-alias, az-launch-rank]")
    assert [(c, m) for c, m, _ in unused] == [
        ("az-ignore", "this ignore comment silences nothing: no `az-launch-rank` is reported on this line")
    ]
    # mypy's own comments are mypy's business (it has --warn-unused-ignores)
    assert at_12("# anodize: ignore[az-alias]  # type: ignore[arg-type]") == []
    # an ignore of a code only the mypy plugin reports (az-requires) is never called unused
    assert [c for c, _, _ in at_12("# anodize: ignore[az-alias, az-requires]")] == []


def test_ignore_text_in_a_string_is_not_a_comment() -> None:
    src = 'import anodize as az\nNOTE = "# anodize: ignore[az-nonsense]"\n'
    assert check_source(src, "x.py") == []


@pytest.mark.parametrize(
    "spelling",
    [
        "import anodize as az\n{body}",
        "import anodize\naz = anodize\n{body}",
    ],
)
def test_spellings_resolve(spelling: str) -> None:
    body = (
        "@az.kernel\ndef k(c: az.DisjointSlice[az.f32]) -> None:\n"
        "    i = az.thread.index_1d()\n    c[0] = 1.0\n"
    )
    src = spelling.format(body=body)
    codes = [d.code for d in check_source(src, "s.py")]
    assert "az-disjoint-index" in codes or src.startswith("import anodize\naz = anodize")


# ---- the command line ---------------------------------------------------------------------------


def test_cli_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_check([str(FIXTURES / "accept")]) == 0
    assert run_check([str(FIXTURES / "reject" / "neighbour_write.py")]) == 1
    out = capsys.readouterr()
    assert "error[az-disjoint-index]" in out.out
    assert run_check(["--format", "xml", str(FIXTURES)]) == 2
    assert run_check([str(FIXTURES / "does-not-exist.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_cli_concise_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    target = str(FIXTURES / "reject" / "write_element_zero.py")
    assert run_check(["--format", "concise", target]) == 1
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(r".*write_element_zero\.py:10:5: az-disjoint-index .*", line)
    assert run_check(["--format", "json", target]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in data] == ["az-disjoint-index"]
    assert run_check(["--format", "json", str(FIXTURES / "accept" / "vecadd.py")]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_cli_pyproject_include_exclude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.anodize]\ninclude = ["src"]\nexclude = ["src/generated", "*_skip.py"]\n')
    (tmp_path / "src" / "generated").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "src" / "good.py").write_text(RACY.replace("c[i + 1]", "c[i]"))
    (tmp_path / "src" / "generated" / "racy.py").write_text(RACY)
    (tmp_path / "src" / "racy_skip.py").write_text(RACY)
    (tmp_path / "other" / "racy.py").write_text(RACY)
    monkeypatch.chdir(tmp_path)
    assert run_check([]) == 0  # only src/, minus the excludes
    assert "checked 1 file" in capsys.readouterr().err
    assert run_check(["src/generated/racy.py"]) == 0  # excluded even when named
    assert run_check(["other"]) == 1
    (tmp_path / "pyproject.toml").write_text("[tool.anodize\n")
    assert run_check(["src"]) == 2


def test_console_script(tmp_path: Path) -> None:
    exe = shutil.which("anodize", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("the anodize console script is not installed")
    (tmp_path / "racy.py").write_text(RACY)
    r = subprocess.run([exe, "check", "--format", "concise", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "az-disjoint-index" in r.stdout
    r = subprocess.run([exe, "check", str(FIXTURES / "accept")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_examples_are_accepted() -> None:
    """The shipped examples are written in the safe tier or a justified unsafe tier: no false positives."""
    examples = FIXTURES.parent / "examples"
    if not examples.is_dir():
        pytest.skip("no examples/")
    assert [f"{d.span.path}:{d.span.line} {d.code}" for d in check_paths([examples])] == []
