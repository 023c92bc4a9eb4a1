"""The debug device's interpreter: one GPU thread of a kernel, evaluated from the typed IR.

`Thread(run, block, ids).run_kernel()` executes the kernel body for one GPU thread,
with one `exec_<Stmt>` / `eval_<Expr>` method per IR node (the nodes of
`anodize/language/ir.py`, the ones `codegen/llvm/lower.py` lowers).  Scalars follow
`ops.py` (the lowering's integer and float semantics).  Every slice, shared
array and table access is bounds-checked, whatever the compiler proved (`checked`
is ignored), and every access of an output slice or a shared array is checked for a
race by the launch's `Run` (codegen/debug/run.py), which also owns the memory, the
fault record, the block's barrier and warp exchanges, and `breakpoint()`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from anodize.language import ir
from anodize.language.halfbits import round_half
from anodize.language.types import I64, LocalArrayTy, ScalarTy, SliceTy, TupleTy, WitnessTy

from . import ops
from .collectives import collective
from .thread_tiles import eval_make_tile, eval_tile_at, exec_tile_move

if TYPE_CHECKING:
    from .run import BlockCtx, Run

_BREAK = object()
_CONTINUE = object()


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


class Frame:
    __slots__ = ("vars", "types", "slices")

    def __init__(self) -> None:
        self.vars: dict[str, Any] = {}
        self.types: dict[str, Any] = {}
        self.slices: dict[str, Any] = {}  # name -> run.Mem (a kernel parameter's memory)


class Thread:
    """One GPU thread: its ids, its frames, and the evaluator."""

    def __init__(self, run: Run, block: BlockCtx, tid: tuple[int, int, int]):
        self.run = run
        self.block = block
        self.tid = tid
        self.ctaid = block.ctaid
        bx, by, _ = run.block_dim
        self.linear = tid[0] + bx * (tid[1] + by * tid[2])  # within the block
        self.gid = block.linear * run.threads_per_block + self.linear  # unique in the grid
        self.lane = self.linear % 32
        self.frame = Frame()
        self.ev = _EVAL
        self.ex = _EXEC

    # ---- entry --------------------------------------------------------------------------
    def run_kernel(self) -> None:
        k = self.run.k
        f = self.frame
        for p in k.params:
            if p.slice_kind is not None:
                f.slices[p.name] = self.run.slices[p.name]
            else:
                f.vars[p.name] = self.run.scalars[p.name]
                f.types[p.name] = k.param_types[p.name]
        for name, ty in k.locals:
            f.vars[name] = ops.zero(ty)
            f.types[name] = ty
        try:
            self.body(k.body)
        except _Return:
            pass

    def body(self, stmts: tuple[ir.Stmt, ...]) -> Any:
        ex = self.ex
        for s in stmts:
            out = ex[type(s)](self, s)
            if out is not None:
                return out
        return None

    def eval(self, e: ir.Expr) -> Any:
        return self.ev[type(e)](self, e)

    # ---- statements ---------------------------------------------------------------------
    def exec_Assign(self, s: ir.Assign) -> None:
        f = self.frame
        f.vars[s.name] = ops.conv(self.eval(s.value), s.value.ty, f.types[s.name])

    def exec_ExprStmt(self, s: ir.ExprStmt) -> None:
        self.eval(s.value)

    def exec_If(self, s: ir.If) -> Any:
        return self.body(s.body if self.eval(s.cond) else s.orelse)

    def exec_While(self, s: ir.While) -> Any:
        while self.eval(s.cond):
            out = self.body(s.body)
            if out is _BREAK:
                break
            if out is not None and out is not _CONTINUE:
                return out
        return None

    def exec_ForRange(self, s: ir.ForRange) -> Any:
        ty = self.frame.types[s.var]
        start = ops.conv(self.eval(s.start), s.start.ty, ty)
        stop = ops.conv(self.eval(s.stop), s.stop.ty, ty)
        step = ops.conv(self.eval(s.step), s.step.ty, ty)
        pos = step > 0 or not ty.signed
        if step == 0 or not (start < stop if pos else start > stop):
            return None
        mask = (1 << ty.bits) - 1
        mag = (step if pos else -step) & mask
        cur = start
        while True:
            self.frame.vars[s.var] = cur
            out = self.body(s.body)
            if out is _BREAK:
                return None
            if out is not None and out is not _CONTINUE:
                return out
            diff = ((stop - cur) if pos else (cur - stop)) & mask  # the lowering's overflow-safe exit
            if diff <= mag:
                return None
            cur = ops.wrap(cur + step, ty)

    def exec_GridStride(self, s: ir.GridStride) -> Any:
        first = self.witness(1, s.site)
        stride = self.run.grid[0] * self.run.block_dim[0]
        n = self.frame.slices[s.slice.name].dims[0]
        cur = first
        while 0 <= cur < n:
            self.frame.vars[s.var] = cur
            out = self.body(s.body)
            if out is _BREAK:
                return None
            if out is not None and out is not _CONTINUE:
                return out
            cur = ops.wrap(cur + stride, I64)
        return None

    def exec_Break(self, s: ir.Break) -> Any:
        return _BREAK

    def exec_Continue(self, s: ir.Continue) -> Any:
        return _CONTINUE

    def exec_Return(self, s: ir.Return) -> Any:
        raise _Return(None if s.value is None else self.eval(s.value))

    def exec_Barrier(self, s: ir.Barrier) -> None:
        if s.grid:  # az.grid.sync(): Run.run runs every block of such a grid at once
            self.block.grid_barrier()
        else:
            self.block.barrier()

    def exec_Fence(self, s: ir.Fence) -> None:
        if s.kind == "warp_sync" and self.block.state is not None:
            self.block.exchange(self.linear, 0)  # a rendezvous of the warp's live lanes

    def exec_SharedDecl(self, s: ir.SharedDecl) -> None:
        self.block.shared_array(s.name, s.ty)

    def exec_Breakpoint(self, s: ir.Breakpoint) -> None:
        self.run.breakpoint(self, s)

    def exec_Print(self, s: Any) -> None:
        """`print(...)` (ir.Print, where the language has it): the CPU backend's text, one write per line."""
        out = []
        for p in s.parts:
            if isinstance(p, str):
                out.append(p.replace("\0", "\\0"))
                continue
            v = self.eval(p)
            out.append(("True" if v else "False") if p.ty.is_bool else ("%g" % v) if p.ty.is_float else str(v))
        sys.stdout.write(" ".join(out) + "\n")

    def exec_Assert(self, s: Any) -> None:
        """`assert cond, "message"` (ir.Assert): a false `cond` records the assert's fault; the thread goes on."""
        if not self.eval(s.cond):
            self.run.fault(s.site, 0, 0)

    def exec_Write(self, s: ir.Write) -> None:
        mem = self.frame.slices[s.slice.name]
        value = self.eval(s.value)
        idx = self.index(s.index)
        flat = self.bounds(mem.dims, idx, s, "write", mem.name)
        if flat is not None:
            self.run.track(self, mem, flat, True, s)
            if mem.record:
                mem.store_field(flat, s.offset, s.value.ty, value)  # type: ignore[arg-type]
            else:
                mem.store(flat, value)

    def exec_SharedWrite(self, s: ir.SharedWrite) -> None:
        value = self.eval(s.value)
        mem = self.block.shared_array(s.array.name, s.array.ty)
        flat = self.bounds(mem.dims, self.index(s.index), s, "write", mem.name)
        if flat is not None:
            self.run.track(self, mem, flat, True, s)
            mem.store(flat, value)

    # ---- bounds -------------------------------------------------------------------------
    def index(self, index: tuple[ir.Expr, ...]) -> list[int]:
        if len(index) == 1:
            e = index[0]
            if isinstance(e.ty, WitnessTy):
                w = self.eval(e)
                return list(w) if e.ty.rank >= 2 else [w]
        return [ops.conv(self.eval(e), e.ty, I64) for e in index]

    def bounds(self, dims: tuple[int, ...], idx: list[int], node: Any, kind: str, name: str) -> int | None:
        """The flat element index, or None after recording a fault (at the node's own site, or
        at a site the debug device adds for an access the compiler proved in range)."""
        flat = 0
        for i, d in zip(idx, dims, strict=True):  # row-major; a fault names the outermost bad axis
            if not 0 <= i < d:
                self.run.fault(self.run.site_for(node, kind, name), i, d)
                return None
            flat = flat * d + i
        return flat

    # ---- expressions --------------------------------------------------------------------
    def eval_Const(self, e: ir.Const) -> Any:
        return ops.const(e.value, e.ty)

    def eval_Local(self, e: ir.Local) -> Any:
        return self.frame.vars[e.name]

    def eval_Cast(self, e: ir.Cast) -> Any:
        return ops.conv(self.eval(e.value), e.value.ty, e.ty)

    def eval_Bitcast(self, e: ir.Bitcast) -> Any:
        return ops.bitcast(self.eval(e.value), e.value.ty, e.ty)  # type: ignore[arg-type]

    def eval_Len(self, e: ir.Len) -> Any:
        return self.frame.slices[e.slice.name].dims[e.axis]

    def eval_Read(self, e: ir.Read) -> Any:
        mem = self.frame.slices[e.slice.name]
        flat = self.bounds(mem.dims, self.index(e.index), e, "read", mem.name)
        if flat is None:
            return ops.zero(e.ty)
        self.run.track(self, mem, flat, False, e)
        return mem.load_field(flat, e.offset, e.ty) if mem.record else mem.load(flat)

    def eval_SharedRead(self, e: ir.SharedRead) -> Any:
        mem = self.block.shared_array(e.array.name, e.array.ty)
        flat = self.bounds(mem.dims, self.index(e.index), e, "read", mem.name)
        if flat is None:
            return ops.zero(e.ty)
        self.run.track(self, mem, flat, False, e)
        return mem.load(flat)

    def eval_TableRead(self, e: ir.TableRead) -> Any:
        flat = self.bounds((len(e.values),), self.index(e.index), e, "read", f"table {e.table}")
        if flat is None:
            return ops.zero(e.ty)
        return ops.const(e.values[flat], e.ty)

    def witness(self, rank: int, site: int) -> Any:
        run = self.run
        (tx, ty_, tz), (cx, cy, cz), (bx, by, bz_) = self.tid, self.ctaid, run.block_dim
        x = cx * bx + tx
        v: Any = x if rank == 1 else (cy * by + ty_, x) if rank == 2 else (cz * bz_ + tz, cy * by + ty_, x)
        if site < 0:
            return v
        (gx, gy, gz), (_, _, bz) = run.grid, run.block_dim
        used_y = gy != 1 or by != 1
        used_z = gz != 1 or bz != 1
        ok = run.launch_rank == rank and (rank >= 2 or not used_y) and (rank >= 3 or not used_z)
        if ok:
            return v
        dims = run.launch_rank
        if used_y and dims < 2:
            dims = 2
        if used_z:
            dims = 3
        run.fault(site, dims, rank)
        return -1 if rank == 1 else (-1,) * rank  # poisoned: admits no access

    def eval_MakeWitness(self, e: ir.MakeWitness) -> Any:
        if e.ty.tile is not None:  # thread.tile_2d(...)
            return eval_make_tile(self, e)
        if getattr(e.ty, "local", False):  # thread.index_in_block(), index_in_block_2d()
            (tx, ty_, tz), (bx, by, bz_) = self.tid, self.run.block_dim
            if e.rank == 1:
                return tx + bx * (ty_ + by * tz)
            if e.site >= 0 and bz_ != 1:
                self.run.fault(e.site, bz_, 1)
                return (-1, -1)  # poisoned: admits no access
            return (ty_, tx)
        if getattr(e.ty, "block", False):  # this block's witness: its x index in a 1-D grid
            run = self.run
            if e.site >= 0 and (run.grid[1] != 1 or run.grid[2] != 1):
                run.fault(e.site, 2 if run.grid[2] == 1 else 3, 1)
                return -1  # poisoned: admits no access
            return self.ctaid[0]
        return self.witness(e.rank, e.site)

    def eval_Collective(self, e: ir.Collective) -> Any:
        return collective(self, e)

    def eval_TileAt(self, e: ir.TileAt) -> Any:
        return eval_tile_at(self, e)

    def eval_WitnessPart(self, e: ir.WitnessPart) -> Any:
        w = self.eval(e.witness)
        if e.part == "get":
            return w
        parts = ("layer", "row", "col")[3 - len(w):]
        return w[parts.index(e.part)]

    def eval_Contains(self, e: ir.Contains) -> Any:
        dims = self.frame.slices[e.slice.name].dims
        w = self.eval(e.witness)
        if len(dims) == 1:
            return 0 <= w < dims[0]
        return all(0 <= i < d for i, d in zip(w, dims, strict=True))

    def eval_Atomic(self, e: ir.Atomic) -> Any:
        """Every atomic operation (add, sub, min, max, exchange, and, or, xor, compare_exchange,
        load, store: `value` is None for a load, `expected` set for a compare_exchange)."""
        mem = self.frame.slices[e.slice.name]
        idx = ops.conv(self.eval(e.index), e.index.ty, I64)
        expected_e = getattr(e, "expected", None)
        expected = self.eval(expected_e) if expected_e is not None else None
        val = self.eval(e.value) if e.value is not None else None
        flat = self.bounds(mem.dims, [idx], e, "atomic", mem.name)
        if flat is None:
            return ops.zero(mem.elem) if e.op != "store" else None
        return self.run.atomic(mem, flat, e.op, val, mem.elem, expected)

    def eval_SharedAtomic(self, e: ir.SharedAtomic) -> Any:
        """An atomic on a block-shared atomic array (`az.shared.atomic_array`)."""
        mem = self.block.shared_array(e.array.name, e.array.ty)
        expected = self.eval(e.expected) if e.expected is not None else None
        val = self.eval(e.value) if e.value is not None else None
        flat = self.bounds(mem.dims, self.index(e.index), e, "atomic", mem.name)
        if flat is None:
            return ops.zero(mem.elem) if e.op != "store" else None
        return self.run.atomic(mem, flat, e.op, val, mem.elem, expected)

    def eval_RawId(self, e: ir.RawId) -> Any:
        if e.reg == "laneid":
            return ops.wrap(self.lane, e.ty)
        if e.reg == "dynamic_smem_size":
            return ops.wrap(self.run.dynamic_shared, e.ty)
        axis = "xyz".index(e.axis)
        src = {"tid": self.tid, "ctaid": self.ctaid, "ntid": self.run.block_dim, "nctaid": self.run.grid}[e.reg]
        return ops.wrap(src[axis], e.ty)

    def eval_MathCall(self, e: ir.MathCall) -> Any:
        args = [self.eval(a) for a in e.args]
        x_ty = e.args[0].ty
        assert isinstance(x_ty, ScalarTy)
        return ops.math_call(e.name, args, x_ty, [a.ty for a in e.args])  # type: ignore[misc]

    def eval_WarpOp(self, e: ir.WarpOp) -> Any:
        args = [self.eval(a) for a in e.args]
        snap = self.block.exchange(self.linear, args[0])
        lane = self.lane
        op = e.op
        if op == "ballot":
            return ops.wrap(sum(1 << ln for ln, p in snap.items() if p), e.ty)
        if op == "any":
            return any(snap.values())
        if op == "all":
            return all(snap.values())
        k = args[1]
        if op == "shfl_down":
            src, ok = lane + k, lane + k <= 31
        elif op == "shfl_up":
            src, ok = lane - k, lane - k >= 0
        elif op == "shfl_xor":
            src = lane ^ (k & 0xFFFFFFFF)
            ok = src <= 31
        else:
            src, ok = k & 31, True
        if not ok or src not in snap:
            return args[0]  # an invalid source lane gives the caller's own value (PTX)
        return snap[src]

    def eval_UnaryOp(self, e: ir.UnaryOp) -> Any:
        return ops.unary(e.op, self.eval(e.operand), e.ty)

    def eval_BinOp(self, e: ir.BinOp) -> Any:
        a = self.eval(e.left)
        c = self.eval(e.right)
        ty = e.ty
        if e.op in ("//", "%") and ty.is_int:
            if c == 0:
                if e.site >= 0:
                    self.run.fault(e.site, ops.conv(a, ty, I64), 0)
                return 0
            return ops.int_divmod(e.op, a, c, ty)
        return ops.binop(e.op, a, c, ty)

    def eval_Compare(self, e: ir.Compare) -> Any:
        left = self.eval(e.operands[0])
        for i, op in enumerate(e.ops):
            right = self.eval(e.operands[i + 1])
            t = e.link_types[i]
            if not ops.compare(op, ops.conv(left, e.operands[i].ty, t), ops.conv(right, e.operands[i + 1].ty, t)):
                return False
            left = right
        return True

    def eval_BoolOp(self, e: ir.BoolOp) -> Any:
        if e.op == "and":
            for v in e.values:
                if not self.eval(v):
                    return False
            return True
        for v in e.values:
            if self.eval(v):
                return True
        return False

    def eval_IfExp(self, e: ir.IfExp) -> Any:
        return self.eval(e.then) if self.eval(e.cond) else self.eval(e.orelse)

    def eval_Call(self, e: ir.Call) -> Any:
        f = e.func
        caller = self.frame
        frame = Frame()
        for (pname, pty), arg in zip(f.params, e.args, strict=True):
            if isinstance(pty, SliceTy):
                assert isinstance(arg, ir.SliceRef)
                frame.slices[pname] = caller.slices[arg.name]
            elif isinstance(pty, LocalArrayTy):  # by reference: the caller's list
                assert isinstance(arg, ir.LocalArrayRef)
                frame.vars[pname] = self.local_data(arg)
                frame.types[pname] = pty
            else:
                frame.vars[pname] = ops.conv(self.eval(arg), arg.ty, pty)
                frame.types[pname] = pty
        for name, ty in f.locals:
            if name not in frame.vars:
                frame.vars[name] = ops.zero(ty)
                frame.types[name] = ty
        self.frame = frame
        try:
            self.body(f.body)
            value = None
        except _Return as r:
            value = r.value
        finally:
            self.frame = caller
        if value is None and isinstance(f.ret, (ScalarTy, WitnessTy, TupleTy)):
            return zero_value(f.ret)
        return value

    def eval_SliceRef(self, e: ir.SliceRef) -> Any:
        raise AssertionError("a slice is not a value")

    def eval_SharedRef(self, e: ir.SharedRef) -> Any:
        raise AssertionError("a shared array is not a value")

    # ---- local values: per-thread local arrays (a Python list per declaration run, private to
    # the thread, bounds-checked whatever the compiler proved), tuples and unpacking
    # (codegen/llvm/locals.py is the lowering's twin)
    def exec_LocalArrayDecl(self, s: ir.LocalArrayDecl) -> None:
        self.frame.vars[s.name] = [ops.zero(s.ty.elem)] * s.ty.size  # zeroed each time it runs
        self.frame.types[s.name] = s.ty

    def local_data(self, ref: ir.LocalArrayRef) -> list[Any]:
        """The array's elements; one whose declaration has not run on this path (declared in a
        branch not taken) is all zeros, as the lowering's entry-block `alloca` is."""
        data = self.frame.vars.get(ref.name)
        if data is None:
            data = self.frame.vars[ref.name] = [ops.zero(ref.ty.elem)] * ref.ty.size
            self.frame.types[ref.name] = ref.ty
        return data  # type: ignore[no-any-return]

    def _local(self, ref: ir.LocalArrayRef, index: tuple[ir.Expr, ...], node: Any, kind: str) -> tuple[list[Any], int | None]:
        data = self.local_data(ref)
        return data, self.bounds(ref.ty.shape, self.index(index), node, kind, f"local {ref.name}")

    def eval_LocalArrayRead(self, e: ir.LocalArrayRead) -> Any:
        data, flat = self._local(e.array, e.index, e, "read")
        return ops.zero(e.ty) if flat is None else data[flat]

    def exec_LocalArrayWrite(self, s: ir.LocalArrayWrite) -> None:
        value = self.eval(s.value)
        elem = s.array.ty.elem
        if elem.is_half:  # stored as the type's bits, as memory stores it (run.Mem)
            value = round_half(float(value), elem.name)
        data, flat = self._local(s.array, s.index, s, "write")
        if flat is not None:
            data[flat] = value

    def eval_LocalArrayRef(self, e: ir.LocalArrayRef) -> Any:
        raise AssertionError("a local array is not a value")

    def eval_ThreadTileLoad(self, e: ir.ThreadTileLoad) -> None:
        exec_tile_move(self, e)

    def eval_ThreadTileStore(self, e: ir.ThreadTileStore) -> None:
        exec_tile_move(self, e)

    def eval_MakeTuple(self, e: ir.MakeTuple) -> Any:
        return tuple(ops.conv(self.eval(v), v.ty, t) for v, t in zip(e.values, e.ty.elems, strict=True))

    def exec_Unpack(self, s: ir.Unpack) -> None:
        value = self.eval(s.value)
        ty = s.value.ty
        assert isinstance(ty, TupleTy)
        f = self.frame
        for name, v, src in zip(s.names, value, ty.elems, strict=True):
            f.vars[name] = ops.conv(v, src, f.types[name])


def _table(prefix: str) -> dict[type, Any]:
    out: dict[type, Any] = {}
    for name in dir(Thread):
        if name.startswith(prefix):
            node = getattr(ir, name[len(prefix) :], None)
            if isinstance(node, type):
                out[node] = getattr(Thread, name)
    return out


_EVAL = _table("eval_")
_EXEC = _table("exec_")


def zero_value(ty: Any) -> Any:
    """A helper's result when it falls off its end without a `return` (the lowering's zeroed slot)."""
    if isinstance(ty, TupleTy):
        return tuple(ops.zero(t) for t in ty.elems)
    return ops.zero(ty)
