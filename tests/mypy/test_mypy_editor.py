"""What an editor shows through the plugin, beside `anodize check`: one report per kernel error
(no mypy `[index]` beside it, once per member of a constrained TypeVar), ignore comments that
cannot hide a kernel error, and no guessed alias at a launch site (fixtures/host/launch_containers.py
covers containers and `*args` with the fixtures' run)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from incremental_cases import errors_in_text, run_mypy

pytestmark = pytest.mark.usefixtures("mypy_warm_base")

GENERIC = textwrap.dedent(
    """\
    from typing import TypeVar

    from anodize import DisjointSlice, Slice, f32, f64, kernel, launch_contract, thread

    T = TypeVar("T", f32, f64)


    @launch_contract(domain=1, block=256)
    @kernel
    def copy(x: Slice[T], out: DisjointSlice[T]) -> None:
        i = thread.index_1d()
        if i in out:
            x[i] = out[i]
            out[0] = x[i]
    """
)

IGNORED = textwrap.dedent(
    """\
    import typing

    from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


    @launch_contract(domain=1, block=256)
    @kernel
    def a(x: Slice[f32], out: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in out:
            x[i] = 1.0  # type: ignore


    @typing.no_type_check
    @launch_contract(domain=1, block=256)
    @kernel
    def b(x: Slice[f32], out: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in out:
            x[i] = 1.0  # type: ignore[index]
    """
)


def _errors(tmp_path: Path, name: str, text: str) -> tuple[set[tuple[str, int, str]], str]:
    root = tmp_path / "proj"
    root.mkdir()
    (root / name).write_text(text)
    out = run_mypy(root, tmp_path / "cache", name)
    return errors_in_text(out), out


def test_a_kernel_error_is_reported_once(tmp_path: Path) -> None:
    """The engine's error alone: mypy's `[index]` for the same write (one per f32, f64) goes."""
    errors, out = _errors(tmp_path, "gen.py", GENERIC)
    assert errors == {("gen.py", 13, "az-shared-write"), ("gen.py", 14, "az-disjoint-index")}, out
    assert out.count("[az-shared-write]") == 1 and "[index]" not in out, out


def test_type_ignore_and_no_type_check_do_not_hide_a_kernel_error(tmp_path: Path) -> None:
    """As `anodize check`: an ignore comment inside a kernel silences nothing (`with az.unsafe():`
    is the escape hatch), whether mypy's bare or with codes, and `no_type_check` neither."""
    from anodize.checker.api import check_source

    errors, out = _errors(tmp_path, "ign.py", IGNORED)
    want = {("ign.py", d.span.line, d.code) for d in check_source(IGNORED, "ign.py") if d.severity == "error"}
    assert want == {("ign.py", 11, "az-shared-write"), ("ign.py", 20, "az-shared-write")}
    assert {e for e in errors if e[2].startswith("az-")} == want, out


HIDDEN = textwrap.dedent(
    """\
    from typing import no_type_check

    from anodize import DisjointSlice, Slice, f32, func, kernel, launch_contract, thread


    @no_type_check
    @func
    def put(x: Slice[f32], i: thread.Index1D) -> None:
        x[i] = 2.0


    @no_type_check
    @launch_contract(domain=1, block=256)
    @kernel
    def b(x: Slice[f32], out: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in out:
            put(x, i)
            out[i + 1] = 1.0
    """
)


def test_no_type_check_alone_does_not_hide_a_kernel_error(tmp_path: Path) -> None:
    """A module whose every kernel and helper is `@no_type_check` (mypy then runs none of the
    plugin's hooks there): mypy still shows what `anodize check` reports."""
    from anodize.checker.api import check_source

    errors, out = _errors(tmp_path, "hid.py", HIDDEN)
    want = {("hid.py", d.span.line, d.code) for d in check_source(HIDDEN, "hid.py") if d.severity == "error"}
    assert ("hid.py", 9, "az-shared-write") in want and ("hid.py", 19, "az-disjoint-index") in want, want
    assert {e for e in errors if e[2].startswith("az-")} == want, out
    assert "__anodize_report__" not in out, out
