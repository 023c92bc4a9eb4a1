"""The wgmma mainloop's two orders and copy paths (codegen/tile/wgmma.py), on by default with a
way back each: load-ahead (multiply, then copy: S - 1 k-tiles of copies in flight, Triton's
order; `ANODIZE_TILE_LOAD_AHEAD=0` copies first) and whole chunks (a copy path of whole 16-byte
chunks, `ignore-src` for one outside, where no chunk straddles an edge;
`ANODIZE_TILE_WHOLE_CHUNKS=0` clamps every chunk).  A model of the ring run over the block's own text
checks every order: each wgmma reads the k-tile it should, landed and fenced before a barrier,
and no copy refills a stage before a barrier that follows every warpgroup's wait for the wgmma
reading it.  An evaluation of both copy texts shows the whole-chunk path copies what the
clamped path does wherever no chunk straddles; every GEMM-class variant compiles under the
switches and ptxas takes it without spills."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from anodize.codegen.driver import compile_gpu
from anodize.codegen.tile import wgmma
from anodize.codegen.tile.layout import MmaLayout

sys.path.insert(0, str(Path(__file__).parent))
import tile_mma_cases as C  # noqa: E402
from test_block_slots import canonical  # noqa: E402
from test_tile_mma import kernel_ir, ptxas_log, run_case  # noqa: E402


def run_ring(text: str, stages: int, ktiles: int, whole: bool = False) -> list[int]:
    """Walk the block's vector copy path (the whole-chunk one with `whole`) for `ktiles` k-tiles,
    every thread alike; returns the k-tiles multiplied, in order; AssertionError on a hazard."""
    lines = [x.strip() for x in text.split("\n\t")]
    labels = {x[:-1]: i for i, x in enumerate(lines) if x.endswith(":")}
    first = next(x for x in lines if x.startswith("setp.ge.s32 %wp1"))
    L = int(re.fullmatch(r"setp\.ge\.s32 %wp1, %wr20, (\d+);", first).group(1))  # type: ignore[union-attr]
    j = ws = rs = 0
    stage: dict[int, int] = {}  # stage -> k-tile copied into it
    copies: list[tuple[int, int]] = []  # committed cp.async groups (stage, tile)
    landed: set[int] = set()  # groups waited for
    fenced: set[int] = set()
    visible: set[int] = set()  # groups landed and fenced before a barrier: their stage may be read
    groups: list[int] = []  # committed wgmma groups (stage read)
    done: set[int] = set()
    free: set[int] = set()  # wgmma groups done before a barrier (every warpgroup's)
    reading: int | None = None
    wrote = False
    out: list[int] = []
    pc = labels[next(k for k in labels if k.startswith("AZM_LOOP_"))]
    while pc < len(lines):
        x = lines[pc]
        pc += 1
        if m := re.fullmatch(r"@(!?)%wp(\d+) bra (\w+);", x):
            neg, p, target = m.groups()
            taken = {"1": j >= L, "0": True, "14": whole, "15": j >= ktiles, "4": j < ktiles + L}[p]
            if taken != bool(neg):
                pc = labels[target]
        elif m := re.fullmatch(r"bra\.uni (\w+);", x):
            pc = labels[m.group(1)]
        elif x.startswith("cp.async.cg.shared.global"):
            if not wrote:
                for g, st in enumerate(groups):
                    assert st != ws or g in free, f"k-tile {j} refills stage {ws} while wgmma group {g} may read it"
                stage[ws], wrote = j, True
        elif x == "cp.async.commit_group;":
            copies.append((ws, j))
            wrote = False
        elif m := re.fullmatch(r"cp\.async\.wait_group (\d+);", x):
            landed |= set(range(len(copies) - int(m.group(1))))
        elif x.startswith("fence.proxy.async"):
            fenced |= landed
        elif x == "bar.sync 0;":
            visible |= fenced
            free |= done
        elif x.startswith("wgmma.mma_async") and reading is None:
            want = j - L
            assert stage.get(rs) == want, f"iteration {j} multiplies stage {rs} holding {stage.get(rs)}, not k-tile {want}"
            g = next(g for g, c in enumerate(copies) if c == (rs, want))
            assert g in visible, f"k-tile {want} read before its copy landed, was fenced and a barrier passed"
            reading = rs
            out.append(want)
        elif x == "wgmma.commit_group.sync.aligned;":
            assert reading is not None
            groups.append(reading)
            reading = None
        elif m := re.fullmatch(r"wgmma\.wait_group\.sync\.aligned (\d+);", x):
            done |= set(range(len(groups) - int(m.group(1))))
        elif x.startswith("add.u32 %wr21, %wr21,"):
            ws = (ws + 1) % stages
        elif x.startswith("add.u32 %wr22, %wr22,"):
            rs = (rs + 1) % stages
        elif x == "add.s32 %wr20, %wr20, 1;":
            j += 1
    return out


LAYOUTS = [(MmaLayout(128, 256, 8, 1), 4), (MmaLayout(128, 256, 8, 1), 3), (MmaLayout(128, 128, 4, 1, 64), 4),
           (MmaLayout(64, 64, 4, 1), 5)]


@pytest.mark.parametrize("lay,stages", LAYOUTS, ids=lambda v: str(v))
@pytest.mark.parametrize("ahead", [False, True])
def test_the_ring_multiplies_every_k_tile_once_in_order_without_a_hazard(lay: MmaLayout, stages: int, ahead: bool) -> None:
    for whole in (False, True):
        text = wgmma.mainloop_text(lay, stages, "f16", 1, ahead=ahead, whole=whole)
        for ktiles in (1, 2, stages - 1, stages, stages + 1, 9):
            assert run_ring(text, stages, ktiles, whole) == list(range(ktiles))


def test_the_model_catches_a_refill_without_the_second_barrier() -> None:
    """The load-ahead order needs its second barrier: without it a warpgroup may refill the stage
    the other warpgroup's wgmma still reads (the model must say so, or it checks nothing)."""
    text = wgmma.mainloop_text(MmaLayout(128, 256, 8, 1), 4, "f16", 1, ahead=True)
    lines = text.split("\n\t")
    i = max(k for k, x in enumerate(lines) if x == "bar.sync 0;" and k < lines.index("AZM_COPY_1:"))
    with pytest.raises(AssertionError, match="refills stage"):
        run_ring("\n\t".join(lines[:i] + lines[i + 1:]), 4, 6)
    # waiting for one wgmma group fewer leaves the refilled stage's reader in flight
    with pytest.raises(AssertionError, match="refills stage"):
        run_ring(text.replace("wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 2;"), 4, 6)
    # waiting for one copy group fewer multiplies a k-tile still landing
    with pytest.raises(AssertionError, match="before its copy landed"):
        run_ring(text.replace("cp.async.wait_group 2;", "cp.async.wait_group 3;"), 4, 6)


