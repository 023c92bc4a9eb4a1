"""What `anodize compile -v` and `anodize doctor` print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from anodize.cli import main

ROOT = Path(__file__).resolve().parents[1]
VECADD = str(ROOT / "fixtures" / "accept" / "vecadd.py")


def _compile_v(capsys: pytest.CaptureFixture[str], arch: str) -> str:
    assert main(["compile", "-v", "--arch", arch, VECADD, "-o", "/dev/null"]) == 0
    return capsys.readouterr().err


def test_compile_v_cpu_prints_no_none(capsys: pytest.CaptureFixture[str]) -> None:
    err = _compile_v(capsys, "cpu")
    assert re.fullmatch(r"vecadd: cpu \(llvmlite host JIT\), bounds checks left=\d+, compiled in \d+\.\d ms\n", err), err
    assert "None" not in err


def test_compile_v_says_loaded_from_cache_and_names_ptxas(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from anodize.codegen.toolchain import find_ptxas

    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ANODIZE_CACHE", raising=False)
    first = _compile_v(capsys, "sm_90")
    second = _compile_v(capsys, "sm_90")
    assert re.search(r"bounds checks left=\d+, compiled in \d+\.\d ms\n", first), first
    assert "bounds checks left=0, loaded from cache\n" in second and "compile" not in second, second
    ptxas = find_ptxas()
    for out in (first, second):
        assert "None" not in out
        if ptxas is None:
            assert "registers and spills unknown (no cubin)" in out and "  ptxas: not found" in out
        else:
            assert re.search(r"registers=\d+, spills=\d+/\d+", out), out
            assert f"  ptxas: {ptxas} (version " in out


def test_compile_v_without_ptxas(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from anodize.codegen.gpu import ptx
    from anodize.codegen import toolchain

    monkeypatch.setenv("ANODIZE_CACHE", "off")
    monkeypatch.setattr(toolchain, "find_ptxas", lambda: None)
    monkeypatch.setattr(ptx, "find_ptxas", lambda: None)
    err = _compile_v(capsys, "sm_90")
    assert "vecadd: sm_90, registers and spills unknown (no cubin), bounds checks left=0, compiled in" in err, err
    assert "  ptxas: not found (no cubin: the driver JIT-compiles the PTX at load" in err
    assert "None" not in err


def _doctor(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "None" not in out, out
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in out.splitlines())  # type: ignore[misc]


def test_doctor_without_a_gpu_says_so(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    info = _doctor(capsys)
    assert info["gpu"] == "NO GPU: GPUs hidden by ANODIZE_DEVICE=cpu; kernels run on the CPU backend"
    assert info["gpu count"] == "0"
    assert info["compute capability"].startswith("none (no GPU;")
    assert info["ptxas version"] != "" and info["nvptx target"] == "yes"


@pytest.mark.gpu
def test_doctor_prints_the_compute_capability(capsys: pytest.CaptureFixture[str]) -> None:
    import anodize as az

    info = _doctor(capsys)
    cc = az.device(0).compute_capability
    assert cc is not None
    assert re.match(rf"(0: )?{cc[0]}\.{cc[1]} \(sm_\d+\)", info["compute capability"]), info
    assert not info["gpu"].startswith("NO GPU")


def test_compile_of_a_generic_kernel_names_the_command_line_to_give(capsys: pytest.CaptureFixture[str]) -> None:
    """The command's own spelling (`--specialize`), not the Python API's, and it then compiles."""
    target = str(ROOT / "examples" / "generic_saxpy.py") + ":saxpy"
    assert main(["compile", "--emit", "ptx", target]) == 2
    err = capsys.readouterr().err
    assert "is generic" in err and f"help: anodize compile {target} --specialize T=" in err, err
    assert ".specialize(" not in err
    hint = err.split("help: anodize compile ", 1)[1].split()
    assert main(["compile", "--emit", "llvm", "--arch", "cpu", *hint, "-o", "/dev/null"]) == 0


def test_run_of_a_program_that_used_no_device_says_so(tmp_path: Path) -> None:
    import subprocess
    import sys

    prog = tmp_path / "plain.py"
    prog.write_text("print('hello')\n")
    r = subprocess.run([sys.executable, "-m", "anodize", "run", str(prog)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "hello\n", r
    assert r.stderr == "anodize: plain.py made no buffer and launched no kernel\n", r.stderr
