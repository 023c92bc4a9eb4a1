"""Racy mutants of the v1 features (red-team findings), for tools/mutate_races.py.

Each class makes a kernel race (or diverge at a barrier) on real hardware; the checker must
reject every mutant:

  safe_read_next   after a safe-tier write at the thread's own slot (`buf[w] = v`,
                   `tile[w] = v`), insert a read of the next thread's slot in the same
                   barrier interval: `buf[(w.get() + 1) % N]` (`tile[w.row, (w.col + 1) % N]`),
                   N the smaller of the array's extent and the block's (thread t reads the
                   slot thread t + 1 is writing)
  leader_widen     `if thread.is_block_leader():` -> `... or _mut_parity() == 1:`: the
                   block witness's access runs on many threads of the block
  barrier_leader   a safe-tier `az.syncthreads()` -> `if thread.is_block_leader(): ...`
  grid_stride_exit the first write `c[j] = v` of a grid-stride loop's body is repeated after
                   the loop, where `j` is no index of this thread's (after no iteration it
                   is the value from before the loop, or none: index 0 in every idle thread)
  range_exit       a strided `for j in range(t, n, S):` loop of the unsafe tier gets
                   `j = 0` before it and its first shared write repeated after it (every
                   thread that ran no iteration writes slot 0)
  tile_mixed       a write `out[ij] = v` through a per-thread tile's `t.at(r, s)` is repeated
                   through `thread.index_2d()`: two mappings of one output, so an element
                   has two writers
  slot_one_path    `w = thread.index_in_block()` -> `if _mut_parity() == 1: w = ...`: on the
                   other path `w` holds slot 0 (zeros) in every such thread
  witness_falls_off a helper's last `return <witness>` -> `if _mut_parity() == 1: return ...`:
                   falling off the end gives the zero index to every such thread
  slot_stride      a safe-tier multi-slot write (`s[w + j * BLOCK] = v` in `for j in
                   range(K)`) gets its first constant stride halved (`j * (BLOCK // 2)`,
                   `w.row * (TM // 2) + r`): a thread's slots then overlap another's
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Callable

CLASSES = ("safe_read_next", "leader_widen", "barrier_leader", "grid_stride_exit", "range_exit", "tile_mixed",
           "slot_one_path", "witness_falls_off", "slot_stride")
MARKERS = ("index_in_block", "is_block_leader", "grid_stride", "tile_2d", "range(", "-> Index", "-> az.Index")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _insert_after(src: str, stmt: ast.stmt, text: str) -> str:
    """`text` (one or more lines, unindented) after `stmt`, at its indentation."""
    lines = src.splitlines(keepends=True)
    ind = _indent(lines[stmt.lineno - 1])
    end = stmt.end_lineno  # type: ignore[assignment]
    add = "".join(f"{ind}{t}\n" for t in text.splitlines())
    return "".join(lines[:end]) + add + "".join(lines[end:])


def _insert_before(src: str, stmt: ast.stmt, text: str) -> str:
    lines = src.splitlines(keepends=True)
    ind = _indent(lines[stmt.lineno - 1])
    add = "".join(f"{ind}{t}\n" for t in text.splitlines())
    return "".join(lines[: stmt.lineno - 1]) + add + "".join(lines[stmt.lineno - 1 :])


def _calls(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr


def _bound(fn: ast.FunctionDef, attr: str) -> set[str]:
    """Locals assigned from a call of `...<attr>()`."""
    return {
        t.id
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and _calls(n.value, attr)
        for t in n.targets
        if isinstance(t, ast.Name)
    }


_ELEMS = ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


def _elem(fn: ast.FunctionDef, name: str) -> str | None:
    """The anodize scalar name of shared array `name`'s element type, when it is one."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets) and _calls(n.value, "array"):
            args = n.value.args  # type: ignore[attr-defined]
            short = ast.unparse(args[1]).split(".")[-1] if len(args) > 1 else ""
            return short if short in _ELEMS else None
    return None


def _unsafe_stmts(fn: ast.FunctionDef) -> set[ast.stmt]:
    """Statements inside `with az.unsafe():`."""
    out: set[ast.stmt] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.With) and any(_calls(i.context_expr, "unsafe") for i in n.items):
            out.update(x for x in ast.walk(n) if isinstance(x, ast.stmt) and x is not n)
    return out


