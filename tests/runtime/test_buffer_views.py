"""Device arrays: element reads, N-D views, fill/copy_from/copy, `np.asarray`, 3-D buffers,
the CPU backend's poisoned `empty`, and what a launch says about views."""

from __future__ import annotations

import numpy as np
import pytest
from rt_kernels import scale2d, vecadd

import anodize as az
from anodize import AliasingError, ArgumentError
from anodize.runtime.buffer import StridedView
from anodize.runtime.device import CpuDevice, Device


@pytest.fixture(params=["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
def anydev(request: pytest.FixtureRequest) -> Device:
    return az.device(request.param)


def _grid(dev: Device, dtype: type = np.float32) -> tuple[np.ndarray, az.Buffer]:
    host = np.arange(24, dtype=dtype).reshape(4, 6)
    return host, dev.to_device(host)


# ---- element reads -------------------------------------------------------------------------


def test_element_reads_match_numpy(anydev: Device) -> None:
    host, buf = _grid(anydev)
    for i, j in [(0, 0), (1, 2), (3, 5), (-1, -1), (-4, 0), (2, -6)]:
        got = buf[i, j]
        assert got == host[i, j] and isinstance(got, np.float32)
    flat = anydev.to_device(np.arange(7, dtype=np.int64))
    assert flat[0] == 0 and flat[-1] == 6 and flat[np.int32(3)] == 3 and isinstance(flat[2], np.int64)
    assert anydev.to_device(np.array([True, False]))[1] == np.False_


def test_element_reads_out_of_range_are_index_errors(anydev: Device) -> None:
    _, buf = _grid(anydev)
    for key in [(4, 0), (0, 6), (-5, 0), (0, -7)]:
        with pytest.raises(IndexError, match="out of bounds for axis"):
            buf[key]
    with pytest.raises(IndexError, match="too many indices"):
        buf[1, 2, 3]
    with pytest.raises(TypeError, match="an int, a slice"):
        buf[[1, 2]]
    with pytest.raises(TypeError, match="an int, a slice"):
        buf[1.0]


# ---- views ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        np.s_[1:3], np.s_[1:3, :], np.s_[2], np.s_[:, 1], np.s_[:, 1:5:2], np.s_[::2], np.s_[::-1, ::-2],
        np.s_[..., 3], np.s_[3:1], np.s_[1:3, 2:4], np.s_[-1:], np.s_[:, :],
    ],
)
def test_views_read_like_numpy(anydev: Device, key: object) -> None:
    host, buf = _grid(anydev)
    v = buf[key]
    expect = host[key]
    assert v.shape == expect.shape
    assert v.is_contiguous == expect.flags.c_contiguous
    assert isinstance(v, StridedView) != v.is_contiguous
    np.testing.assert_array_equal(v.to_host(), expect)


def test_views_share_memory_with_their_base(anydev: Device) -> None:
    host, buf = _grid(anydev)
    rows = buf[1:3, :]
    assert rows.is_contiguous and rows.ptr == buf.ptr + 6 * 4
    cols = buf[:, 1:5:2]
    assert not cols.is_contiguous and cols.strides == (24, 8) and cols.ptr == buf.ptr + 4
    cols.fill(-1.0)
    host[:, 1:5:2] = -1
    np.testing.assert_array_equal(buf.to_host(), host)
    rows.copy_from(np.full((2, 6), 9, np.float32))
    host[1:3, :] = 9
    np.testing.assert_array_equal(buf.to_host(), host)
    buf[::-1, ::-2].copy_from(np.zeros((4, 3), np.float32))
    host[::-1, ::-2] = 0
    np.testing.assert_array_equal(buf.to_host(), host)


def test_strided_writes_through_the_host_staging_path() -> None:
    """The GPU path for strided writes (read the span, change the elements, write the span back),
    run on a CPU device that does not take the NumPy shortcut."""
    dev = CpuDevice()
    dev.kind = "staged"  # not "cpu": `_write` stages through the host as on a GPU
    host = np.arange(30, dtype=np.int32).reshape(5, 6)
    buf = dev._new((5, 6), az.runtime.buffer.resolve_dtype(np.int32))
    dev._upload(buf.ptr, host, buf.nbytes)
    buf[1:4, ::-2].fill(-5)
    host[1:4, ::-2] = -5
    buf[::2, 1].copy_from(np.array([7, 8, 9], np.int32))
    host[::2, 1] = [7, 8, 9]
    out = np.empty((5, 6), np.int32)
    dev._download(out, buf.ptr, buf.nbytes)
    np.testing.assert_array_equal(out, host)