def test_the_measurement_switch_without_the_proxy_fence_is_what_the_model_rejects() -> None:
    """`ANODIZE_TILE_UNSOUND_NO_PROXY_FENCE=1` (a measurement switch, never a default) drops the
    fence between cp.async's generic-proxy writes and wgmma's async-proxy reads: the model says
    a k-tile is then read unfenced, in either order."""
    for ahead in (False, True):
        text = wgmma.mainloop_text(MmaLayout(128, 256, 8, 1), 4, "f16", 1, ahead=ahead, fence=False)
        assert "fence.proxy.async" not in text
        with pytest.raises(AssertionError, match="was fenced"):
            run_ring(text, 4, 3)


def test_the_load_ahead_order_multiplies_before_it_copies() -> None:
    """Copy-first: one barrier a k-tile, copies then wgmma, S - 2 k-tiles ahead; load-ahead (the default): wgmma,
    its wait, a second barrier, then the copies, S - 1 ahead (`cp.async.wait_group S - 2`)."""
    lay = MmaLayout(128, 256, 8, 1)
    for ahead, wait, bars in ((False, 1, 1), (True, 2, 2)):
        text = wgmma.mainloop_text(lay, 4, "f16", 7, ahead=ahead)
        loop = text[text.index("AZM_LOOP_7:"):text.index("@%wp4 bra AZM_LOOP_7;")]
        assert loop.count("bar.sync 0;") == bars and f"cp.async.wait_group {wait};" in loop
        assert (loop.index("wgmma.mma_async") < loop.index("cp.async.cg")) == ahead


