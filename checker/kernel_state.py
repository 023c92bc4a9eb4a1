"""The kernel model's abstract interpreter, its state: one record per analysed function that
the interpreter's collaborators (`StatementFlow`, kernel_statements.py; `ExprFlow`,
kernel_exprs.py; `CallFlow`, kernel_interp.py) share, as mypy's TypeChecker and its
ExpressionChecker share one checker state.  It holds the function, its module's model, and
the control context at the current point: `with az.unsafe():`, the thread- and lane-dependent
conditions in force, the loops around it, a divergent return before it, the `in` guards."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ast

from .kernel_values import Ctx, Env, FunctionInfo

if TYPE_CHECKING:
    from .kernel_model import ModuleModel


class Loop:
    """A loop being analysed: what makes its trip count differ between threads, and the
    environments its `break`s and `continue`s leave with."""

    def __init__(self) -> None:
        self.divergent: ast.AST | None = None  # a thread-dependent break/continue/return
        self.lane_divergent: ast.AST | None = None  # a lane-dependent one (or head)
        self.break_envs: list[Env] = []
        self.continue_envs: list[Env] = []


class FlowState:
    """The state of the abstract interpreter over one function (see the module docstring)."""

    def __init__(self, model: ModuleModel, fn: FunctionInfo):
        self.m = model
        self.fn = fn
        self.unsafe = False
        self.cond: list[ast.AST] = []  # thread-dependent conditions in force
        self.cond_lane: list[bool] = []  # for each: may it differ between the lanes of a warp
        self.loops: list[Loop] = []
        self.div_return: ast.AST | None = None
        self.lane_return: ast.AST | None = None  # a lane-dependent return
        self.guards: list[tuple[str, str]] = []
        self._ctxs: dict[tuple[bool, ast.AST | None, ast.AST | None], Ctx] = {}
        block = fn.contract.block if fn.kind == "kernel" and fn.contract is not None else None
        dims = (tuple(block) + (1, 1, 1))[:3] if block else None
        # raw ids equal on the lanes of a warp under this kernel's literal block (warps are
        # 32 consecutive linear thread ids, x fastest)
        self.warp_uniform_ids: frozenset[str] = frozenset()
        self.warp_x = bool(dims and dims[0] % 32 == 0)  # `tid_x() // 32` is the warp's index
        if dims:
            self.warp_uniform_ids = frozenset(
                n for n, ok in (("tid_y", dims[0] % 32 == 0), ("tid_z", dims[0] * dims[1] % 32 == 0)) if ok
            )

    def divergent(self) -> ast.AST | None:
        """What makes control thread-dependent here, or None."""
        if self.cond:
            return self.cond[-1]
        if self.div_return is not None:
            return self.div_return
        for lp in reversed(self.loops):
            if lp.divergent is not None:
                return lp.divergent
        return None

    def lane_divergent(self) -> ast.AST | None:
        """What makes control differ between the lanes of a warp here, or None."""
        for c, lane in zip(reversed(self.cond), reversed(self.cond_lane)):
            if lane:
                return c
        if self.lane_return is not None:
            return self.lane_return
        for lp in reversed(self.loops):
            if lp.lane_divergent is not None:
                return lp.lane_divergent
        return None

    def push_cond(self, node: ast.AST, lane: bool) -> None:
        self.cond.append(node)
        self.cond_lane.append(lane)

    def pop_cond(self) -> None:
        self.cond.pop()
        self.cond_lane.pop()

    def here(self) -> Ctx:
        """The context at this point: one `Ctx` per distinct context of this function (equal
        contexts are equal values)."""
        d = self.divergent()
        ld = self.lane_divergent() if d is not None else None
        key = (self.unsafe, d, ld)
        ctx = self._ctxs.get(key)
        if ctx is None:
            ctx = self._ctxs[key] = Ctx(self.fn, self.unsafe, d, ld)
        return ctx

    def module_path(self, node: ast.expr) -> bool:
        """Is `node` a name chain naming anodize, one of its modules or classes, or `math`?"""
        if isinstance(node, ast.Name):
            if node.id in self.fn.locals:
                return False
        elif not isinstance(node, ast.Attribute):
            return False
        q = self.m.qualname(node) or ""
        return q in ("anodize", "math") or q.startswith(("az.", "math."))
