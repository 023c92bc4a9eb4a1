"""The entry block's zero stores that no load can see, dropped before LLVM sees the function.

Every local's slot is an `alloca` in the entry block, zeroed there (`Lowerer.alloca`), and
LLVM's SROA turns the slots into registers.  A slot stored in the entry block and used in
another is promoted by the general path of LLVM's PromoteMemToReg, whose `ComputeLiveInBlocks`
rescans a block that both stores and loads the slot from its first instruction, once per load
of the slot in it: a tile kernel's unrolled fragment loop (one block of ~12,000 instructions,
a compiler temporary stored and loaded there 128 times) made SROA 150-200 ms of a 1 s compile.

`drop_unread_zero_stores` drops the zero store of each slot whose every load follows a store
to it in the load's own block (and that is used only by loads and stores as their address):
the zero reaches no load, so the promoted SSA is the same without it, and the slot, used in
fewer blocks (one, most often), takes PromoteMemToReg's fast paths.  Those slots move to the
front of the entry block: SROA promotes the entry's slots in reverse order, so these come last
and the fast paths' removals (each swaps the last slot of the list into the removed one's
place) leave the order of the slots that get phi nodes as it was: the PTX is byte-identical
(tests/codegen/test_zero_init.py compares it over the tile kernels and examples).
"""

from __future__ import annotations

import llvmlite.ir as llir


def drop_unread_zero_stores(fn: llir.Function, zero: dict[int, tuple[llir.AllocaInstr, llir.StoreInstr]]) -> int:
    """Drop the zero stores (`zero`: id of the slot -> (slot, its zero store in the entry
    block)) that no load can see, moving their slots to the front of the entry block.
    Returns how many were dropped."""
    if not zero or not fn.blocks:
        return 0
    entry = fn.blocks[0]
    stores = {id(st) for _, st in zero.values()}
    ok = set(zero)
    for block in fn.blocks:
        stored: set[int] = set()
        for ins in block.instructions:
            if isinstance(ins, llir.LoadInstr):
                p = id(ins.operands[0])
                if p in ok and p not in stored:
                    ok.discard(p)
            elif isinstance(ins, llir.StoreInstr):
                if id(ins) in stores:
                    continue
                value, ptr = ins.operands
                ok.discard(id(value))
                if id(ptr) in ok:
                    stored.add(id(ptr))
            elif isinstance(ins, llir.PhiInstr):
                for v, _ in ins.incomings:
                    ok.discard(id(v))
            elif not isinstance(ins, llir.AllocaInstr):
                for v in ins.operands:
                    ok.discard(id(v))
    if not ok:
        return 0
    dropped = {id(zero[p][1]) for p in ok}
    front = [ins for ins in entry.instructions if id(ins) in ok]
    rest = [ins for ins in entry.instructions if id(ins) not in ok and id(ins) not in dropped]
    entry.instructions[:] = front + rest
    return len(ok)