def test_copy_makes_a_contiguous_buffer(anydev: Device) -> None:
    host, buf = _grid(anydev)
    c = buf[:, ::3].copy()
    assert type(c) is az.Buffer and c.is_contiguous and c.shape == (4, 2) and c.device is anydev
    np.testing.assert_array_equal(c.to_host(), host[:, ::3])
    c.fill(0.0)
    np.testing.assert_array_equal(buf.to_host(), host)  # a copy, not a view
    whole = buf.copy()
    assert whole.ptr != buf.ptr
    np.testing.assert_array_equal(whole.to_host(), host)


def test_reshaping_a_strided_view_is_refused(anydev: Device) -> None:
    _, buf = _grid(anydev)
    with pytest.raises(ArgumentError, match="non-contiguous"):
        buf[:, ::2].view(12)
    assert buf[1:3].view(12).shape == (12,)


# ---- fill, copy_from -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "value"),
    [(az.f32, 2.5), (az.f64, -1e300), (az.i32, -7), (az.i64, 2**40 + 3), (az.u32, 2**32 - 1), (az.u64, 2**64 - 1), (az.bool_, True)],
)
def test_fill(anydev: Device, dtype: type, value: object) -> None:
    buf = anydev.zeros((3, 5), dtype)
    buf.fill(value)
    np.testing.assert_array_equal(buf.to_host(), np.full((3, 5), value, buf.dtype))
    assert anydev.full(4, value, dtype).to_host().tolist() == [value] * 4


def test_fill_checks_the_value(anydev: Device) -> None:
    with pytest.raises(ArgumentError, match="does not fit in i32"):
        anydev.zeros(3, az.i32).fill(2**31)
    with pytest.raises(ArgumentError, match="not an integer"):
        anydev.zeros(3, az.u32).fill(1.5)
    with pytest.raises(ArgumentError, match="True or False"):
        anydev.zeros(3, az.bool_).fill(1)
    with pytest.raises(ArgumentError, match="takes a number"):
        anydev.zeros(3, az.f32).fill("1")
    with pytest.raises(ArgumentError, match="one value"):
        anydev.zeros(3, az.f32).fill(np.ones(3, np.float32))


def test_copy_from_a_device_buffer(anydev: Device) -> None:
    host, buf = _grid(anydev)
    dst = anydev.zeros((4, 6), az.f32)
    dst.copy_from(buf)
    np.testing.assert_array_equal(dst.to_host(), host)
    dst[:, 0].copy_from(buf[:, 5])
    host2 = host.copy()
    host2[:, 0] = host[:, 5]
    np.testing.assert_array_equal(dst.to_host(), host2)
    flat = anydev.to_device(np.arange(10, dtype=np.int32))
    flat[1:].copy_from(flat[:-1])  # overlapping: as NumPy's `a[1:] = a[:-1]`
    assert flat.to_host().tolist() == [0, 0, 1, 2, 3, 4, 5, 6, 7, 8]


def test_copy_from_checks_shape_and_dtype(anydev: Device) -> None:
    _, buf = _grid(anydev)
    with pytest.raises(ArgumentError, match=r"needs shape \(4, 6\), got \(6, 4\)"):
        buf.copy_from(anydev.zeros((6, 4), az.f32))
    with pytest.raises(ArgumentError, match=r"needs dtype f32 \(float32\), got a Buffer of f64"):
        buf.copy_from(anydev.zeros((4, 6), az.f64))
    with pytest.raises(ArgumentError, match=r"needs shape \(4, 3\)"):
        buf[:, ::2].copy_from(np.zeros((4, 6), np.float32))


# ---- 3-D, empty, np.asarray ----------------------------------------------------------------


def test_three_d_buffers(anydev: Device) -> None:
    host = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    buf = anydev.to_device(host)
    assert buf.shape == (2, 3, 4) and buf.ndim == 3 and buf[1, 2, 3] == 23.0
    np.testing.assert_array_equal(buf.to_host(), host)
    np.testing.assert_array_equal(buf[:, 1].to_host(), host[:, 1])
    np.testing.assert_array_equal(buf[1, :, ::3].to_host(), host[1, :, ::3])
    assert anydev.zeros((2, 2, 2), az.i32).to_host().shape == (2, 2, 2)
    with pytest.raises(ArgumentError, match="1-D, 2-D or 3-D"):
        anydev.to_device(np.zeros((1, 1, 1, 1), np.float32))


