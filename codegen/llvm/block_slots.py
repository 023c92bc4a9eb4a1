"""Slots whose value never crosses a block, turned into the values themselves before LLVM sees
the function.

Every local's slot is an `alloca` in the entry block, zeroed there (`Lowerer.alloca`), and
LLVM's SROA turns the slots into registers.  A slot stored in the entry block and used in
another is promoted by the general path of LLVM's PromoteMemToReg, whose `ComputeLiveInBlocks`
rescans a block that both stores and loads the slot from its first instruction, once per load
of the slot in it: a tile kernel's unrolled fragment loop (one block of ~12,000 instructions,
a compiler temporary stored and loaded there 128 times) made SROA 150-200 ms of a 1 s compile,
and the loads and stores were half the module's text (built, printed and parsed again).

`forward_block_slots` finds each slot whose every load follows a store to it in the load's own
block (and that is used only by loads and stores as their address): the zero reaches no load,
and each load reads the last store before it in its block.  It replaces each such load by that
stored value and deletes the slot, its stores and its zero store: what SROA would have made of
the slot, so the PTX is byte-identical (tests/codegen/test_block_slots.py compares it over the
tile kernels, the GEMM class's epilogues and the SIMT kernels; the other slots keep their order,
which decides the order of the phi nodes SROA makes, hence of the PTX's registers).
"""

from __future__ import annotations

import llvmlite.ir as llir

Zero = dict[int, tuple[llir.AllocaInstr, llir.StoreInstr]]


def _block_local(fn: llir.Function, zero: Zero) -> set[int]:
    """The ids of the slots of `zero` whose every load follows a store to it in its own block,
    used by nothing but loads and stores (as their address)."""
    stores = {id(st) for _, st in zero.values()}
    ok = set(zero)
    for block in fn.blocks:
        stored: set[int] = set()
        for ins in block.instructions:
            t = type(ins)
            if t is llir.LoadInstr:
                p = id(ins.operands[0])
                if p in ok and p not in stored:
                    ok.discard(p)
            elif t is llir.StoreInstr:
                if id(ins) in stores:
                    continue
                value, ptr = ins.operands
                ok.discard(id(value))
                if id(ptr) in ok:
                    stored.add(id(ptr))
            elif t is llir.PhiInstr:
                for v, _ in ins.incomings:
                    ok.discard(id(v))
            elif t is not llir.AllocaInstr:
                for v in ins.operands:
                    ok.discard(id(v))
    return ok


def forward_block_slots(fn: llir.Function, zero: Zero) -> int:
    """Replace the loads of the block-local slots of `zero` (id of the slot -> (slot, its zero
    store in the entry block)) by the values stored last before them, and delete those slots
    with their stores.  Returns how many slots went."""
    if not zero or not fn.blocks:
        return 0
    ok = _block_local(fn, zero)
    if not ok:
        return 0
    gone = {id(zero[p][1]) for p in ok} | ok  # the zero stores and the slots
    value_of: dict[int, llir.Value] = {}  # id(load) -> the value it reads
    for block in fn.blocks:
        last: dict[int, llir.Value] = {}
        keep = []
        for ins in block.instructions:
            t = type(ins)
            if t is llir.StoreInstr and id(ins.operands[1]) in ok:
                if id(ins) not in gone:
                    last[id(ins.operands[1])] = ins.operands[0]
                continue
            if t is llir.LoadInstr and id(ins.operands[0]) in ok:
                value_of[id(ins)] = last[id(ins.operands[0])]
                continue
            if id(ins) not in gone:
                keep.append(ins)
        block.instructions[:] = keep

    def resolve(v: llir.Value) -> llir.Value:
        while id(v) in value_of:  # (a stored value may itself be a load that went)
            v = value_of[id(v)]
        return v

    for block in fn.blocks:
        for ins in block.instructions:
            ops = ins.operands
            if any(id(o) in value_of for o in ops):
                new = [resolve(o) for o in ops]
                ins.operands = new if isinstance(ops, list) else tuple(new)
                t = type(ins)
                # (llvmlite prints these from attributes of their own, not from `operands`)
                if t is llir.GEPInstr:
                    ins.pointer, ins.indices = new[0], new[1:]
                elif t is llir.ExtractValue:
                    ins.aggregate = new[0]
                elif t is llir.InsertValue:
                    ins.aggregate, ins.value = new
            if type(ins) is llir.PhiInstr:
                ins.incomings = [(resolve(v), b) for v, b in ins.incomings]
            elif type(ins) is llir.SwitchInstr:
                ins.cases = [(resolve(v), b) for v, b in ins.cases]
    return len(ok)
