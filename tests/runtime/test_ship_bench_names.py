"""bench/ship_bench.py's traced modes reach into the runtime by name (the first-result timeline
wraps the runtime's first-GPU calls; the custom-op trace times `az.torch`'s parts).  They run
only on a GPU, so a rename elsewhere broke them unseen (`BuiltKernel._load_prebuilt`, renamed
`load_prebuilt`, crashed the H200 run): here every name they read resolves, on the CPU."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ship_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ship_bench_names", ROOT / "bench" / "ship_bench.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_name_the_first_result_timeline_wraps_exists() -> None:
    sb = _ship_bench()
    assert sb.TRACE_WRAPS
    for module, path, _label, _then in sb.TRACE_WRAPS:
        owner: object = importlib.import_module(module)
        for part in path.split("."):
            assert hasattr(owner, part), f"ship_bench first-result --trace wraps {module}.{path}: no `{part}`"
            owner = getattr(owner, part)
        assert callable(owner), f"{module}.{path}"
    cuda_device = pytest.importorskip("anodize.runtime.cuda_device")
    for name in sb.CUDA_DEVICE_WRAPS:
        assert callable(getattr(cuda_device.CudaDevice, name, None)), f"CudaDevice.{name}"


def test_the_traced_scripts_compile() -> None:
    sb = _ship_bench()
    for name, code in (("FIRST_TRACE", sb.FIRST_TRACE), ("CUPY_TRACE", sb.CUPY_TRACE.format(src=sb.CUDA_VECADD)),
                       ("ANODIZE_FIRST", sb.ANODIZE_FIRST), ("CUPY_FIRST", sb.CUPY_FIRST.format(src=sb.CUDA_VECADD))):
        compile("import time; T0 = time.perf_counter()\n" + code, name, "exec")


def test_the_custom_op_trace_runs_on_the_cpu_backend(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`custom-op --cpu --trace`: every stage the GPU trace times, on torch's CPU tensors (what
    it reads of anodize/torch.py's internals resolves and runs)."""
    pytest.importorskip("torch")
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    sb = _ship_bench()
    sb.custom_op_trace(200, "cpu")
    out = capsys.readouterr().out
    assert "op body without the dispatcher" in out and "plain launch" in out
    assert "vecadd" in sys.modules


def test_the_custom_op_on_the_fake_gpu_runs() -> None:
    """`custom-op --fake` (the op's CUDA host path on tests/fakecuda.py's fake GPU) runs and
    prints its rows; a process of its own, since it dresses torch's CPU tensors as CUDA ones."""
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "ship_bench.py"), "custom-op", "--fake", "--calls", "1000"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "az.torch op(a, b)" in r.stdout and "custom op over the plain launch" in r.stdout


def test_the_first_result_trace_script_runs_up_to_the_gpu(tmp_path: Path) -> None:
    """FIRST_TRACE in a fresh process beside a built vecadd package: every wrap resolves in the
    script itself; without a GPU it stops at `az.device(0)` with the no-GPU LaunchError (with
    one, it prints its timeline)."""
    sb = _ship_bench()
    subprocess.run([sys.executable, "-m", "anodize", "build", str(ROOT / "examples" / "vecadd.py"), "--arch", "sm_90",
                    "-o", str(tmp_path)], check=True, capture_output=True, timeout=300)
    r = subprocess.run([sys.executable, "-c", "import time; T0 = time.perf_counter()\n" + sb.FIRST_TRACE],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False)
    if r.returncode == 0:
        assert "TRACE " in r.stdout
    else:
        assert "no CUDA GPU found" in r.stderr, r.stderr
        assert r.stderr.count("File ") == 1, r.stderr  # raised by the script's own `az.device(0)` line, no wrap failed
