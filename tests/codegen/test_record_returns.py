"""Helpers returning records: typed once (a record return is the tuple of its leaves, the call
bound to temporaries where it stands), run on the CPU backend and the debug device against
NumPy, PTX through ptxas."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import anodize as az

import cg_record_returns as K


def _bodies(n: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    h = np.zeros(n, K.Body.dtype)
    h["p"]["x"] = rng.standard_normal(n, dtype=np.float32)
    h["p"]["y"] = rng.standard_normal(n, dtype=np.float32)
    h["ids"] = rng.integers(0, 50, (n, 2), dtype=np.int32)
    h["m"] = rng.random(n)
    return h


def _run(dev: str, k: az.Kernel, h: np.ndarray, out: object) -> np.ndarray:
    d = az.device(dev)
    o = d.empty(len(h), out)
    k[az.LaunchConfig.for_num_elems(len(h), block=64)](d.to_device(h), o)
    return o.to_host()


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_record_returned_and_stored(dev: str) -> None:
    h = _bodies(100)
    got = _run(dev, K.step, h, K.Body)
    np.testing.assert_array_equal(got["p"]["x"], -h["p"]["y"])  # rotate(b.p)
    np.testing.assert_array_equal(got["p"]["y"], h["p"]["x"])
    np.testing.assert_array_equal(got["ids"][:, 0], h["ids"][:, 0])
    np.testing.assert_array_equal(got["ids"][:, 1], h["ids"][:, 1] + 3)
    np.testing.assert_array_equal(got["m"], h["m"] * 0.5)


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_record_returned_into_locals(dev: str) -> None:
    h = _bodies(70)
    got = _run(dev, K.fields, h, az.f32)
    want = -h["p"]["y"] + h["p"]["x"] * np.float32(10.0) + h["ids"][:, 0].astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_helper_runs_once_where_it_stands() -> None:
    """`out[i] = f(x)`: one call, its result unpacked into temporaries, then one write per leaf;
    the helper's IR returns the tuple of the record's leaves."""
    from anodize.language import ir
    from anodize.language.front import kernel_of
    from anodize.language.typer import type_kernel
    from anodize.language.types import TupleTy

    front, fdef = kernel_of(K.step.fn)
    typed = type_kernel(front, fdef)
    assert typed.ir is not None, [d.message for d in typed.diagnostics]
    blocks = [b for b in _blocks(typed.ir.body) if any(isinstance(s, ir.Unpack) for s in b)]
    assert len(blocks) == 1  # `o[i] = halved(a[i], 3)`: one call ...
    at = next(k for k, s in enumerate(blocks[0]) if isinstance(s, ir.Unpack))
    unpack, writes = blocks[0][at], blocks[0][at + 1 :]
    assert isinstance(unpack, ir.Unpack) and isinstance(unpack.value, ir.Call)
    assert [type(w).__name__ for w in writes] == ["Write"] * 5  # ... then p.x, p.y, ids[0], ids[1], m
    halved = unpack.value.func
    assert isinstance(halved.ret, TupleTy) and [str(t) for t in halved.ret.elems] == ["f32", "f32", "i32", "i32", "f64"]


def _blocks(body: tuple) -> list[tuple]:
    """Every statement list of a kernel body, nested ones included (not a helper's)."""
    out = [body]
    for s in body:
        for f in ("body", "orelse"):
            inner = getattr(s, f, None)
            if isinstance(inner, tuple):
                out += _blocks(inner)
    return out


def test_ptx_assembles(ptxas_ok: Callable[[str, str], None]) -> None:
    for k in (K.step, K.fields):
        ptxas_ok(k.compile("sm_90").ptx, "sm_90")
