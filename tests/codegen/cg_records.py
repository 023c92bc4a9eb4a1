"""Record kernels for the GPU's code paths run on the CPU (tests/codegen/test_record_paths.py)."""

import anodize as az
from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread


@az.record
class V:
    x: f32
    y: f32
    k: i32


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def swap(a: Slice[V], o: DisjointSlice[V]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = V(a[i].y, a[i].x, a[i].k + 1)
        o[i].x += 1.0


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def swap_gs(a: Slice[V], o: DisjointSlice[V]) -> None:
    for i in thread.grid_stride(o):
        o[i] = V(a[i].y, a[i].x, a[i].k + 1)
        o[i].x += 1.0


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def ks(a: Slice[V], o: DisjointSlice[f32]) -> None:
    """A record input beside a 4-byte output: the output coarsens, the record's fields do not."""
    i = thread.index_1d()
    if i in o:
        o[i] = a[i].x * f32(a[i].k)


@az.record
class Six:
    """24 bytes of 4-byte fields: an 8-byte aligned base makes every element 8-byte aligned."""

    a: az.Array[f32, 4]
    w: f32
    n: i32


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def scale6(a: Slice[Six], o: DisjointSlice[Six]) -> None:
    i = thread.index_1d()
    if i in o:
        r = a[i]
        o[i] = Six(a=(r.a[0] * r.w, r.a[1] * r.w, r.a[2] * r.w, r.a[3] * r.w), w=r.w, n=r.n + 1)


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def scale6_gs(a: Slice[Six], o: DisjointSlice[Six]) -> None:
    for i in thread.grid_stride(o):
        r = a[i]
        o[i] = Six(a=(r.a[0] * r.w, r.a[1] * r.w, r.a[2] * r.w, r.a[3] * r.w), w=r.w, n=r.n + 1)


@az.func
def _head(p: Slice[Six], i: az.Index1D) -> f32:
    return p[i].a[0] + p[i].a[1]


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def heads(a: Slice[Six], o: DisjointSlice[f32]) -> None:
    """Two adjacent fields read through a helper: one 8-byte load on the aligned copy."""
    i = thread.index_1d()
    if i in o:
        o[i] = _head(a, i)


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def staged(a: Slice[Six], o: DisjointSlice[f32]) -> None:
    """A barrier: the CPU backend splits the body there, so it keeps one copy (scalar accesses)."""
    i = thread.index_1d()
    az.syncthreads()
    if i in o:
        o[i] = a[i].w


@az.record
class Wide:
    """64 bytes of every width, no padding: a warp moves it in four 16-byte rows
    (codegen/llvm/record_warp.py)."""

    t: az.f64
    v: az.Array[f32, 4]
    n: az.i64
    s: az.Array[az.i16, 2]
    b: az.Array[az.u8, 4]
    w: az.Array[f32, 6]


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def wide_step(a: Slice[Wide], o: DisjointSlice[Wide]) -> None:
    i = thread.index_1d()
    if i in o:
        r = a[i]
        if r.n % 2 == 0:
            o[i] = Wide(t=r.t * 2.0, v=(r.v[1], r.v[0], r.v[3], r.v[2]), n=r.n + 1, s=(r.s[1], r.s[0]),
                        b=(r.b[3], r.b[2], r.b[1], r.b[0]), w=(r.w[5], r.w[4], r.w[3], r.w[2], r.w[1], r.w[0]))
        else:
            o[i] = r
            o[i].t = -r.t


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def wide_partial(a: Slice[Wide], o: DisjointSlice[Wide]) -> None:
    """Only some fields written: the warp loads `a`, each lane stores its own fields."""
    i = thread.index_1d()
    if i in o:
        o[i].t = a[i].t + a[i].w[5] + a[i].w[1]
        if a[i].n > 0:
            o[i].n = a[i].n


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def wide_head(a: Slice[Wide], o: DisjointSlice[az.f64]) -> None:
    """One field of a 64-byte record: the warp would load three chunks no lane reads."""
    i = thread.index_1d()
    if i in o:
        o[i] = a[i].t + az.f64(a[i].v[0])


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def wide_read_back(a: Slice[Wide], o: DisjointSlice[Wide]) -> None:
    """The output read after its write: each lane stores its own record (the warp's stores
    would run after the read, which must see the write)."""
    i = thread.index_1d()
    if i in o:
        o[i] = a[i]
        o[i].t = o[i].t * 2.0


@launch_contract(domain=1, requires=lambda a, o: len(a) == len(o))
@kernel
def wide_copy(a: Slice[Wide], o: DisjointSlice[Wide]) -> None:
    """Any block: whole warps are tested at run time."""
    i = thread.index_1d()
    if i in o:
        o[i] = a[i]


@launch_contract(domain=1, block=48, requires=lambda a, o: len(a) == len(o))
@kernel
def wide_copy48(a: Slice[Wide], o: DisjointSlice[Wide]) -> None:
    """A block of a warp and a half: no warp's copy."""
    i = thread.index_1d()
    if i in o:
        o[i] = a[i]
