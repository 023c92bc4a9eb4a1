"""Devices and buffers: selection, allocation, copies, views, the array interfaces and DLPack."""

from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np
import pytest

import anodize as az
from anodize import ArgumentError
from anodize.language.vocab import SCALARS
from anodize.runtime import dlpack
from anodize.runtime.device import Device

DTYPES = [s.dtype for s in SCALARS.values()]


def _sample(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(0)
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    return (rng.random(shape) * 100).astype(dtype)


def test_import_does_not_touch_cuda() -> None:
    code = "import sys, anodize; print(any(m == 'cuda' or m.startswith('cuda.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_default_device_notice_is_one_line() -> None:
    code = "import anodize as az; d = az.device(); d2 = az.device(); print(d.kind, d is d2)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"ANODIZE_DEVICE": "cpu", "PATH": ""}
    )
    assert out.stdout.strip() == "cpu True"
    assert out.stderr == "anodize: no CUDA GPU found; using the CPU backend\n"


def test_device_spellings(cpu: Device) -> None:
    assert az.device("cpu") is cpu and az.device("CPU") is cpu and az.device(cpu) is cpu
    assert cpu.kind == "cpu" and cpu.compute_capability is None and cpu.stream is None
    with pytest.raises(ArgumentError, match="unknown device"):
        az.device("tpu")
    if not az.runtime.gpu_available():
        with pytest.raises(az.LaunchError, match="no CUDA GPU found"):
            az.device(0)
        with pytest.raises(az.LaunchError, match="no CUDA GPU found"):
            az.device("cuda:0")


def test_gpu_available_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from anodize.runtime import probe

    monkeypatch.setattr(probe, "_count", None)
    monkeypatch.setattr(probe, "_probe", lambda: 1 // 0)
    assert probe.gpu_available() is False
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    assert probe.gpu_count() == 0


def test_doctor_info_keys() -> None:
    info = az.runtime.doctor_info()
    for key in ("gpu", "driver version", "cuda version (driver)", "compute capability", "ptxas",
                "ptxas version", "nvjitlink", "llvmlite", "nvptx target", "cache dir"):
        assert key in info
    assert info["nvptx target"] == "yes"


def _devices() -> list[object]:
    return ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)]


@pytest.fixture(params=_devices())
def anydev(request: pytest.FixtureRequest) -> Device:
    return az.device(request.param)


@pytest.mark.parametrize("dtype", DTYPES, ids=[d.name for d in DTYPES])
@pytest.mark.parametrize("shape", [(0,), (7,), (1000,), (3, 5), (64, 1)])
def test_round_trip(anydev: Device, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    host = _sample(dtype, shape)
    buf = anydev.to_device(host)
    assert buf.shape == shape and buf.dtype == dtype and buf.ndim == len(shape) and len(buf) == shape[0]
    assert buf.size == host.size and buf.nbytes == host.nbytes and buf.device is anydev
    out = buf.to_host()
    np.testing.assert_array_equal(out, host)
    assert out.flags.c_contiguous and out.base is None or out.base is not host


def test_to_device_copies_non_contiguous(anydev: Device) -> None:
    host = np.arange(20, dtype=np.int64)[::2]
    np.testing.assert_array_equal(anydev.to_device(host).to_host(), host)
    fortran = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(anydev.to_device(fortran).to_host(), fortran)


def test_to_device_rejects(anydev: Device) -> None:
    with pytest.raises(ArgumentError, match="1-D, 2-D or 3-D"):
        anydev.to_device(np.zeros((2, 2, 2, 2), np.float32))
    with pytest.raises(ArgumentError, match="not an anodize element type"):
        anydev.to_device(np.zeros(3, np.complex64))
    with pytest.raises(ArgumentError, match="already on a device"):
        anydev.to_device(anydev.empty(3, az.f32))


@pytest.mark.parametrize(
    "dtype",
    [az.f32, az.f64, az.i32, az.i64, az.u32, az.u64, az.bool_, az.f16, az.bf16, az.i8, az.i16, az.u8, az.u16,
     np.float32, np.float16, "f64", "bf16", np.dtype("int32"), np.dtype("uint8")],
)
def test_empty_and_zeros_dtypes(anydev: Device, dtype: object) -> None:
    z = anydev.zeros((4, 3), dtype)
    assert z.shape == (4, 3)
    assert not z.to_host().any()
    assert anydev.empty(5, dtype).dtype == z.dtype


def test_bad_shapes(anydev: Device) -> None:
    for shape in [(), (1, 2, 3, 4), -1, (2, -1), 2.5, True]:
        with pytest.raises(ArgumentError):
            anydev.empty(shape, az.f32)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="az.f32"):
        anydev.empty(3, complex)