def run_copies(lines: list[str], env: dict[str, int]) -> list[tuple[int, int, int]]:
    """Evaluate an operand's copy text: per cp.async (shared offset, bytes read, the address read
    from, 0 when none)."""
    env = dict(env)
    out = []
    val = lambda x: env[x] if x.startswith(("%", "$")) else int(x)  # noqa: E731
    for x in lines:
        op, rest = x.rstrip(";").split(" ", 1)
        a = [t.strip() for t in rest.split(",")]
        u32 = lambda v: v & 0xFFFFFFFF  # noqa: E731
        if op.startswith("setp."):
            cmp, ty = op.split(".")[1:]
            p, q = (val(a[1]), val(a[2])) if ty == "s32" else (u32(val(a[1])), u32(val(a[2])))
            env[a[0]] = {"gt": p > q, "le": p <= q, "lt": p < q, "ge": p >= q}[cmp]
        elif op in ("and.pred", "or.pred"):
            env[a[0]] = (env[a[1]] and env[a[2]]) if op == "and.pred" else (env[a[1]] or env[a[2]])
        elif op.startswith("selp."):
            env[a[0]] = val(a[1]) if env[a[3]] else val(a[2])
        elif op in ("sub.s32", "add.s32", "add.u32", "add.s64", "max.s32", "min.s32", "shl.b32", "mov.b64"):
            f = {"sub": lambda p, q: p - q, "add": lambda p, q: p + q, "max": max, "min": min, "shl": lambda p, q: p << q}
            env[a[0]] = val(a[1]) if op == "mov.b64" else f[op.split(".")[0]](val(a[1]), val(a[2]))
        elif op == "cp.async.cg.shared.global":
            dst, src, n = a[0].strip("[]").split("+"), a[1].strip("[]"), a[3]
            read = (0 if env[n] else 16) if n.startswith("%wp") else val(n)
            out.append((int(dst[1]), read, env[src] if read else 0))
        else:
            raise AssertionError(f"unmodelled {x}")
    return out


@pytest.mark.parametrize("kmajor", [True, False])
def test_the_whole_chunk_path_copies_what_the_partial_path_does_where_no_chunk_straddles(kmajor: bool) -> None:
    """`_Op.copy(whole=True)` (16-byte copies, `ignore-src` for a chunk outside) reads the same
    bytes from the same addresses into the same places as the clamped path wherever the elements
    left from a chunk's start (along K for a K-major operand, along M/N for an MN-major one) are
    a multiple of 8 -- and not elsewhere (a partial chunk), or the check is empty."""
    import random

    texts = []
    for whole in (False, True):
        lines: list[str] = []
        op = wgmma._Op(lines.append, "A", kmajor, 128, 256, 0, ("$0", "$1", "$2", "$3", "$4"), 8, 2)
        op.copy("%wr25", "%wr24", whole=whole)
        texts.append(lines)
    assert not any("selp" in x for x in texts[1]) and sum("cp.async" in x for x in texts[1]) == op.n
    rng = random.Random(3)
    differ = 0
    for t in range(3000):
        straddle = t % 3 == 0
        left = 8 * rng.randrange(-20, 40) + (rng.randrange(1, 8) if straddle else 0)
        env = {"$0": 1 << 40, "$4": rng.randrange(0, 300), "%wr25": 4096, "%wr10": 256, "%wd2": (1 << 40) + 4096,
               "%wd3": 8192, "%wr11": rng.randrange(-40, 300), "%wr24": 64 * rng.randrange(0, 8)}
        if kmajor:
            env["%wr12"] = left + env["%wr24"]  # K left from the chunk at k0 = 0
        else:
            env["%wr11"] = rng.randrange(-40, 300) + env["%wr24"]  # K rows left below the thread's first, at k0 = 0
            env["%wr12"] = left  # columns left from the chunk's first
            env["%wr15"] = min(max(left, 0), 8) * 2
        partial, whole_ = (run_copies(x, env) for x in texts)
        if straddle:
            differ += partial != whole_
        else:
            assert partial == whole_, env
    assert differ > 0


_QUICK = [("canonical", (128, 256, 64, 8)), ("b_trans", (128, 256, 64, 8)), ("a_trans", (128, 256, 64, 8))]
_FULL = [(n, (128, 256, 64, 8)) for n in C.NAMES if n not in ("canonical", "b_trans", "a_trans")] + \
        [(n, (128, 128, 64, 4)) for n in ("canonical", "epilogue", "a_trans", "acc_in")]


@pytest.mark.parametrize("name,tile", [pytest.param(*c, id=c[0]) for c in _QUICK] + [
    pytest.param(*c, id=f"{c[0]}-{c[1][0]}x{c[1][1]}", marks=pytest.mark.slow) for c in _FULL])
