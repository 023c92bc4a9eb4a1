"""The launch contract's schema (anodize/language/contract_schema.py `FIELDS`) is the one
declaration of its fields: the decorator's keywords, the source reading, the disk-cache codec,
the mypy plugin's launch-site facts and a foreign kernel's contract derive from it.

`test_a_new_field_reaches_every_consumer` is the dry run of adding a field (docs/architecture.md,
"How to add a contract field"): it adds one to `FIELDS` and sees every consumer carry it."""

from __future__ import annotations

import ast
import dataclasses
import json
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

import pytest

import anodize as az
import anodize.foreign  # (imported before a test patches the schema: it must read `FIELDS` at call time)
from anodize.language import contract_schema as schema
from anodize.language.contract import Contract
from anodize.language.front import front_for_source

# a kernel that states every field (a new field is added here too: the round trip below fails
# on a field this source leaves unset)
EVERY_FIELD = '''
import anodize as az
import anodize.foreign  # (imported before a test patches the schema: it must read `FIELDS` at call time)
from anodize import DisjointSlice, Slice, f32, i32, thread

@az.launch_contract(domain=1, block=128, requires=lambda a, c, n: len(a) == len(c) and n <= len(a),
                    shared_mem=lambda n: 4 * n, min_compute_capability=(8, 0), min_blocks_per_sm=4,
                    outputs=lambda a, n: {"c": ((len(a),), f32)}, cooperative=True)
@az.kernel
def k(a: Slice[f32], c: DisjointSlice[f32], n: i32) -> None:
    i = thread.index_1d()
    if i in c and i in a:
        c[i] = a[i]
'''


def _read(source: str, name: str = "k") -> tuple[Any, list[Any]]:
    front = front_for_source(textwrap.dedent(source), "<schema-test>")
    fdef = next(f for q, f in front.functions() if q == name)
    return schema.read_contract(front, fdef)


def test_every_field_round_trips_through_the_codec() -> None:
    contract, diags = _read(EVERY_FIELD)
    assert not diags and contract is not None
    unset = [f.name for f in schema.FIELDS if getattr(contract, f.name) is None]
    assert not unset, f"EVERY_FIELD leaves {unset} unset: state them there"
    text = json.dumps(schema.encode_contract(contract))  # JSON: what a cache entry or a manifest holds
    assert schema.decode_contract(json.loads(text)) == contract
    assert json.loads(text)["min_blocks_per_sm"] == 4  # (once dropped by runtime/artifact_store.py)
    assert schema.decode_contract(None) is None and schema.encode_contract(None) is None


def test_an_older_entry_without_a_field_decodes_it_as_none() -> None:
    contract, _ = _read(EVERY_FIELD)
    d = schema.encode_contract(contract)
    del d["min_blocks_per_sm"]
    assert schema.decode_contract(d) == dataclasses.replace(contract, min_blocks_per_sm=None)


def test_the_fields_are_the_contracts_attributes_and_the_decorators_keywords() -> None:
    assert set(schema.FIELD_NAMES) == {f.name for f in dataclasses.fields(Contract)}
    hints = typing.get_type_hints(schema.LaunchContractArgs, include_extras=True)
    assert tuple(hints) == schema.FIELD_NAMES
    # each keyword's type is the field's `annotation`, required when the field is
    raw = schema.LaunchContractArgs.__annotations__  # (strings: the module has postponed annotations)
    for f in schema.FIELDS:
        text = getattr(raw[f.name], "__forward_arg__", raw[f.name])
        assert text.startswith("Required[" if f.missing is not None else "NotRequired["), f.name
        inner = text.removeprefix("Required[").removeprefix("NotRequired[").removesuffix("]")
        assert inner == f.annotation, f.name


def test_the_unknown_keyword_help_lists_the_fields() -> None:
    _, diags = _read(EVERY_FIELD.replace("min_blocks_per_sm=4", "min_blocks_per_sm=4, max_regs=1"))
    assert len(diags) == 1
    shown = diags[0].help or ""
    assert all(f"`{name}`" in shown for name in schema.FIELD_NAMES), shown


