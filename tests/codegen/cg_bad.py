"""Kernels outside the language: each must fail with a located diagnostic (tests read the lines)."""

import anodize as az
from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread


@kernel
def uses_lambda(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    f = lambda v: v + 1  # noqa: E731  # LINE:lambda
    if i in c:
        c[i] = a[i]


@kernel
def uses_listcomp(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    xs = [v for v in range(3)]  # LINE:listcomp
    if i in c:
        c[i] = a[i]


@kernel
def two_errors(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    try:  # LINE:try
        pass
    except Exception:
        pass
    s = "text"  # LINE:string


@kernel
def writes_input(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    a[i] = 1.0  # LINE:shared-write


@kernel
def int_index_on_disjoint(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    c[3] = a[0]  # LINE:disjoint


@kernel
def raw_id_outside_unsafe(c: DisjointSlice[i32]) -> None:
    t = thread.tid_x()  # LINE:unsafe


@kernel
def narrowing(a: Slice[f32], c: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i]  # LINE:narrowing


@kernel
def undefined_name(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = nope  # noqa: F821  # LINE:undefined


@launch_contract(domain=4, block=256)  # LINE:domain
@kernel
def bad_domain(c: DisjointSlice[f32]) -> None:
    pass


@launch_contract(domain=2, block=256)  # LINE:rank
@kernel
def block_rank_mismatch(c: DisjointSlice[f32]) -> None:
    pass


@launch_contract(domain=2, block=(64, 32))  # LINE:toomany
@kernel
def too_many_threads(c: DisjointSlice[f32]) -> None:
    pass


@launch_contract(domain=1, block=64, requires=lambda a, zz: len(a) == len(zz))  # LINE:requires
@kernel
def requires_unknown_param(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    pass


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c) or len(a) > 3)  # LINE:or
@kernel
def requires_or(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    pass


@launch_contract(domain=1, block=64)
@kernel
def wrong_domain_witness(c: DisjointSlice[f32]) -> None:
    ij = thread.index_2d()  # LINE:witness-domain


@az.func
def helper_with_lambda(v: f32) -> f32:
    g = lambda: 1  # noqa: E731  # LINE:helper-lambda
    return v


@kernel
def calls_bad_helper(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = helper_with_lambda(a[i])


@kernel
def uses_print(c: DisjointSlice[f32]) -> None:
    print("c is", c)  # LINE:print


@kernel
def uses_slicing(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[1:3]  # LINE:slicing


@kernel
def uses_kwargs(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = max(a[i], 1.0, key=None)  # LINE:kwargs
