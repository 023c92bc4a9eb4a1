"""What `anodize check` of a large module does not spend (bench/RELIABILITY.md "Scale, session 10"):
the cyclic collector stays off while modules are checked and runs between them every
`_COLLECT_EVERY` lines; the tile shape probe types a tile kernel a second time only when one
output's shape was noted twice."""

from __future__ import annotations

import gc
import textwrap
from pathlib import Path

import pytest

from anodize.checker import cli as check_cli
from anodize.language import typer
from anodize.language.front import front_for_source
from anodize.language.syntax import collector_paused

KERNEL = textwrap.dedent('''
    from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


    @launch_contract(domain=1, block=64)
    @kernel
    def k{n}(a: Slice[f32], c: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in c:
            c[i] = a[i]
''')


def test_collector_paused_restores_what_it_found() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # (the inner block found it off: it leaves it off)
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError
    assert gc.isenabled()


def test_check_runs_the_collector_between_modules_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    for n in range(3):
        (tmp_path / f"m{n}.py").write_text(KERNEL.format(n=n))
    seen: list[bool] = []
    real = check_cli.check_file

    def check_file(*a: object, **k: object) -> object:
        seen.append(gc.isenabled())
        return real(*a, **k)  # type: ignore[arg-type]

    collected: list[int] = []
    monkeypatch.setattr(check_cli, "check_file", check_file)
    monkeypatch.setattr(check_cli.gc, "collect", lambda *a: collected.append(1) or 0)
    monkeypatch.setattr(check_cli, "_COLLECT_EVERY", 1)
    assert check_cli.run_check([str(tmp_path)]) == 0
    assert seen == [False, False, False] and len(collected) == 3
    assert gc.isenabled()
    collected.clear()
    monkeypatch.setattr(check_cli, "_COLLECT_EVERY", 10**9)
    assert check_cli.run_check([str(tmp_path)]) == 0
    assert collected == []
    capsys.readouterr()


def test_the_tile_shape_probe_runs_only_for_an_output_noted_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[2]
    probed: list[str] = []
    real = typer._tile_shape_probe

    def probe(front: object, fdef: object, *a: object) -> object:
        probed.append(fdef.name)  # type: ignore[attr-defined]
        return real(front, fdef, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(typer, "_tile_shape_probe", probe)
    once = textwrap.dedent('''
        import anodize as az
        from anodize import DisjointSlice2D, Slice2D, f32, tile


        @az.launch_contract(domain=2)
        @az.tile_kernel(num_warps=4)
        def copy(x: Slice2D[f32], out: DisjointSlice2D[f32], BM: az.Constant[int], BN: az.Constant[int]) -> None:
            pid = tile.program_id_2d()
            t = tile.load(x, pid, (BM, BN))
            tile.store(out, pid, t)
    ''')
    front = front_for_source(once, "/probe/once.py")
    assert front.typed(front.kernels()[0]).ir is not None
    assert probed == []
    path = root / "fixtures" / "reject" / "tile_constant_shapes_mixed.py"
    mixed = front_for_source(path.read_text(), "/probe/tile_constant_shapes_mixed.py")  # (a front of its own: not typed yet)
    for fdef in mixed.kernels():
        typed = mixed.typed(fdef)
        assert typed.ir is None and [d.code for d in typed.diagnostics] == ["az-disjoint-index"]
    assert probed == [f.name for f in mixed.kernels()]


def test_the_anodize_command_keeps_the_collector_off_for_a_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`anodize check` as a program (`main()` with no argv: the process ends after it) never
    turns the collector back on, so no pass scans the checked models; a call with an argv
    (a library use) leaves it as it found it."""
    import anodize.cli as top

    (tmp_path / "m.py").write_text(KERNEL.format(n=0))
    monkeypatch.setattr(top.gc, "freeze", lambda: None)
    assert top.main(["check", str(tmp_path)]) == 0 and gc.isenabled()
    monkeypatch.setattr(top.sys, "argv", ["anodize", "check", str(tmp_path)])

    class Ended(Exception):
        pass

    def end(code: int) -> None:  # (the real one ends this process: `os._exit`)
        raise Ended(code)

    monkeypatch.setattr(top, "_end", end)
    try:
        with pytest.raises(Ended) as ended:
            top.main()
        assert ended.value.args == (0,)
        assert not gc.isenabled()
    finally:
        gc.enable()
    capsys.readouterr()