def test_views_share_memory(anydev: Device) -> None:
    buf = anydev.to_device(np.arange(10, dtype=np.int32))
    v = buf[2:6]
    assert v.shape == (4,) and v.ptr == buf.ptr + 8
    np.testing.assert_array_equal(v.to_host(), [2, 3, 4, 5])
    v.copy_from(np.array([-1, -2, -3, -4], np.int32))
    np.testing.assert_array_equal(buf.to_host(), [0, 1, -1, -2, -3, -4, 6, 7, 8, 9])
    assert buf[-3:].to_host().tolist() == [7, 8, 9] and buf[8:3].shape == (0,)
    m = buf.view((2, 5))
    assert m.shape == (2, 5) and m.ptr == buf.ptr
    np.testing.assert_array_equal(m[1:2].to_host(), [[-4, 6, 7, 8, 9]])
    assert not buf[::2].is_contiguous and buf[::2].to_host().tolist() == [0, -1, -3, 6, 8]
    assert buf[3] == -2 and buf[-1] == 9
    with pytest.raises(ArgumentError, match="cannot view"):
        buf.view((3, 3))


def test_copy_from_checks(anydev: Device) -> None:
    buf = anydev.empty(4, az.f32)
    with pytest.raises(ArgumentError, match="dtype f32"):
        buf.copy_from(np.zeros(4, np.float64))
    with pytest.raises(ArgumentError, match=r"shape \(4,\)"):
        buf.copy_from(np.zeros(5, np.float32))


def test_cpu_buffer_interfaces(cpu: Device) -> None:
    buf = cpu.to_device(np.arange(6, dtype=np.float64).reshape(2, 3))
    assert not hasattr(buf, "__cuda_array_interface__")
    assert buf.__dlpack_device__() == (1, 0)
    assert buf.ptr % 64 == 0
    arr = np.asarray(buf)  # __array_interface__: zero-copy
    assert arr.ctypes.data == buf.ptr


NUMPY_DLPACK = [d for d in DTYPES if d.name not in ("bfloat16", "float8_e4m3fn", "float8_e5m2")]  # NumPy's from_dlpack: no kDLBfloat, no FP8


def test_dlpack_f8_codes(cpu: Device) -> None:
    from anodize.runtime.dlpack import read_capsule

    for name, code in (("f8e4m3", "code10"), ("f8e5m2", "code12")):  # DLPack 1.1's kDLFloat8_e4m3fn, kDLFloat8_e5m2
        t = read_capsule(cpu.empty((2, 3), SCALARS[name].dtype).__dlpack__())
        assert t.dtype_text == code + "8" and t.itemsize == 1 and t.shape == (2, 3)


def test_dlpack_bf16_is_kdlbfloat(cpu: Device) -> None:
    from anodize.runtime.dlpack import read_capsule

    host = np.arange(12, dtype=np.float32).reshape(3, 4).astype(SCALARS["bf16"].dtype)
    buf = cpu.to_device(host)
    t = read_capsule(buf.__dlpack__())
    assert t.bf16 and t.itemsize == 2 and t.shape == (3, 4)
    assert t.dtype is None  # (bf16 has no NumPy dtype of its own: read without ml_dtypes)