def test_a_cache_entry_of_a_kernel_with_min_blocks_per_sm_is_a_hit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The codec once dropped `min_blocks_per_sm`: every load of such a kernel's entry failed its
    contract comparison and was evicted (a silent miss on every compile)."""
    pytest.importorskip("llvmlite")
    from anodize.kernel import Kernel
    from anodize.runtime import artifact_store
    from anodize.runtime.compile import source_hash

    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    mod_path = tmp_path / "schema_blocks.py"
    mod_path.write_text(textwrap.dedent(EVERY_FIELD))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("schema_blocks", None)
    import schema_blocks  # type: ignore[import-not-found]

    first = schema_blocks.k.compile("sm_90")
    assert first.contract is not None and first.contract.min_blocks_per_sm == 4
    fresh = Kernel(schema_blocks.k.fn, schema_blocks.k.contract_spec)
    options = {"bounds_checks": True, "line_info": False, "opt": 3, "tc_gemm": ""}
    assert source_hash(fresh)
    loaded = artifact_store.load(artifact_store.cache_inputs(fresh, "sm_90", options), fresh)
    assert loaded is not None and loaded.from_cache and loaded.contract == first.contract


# ---- the dry run: a field added to the schema reaches every consumer ---------------------------


def _read_max_registers(r: schema.Reading, node: ast.expr) -> int | None:
    v = r.front.symbols.constant(node)
    if v is None or type(v[0]) is not int or not 1 <= v[0] <= 255:
        say = r.say
        say(node, "min-blocks-per-sm-must", "write-min-blocks-per-sm")  # (a real field gets its own texts)
        return None
    return int(v[0])


NEW = schema.ContractField("max_registers", "int | None", _read_max_registers, schema._int, schema._int,
                           codegen=True, mypy="int")


@pytest.fixture()
def new_field(monkeypatch: pytest.MonkeyPatch) -> type[Contract]:
    """`FIELDS` with `max_registers` added, and `Contract` with its attribute (what adding a field
    writes: its `FIELDS` entry, its `LaunchContractArgs` line and its `Contract` attribute)."""
    grown = dataclasses.make_dataclass("Contract", [("max_registers", "int | None", dataclasses.field(default=None))],
                                       bases=(Contract,), frozen=True)
    monkeypatch.setattr(schema, "Contract", grown)
    monkeypatch.setattr(schema, "FIELDS", (*schema.FIELDS, NEW))
    monkeypatch.setattr(schema, "FIELD_NAMES", (*schema.FIELD_NAMES, NEW.name))
    return grown


SOURCE_NEW = '''
import anodize as az
import anodize.foreign  # (imported before a test patches the schema: it must read `FIELDS` at call time)
from anodize import DisjointSlice, f32, thread

@az.launch_contract(domain=1, block=256, max_registers=REGS)
@az.kernel
def k(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = 1.0
'''


def test_a_new_field_reaches_every_consumer(new_field: type[Contract]) -> None:
    # the source reading: read, validated, in the contract
    contract, diags = _read(SOURCE_NEW.replace("REGS", "64"))
    assert not diags and isinstance(contract, new_field) and contract.max_registers == 64  # type: ignore[attr-defined]
    _, diags = _read(SOURCE_NEW.replace("REGS", "1000"))
    assert [d.code for d in diags] == ["az-contract"]
    # the help of a misspelt keyword offers it
    _, diags = _read(SOURCE_NEW.replace("REGS", "64").replace("block=256", "blok=256"))
    assert "`max_registers`" in (diags[0].help or "")
    # the disk-cache codec carries it, and a cached artifact is taken only under the same value
    back = schema.decode_contract(json.loads(json.dumps(schema.encode_contract(contract))))
    assert back == contract and back.max_registers == 64  # type: ignore[union-attr]
    other = dataclasses.replace(contract, max_registers=32)  # type: ignore[type-var]
    assert schema.codegen_view(other) != schema.codegen_view(contract)
    # the decorator takes it (its keywords are `LaunchContractArgs`: the type checker's copy)
    fn = az.launch_contract(domain=1, block=256, max_registers=64)(lambda c: None)  # type: ignore[call-arg]
    assert fn.__az_contract__.max_registers == 64
    # a foreign kernel's contract refuses a field with no live reading
    from anodize.foreign import _contract as foreign_contract
    from anodize.language.errors import ArgumentError

    with pytest.raises(ArgumentError, match="max_registers"):
        foreign_contract("k", fn.__az_contract__, ())


def test_a_new_field_reaches_the_mypy_plugins_facts(new_field: type[Contract]) -> None:
    pytest.importorskip("mypy")
    from mypy.nodes import ARG_NAMED, Block, CallExpr, Decorator, FuncDef, IntExpr, NameExpr, Var

    from anodize.checker.mypy import kernels
    from anodize.checker.mypy.fullnames import CONTRACT_FULLNAME

    callee = NameExpr("launch_contract")
    callee.fullname = CONTRACT_FULLNAME
    call = CallExpr(callee, [IntExpr(1), IntExpr(64)], [ARG_NAMED, ARG_NAMED], ["domain", "max_registers"])
    dec = Decorator(FuncDef("k", [], Block([])), [call], Var("k"))
    facts = kernels.contract_of(dec, "<none>")
    assert facts == {"domain": 1, "block": None, "requires": None, "max_registers": 64}
