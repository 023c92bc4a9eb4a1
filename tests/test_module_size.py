"""Modules stay small: no .py file of the packages (anodize/, checker/, codegen/, runtime/) grows
past 650 lines.  The standard is ~600 lines, one subject per module, named for what it does;
a module that outgrows it is split by moving whole functions or classes (mixins for a class
whose methods group by construct: checker/kernel_interp.py, language/typer.py; or, as codegen's
`Lowerer` does, collaborators holding the shared state: codegen/llvm/lower.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("anodize", "checker", "codegen", "runtime")
LIMIT = 650


def _sizes() -> dict[str, int]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            with path.open(encoding="utf-8") as f:
                out[path.relative_to(ROOT).as_posix()] = sum(1 for _ in f)
    return out


def test_the_packages_are_found() -> None:
    sizes = _sizes()
    assert len(sizes) > 100 and "codegen/llvm/lower.py" in sizes and "checker/kernel_model.py" in sizes


def test_no_module_exceeds_the_limit() -> None:
    over = {p: n for p, n in _sizes().items() if n > LIMIT}
    assert not over, (
        f"modules over {LIMIT} lines (split them by moving whole functions or classes into "
        f"modules named for what they do): " + ", ".join(f"{p} ({n})" for p, n in sorted(over.items()))
    )