def _shared_arrays(fn: ast.FunctionDef) -> dict[str, list[int]]:
    """Static shared arrays with literal shapes: name -> extents."""
    out: dict[str, list[int]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and _calls(n.value, "array"):
            call = n.value
            if not ast.unparse(call.func).endswith("shared.array") or not call.args:  # type: ignore[attr-defined]
                continue
            try:
                shape = ast.literal_eval(call.args[0])  # type: ignore[attr-defined]
            except ValueError:
                continue
            dims = [shape] if isinstance(shape, int) else list(shape) if isinstance(shape, tuple) else []
            if dims and all(isinstance(d, int) and d > 0 for d in dims):
                out[n.targets[0].id] = dims
    return out


def _statements(body: list[ast.stmt]) -> list[tuple[ast.stmt, bool]]:
    """Every statement with whether it is under no `if`/loop (only `with` blocks)."""
    out: list[tuple[ast.stmt, bool]] = []

    def walk(b: list[ast.stmt], top: bool) -> None:
        for s in b:
            out.append((s, top))
            for field in ("body", "orelse"):
                sub = getattr(s, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    walk(sub, top and isinstance(s, ast.With))

    walk(body, True)
    return out


def v1_mutants(src: str, tree: ast.Module, block_of: Callable[[ast.FunctionDef], Any], domain_of: Callable[[ast.FunctionDef], int],
               parity: Callable[[int], str]) -> list[tuple[int, str, str]]:
    """(line, class, source) of every v1 mutant of a module."""
    out: list[tuple[int, str, str]] = []
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.returns is not None and "Index" in ast.unparse(fn.returns):
            last = fn.body[-1] if fn.body else None
            if isinstance(last, ast.Return) and last.value is not None:
                lines = src.splitlines(keepends=True)
                a = last.lineno - 1
                ind = _indent(lines[a])
                text = "".join(lines[:a]) + f"{ind}if _mut_parity() == 1:\n    " + "".join(lines[a:])
                out.append((last.lineno, "witness_falls_off", text + parity(1)))
        if not isinstance(fn, ast.FunctionDef) or not any("kernel" in ast.unparse(d) for d in fn.decorator_list):
            continue
        for s0 in fn.body:
            if isinstance(s0, ast.Assign) and _calls(s0.value, "index_in_block") and _uses_slot(fn, s0):
                lines = src.splitlines(keepends=True)
                a = s0.lineno - 1
                ind = _indent(lines[a])
                text = "".join(lines[:a]) + f"{ind}if _mut_parity() == 1:\n    " + "".join(lines[a:])
                out.append((s0.lineno, "slot_one_path", text + parity(domain_of(fn))))
        block = block_of(fn)
        nthreads = 1
        for b in block or ():
            nthreads *= b
        w1, w2 = _bound(fn, "index_in_block"), _bound(fn, "index_in_block_2d")
        arrays = _shared_arrays(fn)
        unsafe = _unsafe_stmts(fn)
        bws = _bound(fn, "block_witness_1d")
        for s, top in _statements(fn.body):
            # safe_read_next: unconditional own-slot writes of a static array
            if top and isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Subscript):
                t = s.targets[0]
                arr = t.value.id if isinstance(t.value, ast.Name) else None
                dims = arrays.get(arr or "")
                idx = ast.unparse(t.slice)
                if dims and block:
                    if len(dims) == 1 and (idx in w1 or (idx.endswith(".get()") and idx[:-6] in w1)):
                        n = min(dims[0], nthreads)
                        w = idx if idx in w1 else idx[:-6]
                        if n >= 2:
                            out.append((s.lineno, "safe_read_next", _insert_after(src, s, f"_mut_r = {arr}[({w}.get() + 1) % {n}]")))
                    elif len(dims) == 2 and idx in w2:
                        n = min(dims[1], block[0])
                        if n >= 2:
                            out.append((s.lineno, "safe_read_next", _insert_after(src, s, f"_mut_r = {arr}[{idx}.row, ({idx}.col + 1) % {n}]")))
            # barrier_leader: a barrier outside `unsafe` under no branch
            if top and isinstance(s, ast.Expr) and _calls(s.value, "syncthreads"):
                lines = src.splitlines(keepends=True)
                a, b = s.lineno - 1, s.end_lineno  # type: ignore[assignment]
                ind = _indent(lines[a])
                text = "".join(lines[:a]) + f"{ind}if az.thread.is_block_leader():\n    " + "".join(lines[a:b]) + "".join(lines[b:])
                out.append((s.lineno, "barrier_leader", text))
            # leader_widen
            if isinstance(s, ast.If) and _calls(s.test, "is_block_leader") and any(
                isinstance(n, ast.Name) and n.id in bws for n in ast.walk(s)
            ):  # (a block witness's access under it: an atomic there races with nothing)
                text = src.splitlines(keepends=True)
                line = text[s.test.lineno - 1]
                end = s.test.end_col_offset  # type: ignore[attr-defined]
                text[s.test.lineno - 1] = line[:end] + " or _mut_parity() == 1" + line[end:]
                out.append((s.lineno, "leader_widen", "".join(text) + parity(domain_of(fn))))
            # grid_stride_exit
            if isinstance(s, ast.For) and _calls(s.iter, "grid_stride") and isinstance(s.target, ast.Name):
                j = s.target.id
                for b_s in ast.walk(s):
                    if (isinstance(b_s, ast.Assign) and len(b_s.targets) == 1 and isinstance(b_s.targets[0], ast.Subscript)
                            and ast.unparse(b_s.targets[0].slice) == j and not any(
                                isinstance(n, ast.Name) and n.id != j and isinstance(n.ctx, ast.Load) and _loop_local(s, n.id)
                                for n in ast.walk(b_s.value))):
                        out.append((s.lineno, "grid_stride_exit", _insert_after(src, s, ast.unparse(b_s))))
                        break
            # range_exit: `for j in range(<tid...>, n, S)` writing a shared array at j
            if (isinstance(s, ast.For) and s in unsafe and isinstance(s.target, ast.Name) and isinstance(s.iter, ast.Call)
                    and isinstance(s.iter.func, ast.Name) and s.iter.func.id == "range" and len(s.iter.args) == 3):
                j = s.target.id
                for b_s in s.body:
                    if (isinstance(b_s, ast.Assign) and len(b_s.targets) == 1 and isinstance(b_s.targets[0], ast.Subscript)
                            and isinstance(b_s.targets[0].value, ast.Name) and b_s.targets[0].value.id in arrays
                            and ast.unparse(b_s.targets[0].slice) == j):
                        arr = b_s.targets[0].value.id
                        elem = _elem(fn, arr)
                        if elem is None:
                            break
                        text = _insert_before(src, s, f"{j} = 0")
                        moved = ast.parse(text)
                        loop = next(n for n in ast.walk(moved) if isinstance(n, ast.For) and n.lineno == s.lineno + 1)
                        out.append((s.lineno, "range_exit", _insert_after(text, loop, f"{arr}[{j}] = az.{elem}(az.thread.tid_x())")))
                        break
        out.extend(_slot_stride(src, fn, unsafe, w1 | w2))
        # tile_mixed: a write through a per-thread tile's t.at(..), repeated through index_2d
        tiles = _bound(fn, "tile_2d")
        if tiles:
            ats = _bound(fn, "at")
            for s, _ in _statements(fn.body):
                if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Subscript)
                        and ast.unparse(s.targets[0].slice) in ats):
                    t = s.targets[0]
                    text = _insert_after(src, s, f"{ast.unparse(t.value)}[az.thread.index_2d()] = {ast.unparse(s.value)}")
                    out.append((s.lineno, "tile_mixed", text))
                    break
    return out