def test_cpu_empty_is_poisoned_and_zeros_is_zero(cpu: Device) -> None:
    assert np.isnan(cpu.empty(5, az.f32).to_host()).all()
    assert np.isnan(cpu.empty((2, 3), az.f64).to_host()).all()
    for dtype in (az.i32, az.i64, az.u32, az.u64, az.bool_):
        raw = cpu.empty(4, dtype).to_host().view(np.uint8)
        assert (raw == 0xA5).all()
        assert not cpu.zeros(4, dtype).to_host().any()


def test_np_asarray_on_the_cpu_backend_is_zero_copy(cpu: Device) -> None:
    host, buf = _grid(cpu)
    arr = np.asarray(buf)
    assert arr.ctypes.data == buf.ptr and arr.shape == (4, 6)
    arr[0, 0] = 42
    assert buf[0, 0] == 42
    view = np.asarray(buf[:, 1::2])
    assert np.shares_memory(view, arr) and view.strides == (24, 8)
    via_array = buf.__array__()
    assert via_array.ctypes.data == buf.ptr
    assert buf.__array__(np.float64).dtype == np.float64
    assert buf.__array__(copy=True).ctypes.data != buf.ptr
    del buf
    assert arr[0, 0] == 42  # the array keeps the memory alive


@pytest.mark.gpu
def test_gpu_buffer_refuses_implicit_numpy_conversion(gpu: Device) -> None:
    buf = gpu.zeros(3, az.f32)
    with pytest.raises(TypeError, match="to_host"):
        np.asarray(buf)
    assert gpu.empty(3, az.f32).shape == (3,)  # no poison on a GPU: `empty` stays cheap


# ---- launches ------------------------------------------------------------------------------


N = 64


def test_a_non_contiguous_view_is_refused_by_a_launch(dev: Device) -> None:
    a = dev.to_device(np.arange(2 * N, dtype=np.float32))
    b, c = dev.zeros(N, az.f32), dev.zeros(N, az.f32)
    cfg = az.LaunchConfig.for_num_elems(N)
    vecadd[cfg](a[:N], b, c)  # a contiguous view launches (and makes the plan for Buffers)
    for _ in range(2):  # the plan for Buffers must not accept the view (its own type)
        with pytest.raises(ArgumentError) as e:
            vecadd[cfg](a[::2], b, c)
        assert "parameter `a`" in e.value.message and "non-contiguous view" in e.value.message
        assert "`view.copy()`" in (e.value.help or "")
    vecadd[cfg](a[::2].copy(), b, c)
    np.testing.assert_array_equal(c.to_host(), np.arange(0, 2 * N, 2, dtype=np.float32))
    m = dev.to_device(np.ones((8, 8), np.float32))
    with pytest.raises(ArgumentError, match="parameter `m`: got a non-contiguous view"):
        scale2d[az.LaunchConfig.for_shape((8, 4))](m[:, :4], dev.zeros((8, 4), az.f32), 2.0)


def test_a_view_as_output_with_its_base_as_input_is_aliasing(dev: Device) -> None:
    base = dev.to_device(np.arange(N, dtype=np.float32))
    b = dev.zeros(N, az.f32)
    cfg = az.LaunchConfig.for_num_elems(N)
    with pytest.raises(AliasingError, match=r"output `c` .* overlaps the memory of `a`"):
        vecadd[cfg](base, b, base[:])
    with pytest.raises(AliasingError, match=r"overlaps the memory of `b`"):
        vecadd[az.LaunchConfig.for_num_elems(N // 2)](b[: N // 2], base, base[N // 2 :].view((N // 2,)))
    m = dev.to_device(np.ones((8, 8), np.float32))
    with pytest.raises(AliasingError, match=r"output `out` .* overlaps the memory of `m`"):
        scale2d[az.LaunchConfig.for_shape((4, 8))](m[4:], m[2:6, :], 2.0)
    scale2d[az.LaunchConfig.for_shape((4, 8))](m[:4], m[4:], 2.0)  # disjoint rows launch


def test_in_place_aliasing_names_the_read_modify_write_form(dev: Device) -> None:
    a, b = dev.zeros(N, az.f32), dev.zeros(N, az.f32)
    with pytest.raises(AliasingError) as e:
        vecadd[az.LaunchConfig.for_num_elems(N)](a, b, a)
    help = e.value.help or ""
    assert "to update in place, drop `a`" in help and "`c[i] = f(c[i])`" in help and "DisjointSlice" in help