@pytest.mark.parametrize("dtype", NUMPY_DLPACK, ids=[d.name for d in NUMPY_DLPACK])
def test_dlpack_round_trip_numpy(cpu: Device, dtype: np.dtype) -> None:
    host = _sample(dtype, (3, 4))
    buf = cpu.to_device(host)
    arr = np.from_dlpack(buf)
    assert arr.dtype == dtype and arr.shape == (3, 4)
    np.testing.assert_array_equal(arr, host)
    assert arr.ctypes.data == buf.ptr  # zero-copy
    arr[0, 0] = arr[1, 1]
    assert buf.to_host()[0, 0] == host[1, 1]


def test_dlpack_keeps_memory_alive_and_releases(cpu: Device) -> None:
    gc.collect()
    before = dlpack.live_exports()
    buf = cpu.to_device(np.arange(5, dtype=np.int64))
    arr = np.from_dlpack(buf)
    del buf
    gc.collect()
    assert arr.tolist() == [0, 1, 2, 3, 4] and dlpack.live_exports() == before + 1
    del arr
    gc.collect()
    assert dlpack.live_exports() == before
    cap = cpu.to_device(np.arange(3, dtype=np.int32)).__dlpack__()  # never consumed
    assert dlpack.live_exports() == before + 1
    del cap
    gc.collect()
    assert dlpack.live_exports() == before


def test_dlpack_capsule_reads_back(cpu: Device) -> None:
    buf = cpu.to_device(np.ones((2, 5), np.uint32))
    t = dlpack.read_capsule(buf.__dlpack__())
    assert (t.ptr, t.shape, t.strides, t.dtype, t.device_type) == (buf.ptr, (2, 5), (5, 1), np.dtype(np.uint32), 1)


def test_dlpack_refuses_copy_and_other_device(cpu: Device) -> None:
    buf = cpu.to_device(np.ones(3, np.float32))
    with pytest.raises(BufferError):
        buf.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        buf.__dlpack__(dl_device=(2, 0))


def test_devices_used_and_describe(cpu: Device) -> None:
    from anodize.runtime.device import devices_used

    cpu.empty(1, az.f32)
    assert cpu in devices_used()
    assert cpu.describe().startswith("cpu (")


# ---- GPU-only buffer behaviour ------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_buffer_cuda_array_interface(gpu: Device) -> None:
    buf = gpu.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    cai = buf.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (3, 4) and cai["typestr"] == "<f4"
    assert cai["data"] == (buf.ptr, False) and cai["strides"] is None
    assert cai["stream"] == int(gpu.stream.handle)
    assert buf.__dlpack_device__() == (2, gpu.index)
    t = dlpack.read_capsule(buf.__dlpack__(stream=-1))
    assert (t.ptr, t.shape, t.device_type) == (buf.ptr, (3, 4), 2)
    assert gpu.compute_capability is not None and gpu.name


@pytest.mark.gpu
def test_gpu_cupy_reads_our_buffer() -> None:
    cp = pytest.importorskip("cupy")
    dev = az.device(0)
    host = np.arange(100, dtype=np.float64)
    buf = dev.to_device(host)
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(buf)), host)  # CAI, zero-copy
    np.testing.assert_array_equal(cp.asnumpy(cp.from_dlpack(buf)), host)


@pytest.mark.gpu
def test_gpu_torch_reads_our_buffer() -> None:
    torch = pytest.importorskip("torch")
    dev = az.device(0)
    host = np.arange(24, dtype=np.int32).reshape(4, 6)
    buf = dev.to_device(host)
    t = torch.from_dlpack(buf)
    assert t.is_cuda and tuple(t.shape) == (4, 6) and t.data_ptr() == buf.ptr
    np.testing.assert_array_equal(t.cpu().numpy(), host)
    t.add_(1)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(buf.to_host(), host + 1)