def test_every_gemm_variant_compiles_under_the_switches_without_spills(monkeypatch: pytest.MonkeyPatch, name: str,
                                                                       tile: tuple[int, int, int, int]) -> None:
    bm, bn, bk, warps = tile
    src = kernel_ir(C.source(name, bm, bn, bk, warps, "f16"))
    ptx = compile_gpu(src, "sm_90", ptxas=False).ptx  # the default: both on
    monkeypatch.setenv("ANODIZE_TILE_LOAD_AHEAD", "0")
    monkeypatch.setenv("ANODIZE_TILE_WHOLE_CHUNKS", "0")
    base = compile_gpu(src, "sm_90", ptxas=False).ptx  # the way back: both off
    assert "AZM_WHOLE" not in base and "wgmma.mma_async" in base
    monkeypatch.delenv("ANODIZE_TILE_LOAD_AHEAD")
    monkeypatch.delenv("ANODIZE_TILE_WHOLE_CHUNKS")
    assert canonical(compile_gpu(src, "sm_90", ptxas=False).ptx) == canonical(ptx)
    loops = len(re.findall(r"AZM_LOOP_\d+:", ptx))
    assert loops >= 1 and ptx.count("wgmma.mma_async") == base.count("wgmma.mma_async")
    whole = re.findall(r"cp\.async\.cg\.shared\.global \[%wr30\+\d+\], \[%wd9\], 16, %wp4;", ptx)
    # (the clamped copies twice: on the 16-byte path, and on the 2-byte path for an operand whose rows are aligned)
    assert len(whole) == base.count("cp.async.cg.shared.global") // 2 == ptx.count("cp.async.cg.shared.global") // 3
    assert ptx.count("bar.sync 0;") == base.count("bar.sync 0;") + loops
    if shutil.which("ptxas"):
        log = ptxas_log(ptx, "sm_90")
        assert re.search(r" 0 bytes spill stores", log) and not re.search(r" [1-9]\d* bytes spill stores", log), log


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["canonical", "b_trans", "a_trans", "acc_in", "epilogue"])
@pytest.mark.parametrize("m,n,k", [(200, 300, 190), (64, 96, 4095)])
def test_the_way_back_matches_numpy_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, m: int, n: int,
                                               k: int) -> None:
    """The copy-first order, the clamped copies and the per-element stores (each default's way
    back: `ANODIZE_TILE_LOAD_AHEAD=0`, `ANODIZE_TILE_WHOLE_CHUNKS=0`, `ANODIZE_TILE_EPILOGUE=direct`)
    still compute what NumPy does (the defaults are tests/codegen/test_tile_mma.py's GPU twins)."""
    import anodize as az

    for name_, value in (("LOAD_AHEAD", "0"), ("WHOLE_CHUNKS", "0"), ("EPILOGUE", "direct")):
        monkeypatch.setenv(f"ANODIZE_TILE_{name_}", value)
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    run_case(tmp_path, az.device(), name, (128, 256, 64, 8), m, n, k, tag="the way back")



def test_the_ptxas_o3_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ANODIZE_TILE_PTXAS_O3=1` builds a wgmma kernel at ptxas's default level instead of -O1 (a
    benchmarking switch in the compile cache's key); ptxas takes the 128 x 128 tile over 4 warps
    there without spills in two blocks' registers."""
    from anodize.codegen.driver import ptxas_options
    from anodize.codegen.toolchain import CODE_SWITCHES

    assert "ANODIZE_TILE_PTXAS_O3" in CODE_SWITCHES
    ptx = compile_gpu(kernel_ir(C.source("canonical", 128, 128, 64, 4, "f16")), "sm_90", ptxas=False).ptx
    assert ptxas_options("sm_90a", ptx) == (1, None) and ptxas_options("sm_90", "mma.sync") == (None, None)
    monkeypatch.setenv("ANODIZE_TILE_PTXAS_O3", "1")
    assert ptxas_options("sm_90a", ptx) == (None, None)
    if shutil.which("ptxas"):
        r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", "-o", "/dev/null", "-"], input=ptx, capture_output=True, text=True)
        regs = int(re.search(r"Used (\d+) registers", r.stderr).group(1))  # type: ignore[union-attr]
        assert r.returncode == 0 and " 0 bytes spill stores" in r.stderr and regs * 128 * 2 <= 65536, r.stderr
