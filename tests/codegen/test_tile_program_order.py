"""The grouped program order of a 2-D tile kernel with tensor-core matmuls (codegen/tile/plain.py
`group_programs`): block (y, x) of an (gy, gx) grid computes tile (row, col) of a bijection of
the grid in which g tile rows sweep the columns together.  The statements are evaluated here
with machine integer semantics (i64, u32 wrapping) against the order's definition, and the
GEMM's PTX is checked to hold no 64-bit division (ptxas expands each into a subroutine)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from anodize.codegen.driver import compile_gpu
from anodize.codegen.tile.plain import _Lowering
from anodize.language import ir

from tile_cases import _example_kernels


def reference(x: int, y: int, gx: int, gy: int, g: int) -> tuple[int, int]:
    """The order's definition on the linear id p = y gx + x (Triton's grouped ordering)."""
    p, per = y * gx + x, g * gx
    first = p // per * g
    gs = min(gy - first, g)
    inner = p % per
    return first + inner % gs, inner // gs


def _wrap(v: int, ty: Any) -> int:
    bits, signed = ty.bits, ty.signed
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def _eval(e: Any, env: dict[str, int]) -> int:
    if isinstance(e, ir.Const):
        return int(e.value)
    if isinstance(e, ir.Local):
        return env[e.name]
    if isinstance(e, ir.RawId):
        return env[f"{e.reg}.{e.axis}"]
    if isinstance(e, ir.Cast):
        return _wrap(_eval(e.value, env), e.ty)
    if isinstance(e, ir.IfExp):
        return _eval(e.then, env) if _eval(e.cond, env) else _eval(e.orelse, env)
    if isinstance(e, ir.Compare):
        (op,), (a, b) = e.ops, e.operands
        assert op == "<"
        return int(_eval(a, env) < _eval(b, env))
    assert isinstance(e, ir.BinOp), e
    a, b = _eval(e.left, env), _eval(e.right, env)
    if e.op in ("//", "%"):
        assert b > 0 and a >= 0, (e, a, b)  # (no operand the order divides is negative or zero)
        v = a // b if e.op == "//" else a % b
    else:
        v = {"+": a + b, "-": a - b, "*": a * b}[e.op]
    return _wrap(v, e.ty)


def _order(g: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ANODIZE_TILE_GROUP", str(g))
    k = next(k for k in _example_kernels() if k.name == "gemm")
    low = _Lowering(k, 256)
    stmts = low.group_programs()
    row, col = low.grouped

    def tile(x: int, y: int, gx: int, gy: int) -> tuple[int, int]:
        env = {"ctaid.x": x, "ctaid.y": y, "nctaid.x": gx, "nctaid.y": gy}
        for s in stmts:
            assert isinstance(s, ir.Assign)
            env[s.name] = _eval(s.value, env)
        return env[row.name], env[col.name]

    return tile


@pytest.mark.parametrize("g", [8, 4, 1])
def test_the_grouped_order_is_its_definition_and_a_bijection(g: int, monkeypatch: pytest.MonkeyPatch) -> None:
    tile = _order(g, monkeypatch)
    for gx in range(1, 12):
        for gy in range(1, 2 * g + 4):
            got = {(x, y): tile(x, y, gx, gy) for y in range(gy) for x in range(gx)}
            assert all(got[x, y] == reference(x, y, gx, gy, g) for x, y in got), (gx, gy)
            assert sorted(got.values()) == [(r, c) for r in range(gy) for c in range(gx)]


def test_the_grouped_order_holds_at_the_grid_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """x up to 2**31 - 2 (nctaid.x up to 2**31 - 1), y up to 65534: the 32-bit steps do not wrap."""
    tile = _order(8, monkeypatch)
    for gx in (2**31 - 1, 2**31 - 9, 3 * 2**29 + 5):
        for gy in (65535, 65533, 17):
            for x in (0, 1, gx // 3, gx - 2, gx - 1):
                for y in (0, 7, gy // 8 * 8, gy - 2, gy - 1):
                    assert tile(x, y, gx, gy) == reference(x, y, gx, gy, 8), (x, y, gx, gy)


def test_the_gemm_holds_no_64_bit_division() -> None:
    k = next(k for k in _example_kernels() if k.name == "gemm")
    ptx = compile_gpu(k, "sm_90", ptxas=False).ptx
    assert not re.findall(r"\b(?:div|rem)\.[su]64\b", ptx)
    assert len(re.findall(r"\bdiv\.u32\b", ptx.split("// begin inline asm")[0])) == 3  # by the group's rows


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["direct", "limit", "staged"])
def test_the_grouped_order_covers_a_grid_with_a_partial_group_on_the_gpu(epilogue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/tile_gemm.py at 128x256 over an 11 x 4 grid of tiles (one group of 8 tile rows
    and one of 3; ragged edges): every tile computed once, each where it belongs; with each
    epilogue (per-element stores, the same with one column limit a row, staged)."""
    import importlib.util

    import numpy as np

    import anodize as az

    from tile_cases import ROOT

    monkeypatch.setenv("ANODIZE_TILE_EPILOGUE", "staged" if epilogue == "staged" else "direct")
    monkeypatch.setenv("ANODIZE_TILE_STORE_LIMIT", "1" if epilogue == "limit" else "0")
    spec = importlib.util.spec_from_file_location(f"_tile_gemm_order_{epilogue}", ROOT / "examples" / "tile_gemm.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    m, n, k = 128 * 10 + 3, 256 * 3 + 5, 200
    dev = az.device()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
    c = dev.to_device(np.full((m, n), np.nan, np.float16))
    mod.run(dev.to_device(a), dev.to_device(b), c, m, n, k, dev)
    np.testing.assert_allclose(c.to_host().astype(np.float32), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-2, atol=1e-2 * np.sqrt(k))
