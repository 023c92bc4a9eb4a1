"""`parse_contract`: a kernel's `@launch_contract(...)`, read and validated from its source."""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from anodize.language import messages
from anodize.language.contract import Contract, RequiresSyntaxError, parse_requires
from anodize.language.diagnostics import CheckError, Diagnostic
from anodize.language.vocab import MAX_THREADS_PER_BLOCK

from anodize.language.source import MISSING as _MISSING
from anodize.language.source import SourceInfo, source_info
from anodize.language.source import names_of as _names_of

__all__ = ["parse_contract"]



def parse_contract(kernel: Any) -> Contract | None:
    """The kernel's `@launch_contract`, read from its source; None when it has none.

    Raises CheckError with located `az-contract` diagnostics when it is malformed."""
    from anodize.kernel import Kernel

    fn = kernel.fn if isinstance(kernel, Kernel) else kernel
    spec = kernel.contract_spec if isinstance(kernel, Kernel) else getattr(fn, "__az_contract__", None)
    src = source_info(fn)
    names = _names_of(fn)
    deco = None
    for d in src.fdef.decorator_list:
        if isinstance(d, ast.Call):
            target = d.func
            obj = _static_in(target, names)
            from anodize.kernel import launch_contract

            if obj is launch_contract or (obj is _MISSING and isinstance(target, (ast.Name, ast.Attribute)) and ast.unparse(target).endswith("launch_contract")):
                deco = d
                break
    if deco is None:
        if spec is None:
            return None
        return _contract_from_spec(spec, src, fn)
    diags: list[Diagnostic] = []
    span = src.span
    params = [p.arg for p in src.fdef.args.args]
    kw = {k.arg: k.value for k in deco.keywords if k.arg}
    if deco.args:
        diags.append(messages.contract(span(deco.args[0]), "`launch_contract` takes keyword arguments only"))
    for k_ in deco.keywords:
        if k_.arg not in ("domain", "block", "requires", "min_compute_capability"):
            diags.append(messages.contract(span(k_.value), f"unknown `launch_contract` argument `{k_.arg}`"))
    domain = 0
    if "domain" not in kw:
        diags.append(messages.contract(span(deco), "`launch_contract` needs `domain=1` or `domain=2`"))
    else:
        d = _literal(kw["domain"], names)
        if d not in (1, 2) or isinstance(d, bool):
            diags.append(messages.contract(span(kw["domain"]), f"`domain` must be 1 or 2, found `{ast.unparse(kw['domain'])}`"))
        else:
            domain = d
    block: tuple[int, ...] | None = None
    if "block" in kw and not (isinstance(kw["block"], ast.Constant) and kw["block"].value is None):
        b = _literal(kw["block"], names)
        bt = (b,) if isinstance(b, int) and not isinstance(b, bool) else b
        if not isinstance(bt, tuple) or not 1 <= len(bt) <= 3 or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in bt):
            diags.append(messages.contract(span(kw["block"]), "`block` must be a positive int or a tuple of positive ints"))
        else:
            block = bt
            n = 1
            for x in bt:
                n *= x
            rank = len(bt) if not (len(bt) == 3 and bt[2] == 1) else 2
            if domain and rank != domain:
                diags.append(
                    messages.contract(
                        span(kw["block"]),
                        f"`block` has rank {rank} but `domain={domain}`",
                        help="give `block` one entry per launch dimension, in CUDA order `(x, y)`",
                    )
                )
            if n > MAX_THREADS_PER_BLOCK:
                diags.append(messages.contract(span(kw["block"]), f"`block` has {n} threads; the limit is {MAX_THREADS_PER_BLOCK}"))
    requires = None
    if "requires" in kw:
        lam = kw["requires"]
        if not isinstance(lam, ast.Lambda):
            diags.append(messages.contract(span(lam), "`requires` must be a lambda, e.g. `requires=lambda a, c: len(a) == len(c)`"))
        else:
            try:
                requires = parse_requires(lam, src.text)
                for p, node in zip(requires.params, lam.args.args, strict=True):
                    if p not in params:
                        diags.append(messages.contract(span(node), f"`requires` names `{p}`, which is not a parameter of the kernel"))
            except RequiresSyntaxError as exc:
                diags.append(messages.contract(span(exc.node), exc.message))
    cc = None
    if "min_compute_capability" in kw:
        v = _literal(kw["min_compute_capability"], names)
        if not (isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, int) and x >= 0 for x in v)):
            diags.append(messages.contract(span(kw["min_compute_capability"]), "`min_compute_capability` must be a `(major, minor)` tuple"))
        else:
            cc = v
    if diags:
        raise CheckError(diags) from None
    return Contract(domain, block, requires, cc)


def _static_in(node: ast.expr, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return names.get(node.id, getattr(builtins, node.id, _MISSING))
    if isinstance(node, ast.Attribute):
        base = _static_in(node.value, names)
        return _MISSING if base is _MISSING else getattr(base, node.attr, _MISSING)
    return _MISSING


def _literal(node: ast.expr, names: dict[str, Any]) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e, names) for e in node.elts)
    v = _static_in(node, names)
    return None if v is _MISSING else v


def _contract_from_spec(spec: Any, src: SourceInfo, fn: Callable[..., Any]) -> Contract:
    """A contract applied without decorator syntax (`launch_contract(...)(k)`)."""
    span = src.span(src.fdef)
    diags: list[Diagnostic] = []
    if spec.domain not in (1, 2):
        diags.append(messages.contract(span, f"`domain` must be 1 or 2, found `{spec.domain!r}`"))
    block = spec.block
    if isinstance(block, int):
        block = (block,)
    requires = None
    if spec.requires is not None:
        try:
            lsrc = textwrap.dedent(inspect.getsource(spec.requires))
            lam = next(n for n in ast.walk(ast.parse(lsrc.strip().rstrip(",").strip(), mode="exec")) if isinstance(n, ast.Lambda))
            requires = parse_requires(lam, None)
        except (OSError, TypeError, StopIteration, SyntaxError, RequiresSyntaxError) as exc:
            diags.append(messages.contract(span, f"cannot read the `requires` lambda's source ({exc})"))
    if diags:
        raise CheckError(diags) from None
    return Contract(spec.domain, block, requires, spec.min_compute_capability)
