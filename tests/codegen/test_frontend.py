"""The frontend: typed IR, located diagnostics, contracts."""

from __future__ import annotations

import ast
from pathlib import Path

import cg_bad as B
import cg_future as F
import cg_kernels as K
import numpy as np
import pytest
from cg_helpers import run_cpu

from anodize.language.diagnostics import CheckError, Diagnostic
from anodize.language import ir
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.language.typer import build_ir, parse_contract
from anodize.language.types import F32, F64, I64, WitnessTy

BAD = Path(B.__file__)


def line(tag: str, path: Path = BAD) -> int:
    for n, text in enumerate(path.read_text().splitlines(), 1):
        if f"# LINE:{tag}" in text:
            return n
    raise AssertionError(tag)


def col(tag: str, needle: str, path: Path = BAD) -> int:
    return path.read_text().splitlines()[line(tag, path) - 1].index(needle)


def errors(k: object, *, contract: bool = False) -> list[Diagnostic]:
    with pytest.raises(CheckError) as ei:
        if contract:
            parse_contract(k)
        else:
            build_ir(k)
    text = str(ei.value)
    assert "frontend.py" not in text and "Traceback" not in text  # no compiler frames
    return ei.value.diagnostics


# ---- typed IR -------------------------------------------------------------------------------


def test_vecadd_ir_shape() -> None:
    k = build_ir(K.vecadd)
    assert [p.name for p in k.params] == ["a", "b", "c"]
    assert k.domain == 1 and k.contract is not None and k.contract.block == (256,)
    assert dict(k.locals) == {"i": WitnessTy(1)}
    assign, guard = k.body
    assert isinstance(assign, ir.Assign) and isinstance(assign.value, ir.MakeWitness)
    assert assign.value.site == -1  # a contract: no device rank check
    assert isinstance(guard, ir.If) and isinstance(guard.cond, ir.Contains)
    (write,) = guard.body
    assert isinstance(write, ir.Write) and not write.checked
    add = write.value
    assert isinstance(add, ir.BinOp) and add.ty == F32
    assert all(isinstance(r, ir.Read) and not r.checked for r in (add.left, add.right))
    assert k.fault_sites == ()


def test_weak_literals_keep_the_typed_operand() -> None:
    k = build_ir(K.saxpy)
    write = k.body[1].body[0]  # type: ignore[attr-defined]
    assert write.value.ty == F32
    k2 = build_ir(K.math64)
    assert all(t in (F64, WitnessTy(1)) for _, t in k2.locals)


def test_string_annotations_and_annotated_locals() -> None:
    k = build_ir(F.halve)
    assert [p.scalar.name for p in k.params] == ["f32", "f32", "i32"]
    assert dict(k.locals)["acc"] == F32
    assert dict(k.locals)["j"].name == "i32"  # range(k) with k: i32
    ck = compile_cpu(F.halve)
    x = np.random.default_rng(1).random(50, dtype=np.float32)
    y = np.zeros(50, np.float32)
    assert run_cpu(ck, (1,), (128,), x, y, np.int32(3)).count == 0
    np.testing.assert_allclose(y, x * np.float32(0.5) * 3, rtol=1e-6)


def test_indented_kernel_keeps_real_columns() -> None:
    k = build_ir(F.Holder.indented)
    write = k.body[1].body[0]  # type: ignore[attr-defined]
    path = Path(F.__file__)
    assert write.span.path == str(path)
    assert write.span.line == line("indented", path)
    assert write.span.col == col("indented", "y[i]", path)


def test_int_literal_defaults_to_i64() -> None:
    k = build_ir(K.control)
    assert dict(k.locals)["r"] == I64