def _slot_stride(src: str, fn: ast.FunctionDef, unsafe: set[ast.stmt], witnesses: set[str]) -> list[tuple[int, str, str]]:
    """slot_stride: the first `X * C` (or `C * X`) of a safe multi-slot write's index, X reading a
    loop variable or a block-local witness and C a constant name or literal of at least 2, becomes
    `X * (C // 2)`."""
    loops = {f.target.id for f in ast.walk(fn) if isinstance(f, ast.For) and isinstance(f.target, ast.Name)
             and isinstance(f.iter, ast.Call) and ast.unparse(f.iter.func) == "range"}
    arrays = {n.targets[0].id for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
              and isinstance(n.targets[0], ast.Name) and ast.unparse(n.value).startswith("az.shared.array(")}
    out: list[tuple[int, str, str]] = []
    for st in ast.walk(fn):
        target = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else st.target if isinstance(st, ast.AugAssign) else None
        if not isinstance(target, ast.Subscript) or st in unsafe or not isinstance(target.value, ast.Name) or target.value.id not in arrays:
            continue
        names = {n.id for n in ast.walk(target.slice) if isinstance(n, ast.Name)}
        if not names & loops:
            continue
        for m in ast.walk(target.slice):
            if not (isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mult)):
                continue
            for x, c in ((m.left, m.right), (m.right, m.left)):
                varying = {n.id for n in ast.walk(x) if isinstance(n, ast.Name)} & (loops | witnesses)
                const = (isinstance(c, ast.Constant) and isinstance(c.value, int) and c.value >= 2) or (isinstance(c, ast.Name) and c.id.isupper())
                if varying and const and c.lineno == c.end_lineno:
                    lines = src.splitlines(keepends=True)
                    line = lines[c.lineno - 1]
                    lines[c.lineno - 1] = line[: c.col_offset] + f"({ast.unparse(c)} // 2)" + line[c.end_col_offset :]  # type: ignore[operator]
                    out.append((st.lineno, "slot_stride", "".join(lines)))
                    break
            else:
                continue
            break
    return out


def _uses_slot(fn: ast.FunctionDef, bind: ast.Assign) -> bool:
    """Is the block-local witness bound by `bind` written through (`buf[w] = v`) in `fn`?"""
    names = {t.id for t in bind.targets if isinstance(t, ast.Name)}
    return any(
        isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.slice, ast.Name) and n.slice.id in names
        for n in ast.walk(fn)
    )


def _loop_local(loop: ast.For, name: str) -> bool:
    """Is `name` assigned inside `loop` (so not meaningful after it)?"""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(loop))


def v1_paths(root: Path) -> list[Path]:
    paths = sorted((root / "examples").glob("*.py")) + sorted((root / "fixtures" / "accept").glob("*.py"))
    return [p for p in paths if any(m in p.read_text() for m in MARKERS)]


__all__ = ["CLASSES", "v1_mutants", "v1_paths"]
