"""`anodize compile FILE` reads the file's source; it never runs the script."""

from __future__ import annotations

from pathlib import Path

from anodize.cli import main

SCRIPT = '''
from pathlib import Path
import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread

BLOCK = 128

@launch_contract(domain=1, block=BLOCK)
@kernel
def double(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] * 2.0

Path(__file__).with_suffix(".ran").write_text("the module ran")  # no __main__ guard
raise SystemExit("compiling must not run the script")
'''


def test_compile_does_not_run_the_script(tmp_path: Path) -> None:
    path = tmp_path / "no_guard.py"
    path.write_text(SCRIPT)
    out = tmp_path / "k.ll"
    assert main(["compile", f"{path}:double", "--arch", "cpu", "--emit", "llvm", "-o", str(out)]) == 0
    assert not path.with_suffix(".ran").exists()
    assert "define" in out.read_text()


def test_compile_reports_check_errors_from_source(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.py"
    path.write_text(SCRIPT.replace("c[i] = a[i] * 2.0", "c[i + 1] = a[i] * 2.0"))
    assert main(["compile", str(path), "--arch", "cpu", "-o", str(tmp_path / "x")]) == 1
    assert "az-disjoint-index" in capsys.readouterr().err
    assert not path.with_suffix(".ran").exists()
