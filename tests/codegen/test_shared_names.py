"""A helper's shared array inlined beside a kernel array of the spelling its renaming had once
sanitised to (`s.1` and the user's `s_1`): the GPU compile gave llvmlite's
`DuplicatedNameError: __az_shared_s_1`.  Every array now has its own symbol by construction
(`$` in the renamed ones: no Python name holds it)."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

from anodize.codegen.driver import compile_gpu

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "accept" / "helper_shared_names.py"


def test_a_helpers_shared_array_gets_its_own_symbol(ptxas_ok: Callable[[str, str], None]) -> None:
    spec = importlib.util.spec_from_file_location("fixture_shared_names", FIXTURE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
        ck = compile_gpu(mod.names)
    finally:
        sys.modules.pop(spec.name, None)
    decls = re.findall(r"\.shared \.align 16 \.b8 (\S+)\[", ck.ptx)
    assert sorted(decls) == sorted(set(decls)) and len(decls) == 3, decls
    assert "__az_shared_s_1" in decls and "__az_shared_s" in decls
    ptxas_ok(ck.ptx, ck.arch)