# ---- az-unsupported -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kern", "tag", "needle", "construct"),
    [
        (B.uses_lambda, "lambda", "lambda", "`lambda`"),
        (B.uses_listcomp, "listcomp", "[v for", "a list comprehension"),
        (B.uses_print, "print", "c)", "printing a `DisjointSlice[f32]`"),
        (B.uses_slicing, "slicing", "1:3", "slicing with `:`"),
        (B.uses_kwargs, "kwargs", "key=None", "keyword arguments in a kernel call"),
    ],
)
def test_unsupported_construct_is_named_and_located(kern: object, tag: str, needle: str, construct: str) -> None:
    (d,) = errors(kern)
    assert d.code == "az-unsupported"
    assert d.message == f"{construct} is not supported in a kernel"
    assert (d.span.path, d.span.line, d.span.col) == (str(BAD), line(tag), col(tag, needle))


def test_errors_are_collected_across_statements() -> None:
    ds = errors(B.two_errors)
    assert [d.code for d in ds] == ["az-unsupported", "az-unsupported"]
    assert "`try`" in ds[0].message and ds[0].span.line == line("try")
    assert "a string" in ds[1].message and ds[1].span.line == line("string")


def test_error_inside_a_helper_points_into_the_helper() -> None:
    (d,) = errors(B.calls_bad_helper)
    assert d.code == "az-unsupported" and "`lambda`" in d.message
    assert d.span.line == line("helper-lambda")


@pytest.mark.parametrize(
    ("kern", "code", "tag"),
    [
        (B.writes_input, "az-shared-write", "shared-write"),
        (B.int_index_on_disjoint, "az-disjoint-index", "disjoint"),
        (B.raw_id_outside_unsafe, "az-unsafe", "unsafe"),
        (B.narrowing, "az-type", "narrowing"),
        (B.undefined_name, "az-type", "undefined"),
        (B.wrong_domain_witness, "az-index-domain", "witness-domain"),
    ],
)
def test_language_rules_are_located(kern: object, code: str, tag: str) -> None:
    ds = errors(kern)
    assert ds[0].code == code
    assert ds[0].span.line == line(tag)


def test_narrowing_error_suggests_a_cast() -> None:
    (d,) = errors(B.narrowing)
    assert "`f32`" in d.message and "`i32`" in d.message and d.help and "i32(" in d.help


# ---- contracts ----------------------------------------------------------------------------


def test_contract_is_read_from_source() -> None:
    c = parse_contract(K.scale2d)
    assert c is not None and c.domain == 2 and c.block == (16, 8)
    assert c.requires is not None and len(c.requires.relations) == 2
    assert parse_contract(K.vecadd_unguarded) is None
    c = parse_contract(K.saxpy)
    assert c is not None and c.block == (K.BLOCK,)  # a module constant


@pytest.mark.parametrize(
    ("kern", "tag", "needle", "words"),
    [
        (B.bad_domain, "domain", "4", "`domain` must be 1, 2 or 3"),
        (B.block_rank_mismatch, "rank", "256", "rank 1 but `domain=2`"),
        (B.too_many_threads, "toomany", "(64, 32)", "2048 threads"),
        (B.requires_unknown_param, "requires", "zz", "`zz`"),
        (B.requires_or, "or", "len(a) == len(c) or", "`or`"),
    ],
)
def test_malformed_contracts_are_located(kern: object, tag: str, needle: str, words: str) -> None:
    ds = errors(kern, contract=True)
    assert ds[0].code == "az-contract"
    assert words in ds[0].message
    assert (ds[0].span.line, ds[0].span.col) == (line(tag), col(tag, needle))


def test_bad_contract_also_stops_compilation() -> None:
    with pytest.raises(CheckError):
        compile_gpu(B.bad_domain, ptxas=False)


def test_every_fault_site_is_in_the_users_file() -> None:
    k = build_ir(K.vecadd_unguarded)
    src = Path(K.__file__).read_text().splitlines()
    for s in k.fault_sites:
        assert s.path == K.__file__
        text = src[s.line - 1]
        assert ("index_1d" in text) if s.kind == "rank" else ("a[i] + b[i]" in text)
    tree = ast.parse(Path(K.__file__).read_text())
    assert tree  # the file the sites point into parses


def test_contract_stacked_below_kernel() -> None:
    c = parse_contract(K.contract_below_kernel)
    assert c is not None and c.block == (32,)
    assert compile_gpu(K.contract_below_kernel, ptxas=False).bounds_checks == 0
