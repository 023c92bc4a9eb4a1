"""`anodize build`: a module's kernels compiled ahead of time into an importable package.

The package is built here from a copy of examples/vecadd.py; the copy is then moved away and
the package imported in a fresh process whose import system refuses llvmlite, the checker,
codegen's lowering and the front end's IR and symbol table (a meta-path hook), so the loader
and its first launch provably need none of them nor the source.  Its launches run on the fake GPU of tests/fakecuda.py (the runtime's GPU path up to
cuda.core's launch), which shows every run-time check still applies.  The `gpu` twin
launches it for real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from anodize.build import build_package
from anodize.cli import main as cli_main
from anodize.language.errors import LaunchError
from anodize.runtime import prebuilt

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

BLOCKER = textwrap.dedent(
    """
    import sys
    BLOCKED = ("llvmlite", "anodize.checker", "anodize.codegen.llvm.lower", "anodize.codegen.driver",
               "anodize.codegen.gpu.ptx", "anodize.codegen.cpu.backend", "anodize.language.front", "anodize.language.typer",
               "anodize.language.ir", "anodize.language.symbols")
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError(f"blocked for this test: {name}")
            return None
    sys.meta_path.insert(0, _Block())
    """
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """OUT, holding `vecadd_kernels/` built for sm_80 and sm_90 from a copy of examples/vecadd.py."""
    tmp = tmp_path_factory.mktemp("build")
    src = tmp / "src"
    src.mkdir()
    shutil.copy(ROOT / "examples" / "vecadd.py", src / "vecadd.py")
    out = tmp / "out"
    assert cli_main(["build", str(src / "vecadd.py"), "--arch", "sm_80,sm_90", "-o", str(out)]) == 0
    return out


def _run(out: Path, body: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = BLOCKER + f"sys.path[:0] = [{str(out)!r}, {str(TESTS)!r}]\n" + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=str(out))


def test_package_layout(built: Path) -> None:
    pkg = built / "vecadd_kernels"
    names = sorted(p.name for p in pkg.iterdir())
    assert names == ["__init__.py", "__init__.pyi", "anodize_build.json", "py.typed",
                     "vecadd.sm_80.cubin", "vecadd.sm_90.cubin", "vecadd.sm_90.ptx"]
    manifest = json.loads((pkg / "anodize_build.json").read_text())
    k = manifest["kernels"]["vecadd"]
    assert k["params"] == [["a", "Slice", "f32"], ["b", "Slice", "f32"], ["c", "DisjointSlice", "f32"]]
    assert k["contract"]["requires"]["source"] == "len(a) == len(c) and len(b) == len(c)"
    assert (pkg / "vecadd.sm_80.cubin").read_bytes()[:4] == b"\x7fELF"
    assert ".target sm_90" in (pkg / "vecadd.sm_90.ptx").read_text()
    assert "vecadd: BuiltKernel[[Slice[f32], Slice[f32], DisjointSlice[f32]]]" in (pkg / "__init__.pyi").read_text()


def test_loader_without_llvmlite_or_source_keeps_every_check(built: Path) -> None:
    """Imported with llvmlite, the checker and the front end blocked and the source gone, the
    loader launches on the fake GPU and refuses what any kernel's launch refuses."""
    src = Path(json.loads((built / "vecadd_kernels" / "anodize_build.json").read_text())["kernels"]["vecadd"]["source"]["path"])
    hidden = src.with_suffix(".moved")
    src.rename(hidden)
    try:
        r = _run(built, """
            import time
            t0 = time.perf_counter()
            import vecadd_kernels as K
            import_ms = (time.perf_counter() - t0) * 1e3
            light = [m for m in ("numpy", "anodize.runtime.prebuilt", "anodize.runtime.launch", "cuda") if m in sys.modules]
            assert not light, f"importing the package loaded {light}"
            import ctypes
            import numpy as np
            import anodize as az
            import fakecuda
            dev, calls = fakecuda.record_launches(fakecuda.Patch())
            n = 1000
            a = dev.to_device(np.ones(n, np.float32)); b = dev.to_device(np.ones(n, np.float32))
            c = dev.empty(n, az.f32)
            cfg = az.LaunchConfig.for_num_elems(n, block=256)
            K.vecadd[cfg](a, b, c)
            assert len(calls) == 1, calls
            stream, cuconf, handle, *flat = calls[0]
            assert flat[0] == a.ptr and flat[1] == n and flat[4] == c.ptr, flat
            assert handle == ("kernel handle", "vecadd"), handle
            def refused(exc, fn, needle):
                try:
                    fn()
                except exc as e:
                    assert needle in str(e), (needle, str(e))
                    return
                raise AssertionError(f"not refused: {needle}")
            refused(az.ArgumentError, lambda: K.vecadd[cfg](a, b, dev.empty(n, az.f64)), "parameter `c`")
            refused(az.AliasingError, lambda: K.vecadd[cfg](a, b, a), "output `c`")
            refused(az.ContractViolation, lambda: K.vecadd[cfg](a, b, dev.empty(n + 1, az.f32)), "len(a) == len(c)")
            refused(az.LaunchError, lambda: K.vecadd[az.LaunchConfig(4, 128)](a, b, c), "block")
            cpu = az.device("cpu")
            x = cpu.to_device(np.ones(n, np.float32))
            refused(az.LaunchError, lambda: K.vecadd[cfg](x, x, cpu.empty(n, az.f32)), "no code for")
            # a fault recorded by the kernel surfaces at the next synchronisation, located in its source
            loaded = K.vecadd.store.loaded[("loaded-built", id(dev))]
            rec = (ctypes.c_uint32 * 2).from_address(loaded.fault_address)
            rec[0] = 1
            dev.faults.dirty = True
            refused(az.KernelFault, dev.check, "vecadd.py")
            assert len(calls) == 1, "a refused launch launched"
            banned = [m for m in sys.modules if m.startswith(("llvmlite", "anodize.checker", "anodize.language.front"))]
            assert not banned, banned
            print(f"OK import_ms={import_ms:.1f}")
        """)
    finally:
        hidden.rename(src)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout


def test_tampered_artifact_is_refused(built: Path, tmp_path: Path) -> None:
    pkg = tmp_path / "vecadd_kernels"
    shutil.copytree(built / "vecadd_kernels", pkg)
    cubin = pkg / "vecadd.sm_90.cubin"
    cubin.write_bytes(cubin.read_bytes()[:-8])
    manifest = prebuilt.read_manifest(str(pkg))
    with pytest.raises(LaunchError, match="does not match the hash"):
        prebuilt.compiled_from_manifest(str(pkg), manifest, "vecadd", "sm_90")
    ck = prebuilt.compiled_from_manifest(str(pkg), manifest, "vecadd", "sm_86")  # the intact sm_80 cubin
    assert ck.arch == "sm_80" and ck.cubin and ck.contract is not None


def test_manifest_names_agree() -> None:
    from anodize import built
    from anodize.checker import stale_artifacts

    assert built._MANIFEST == prebuilt.MANIFEST == stale_artifacts.MANIFEST
    assert built._FORMAT == prebuilt.FORMAT


def test_target_choice() -> None:
    targets = {"sm_80": {"files": {"cubin": "x"}}, "sm_90": {"files": {"cubin": "y", "ptx": "z"}}}
    assert prebuilt.pick_target("k", targets, "sm_80") == ("sm_80", "cubin")
    assert prebuilt.pick_target("k", targets, "sm_89") == ("sm_80", "cubin")  # same major, later minor
    assert prebuilt.pick_target("k", targets, "sm_90") == ("sm_90", "cubin")
    assert prebuilt.pick_target("k", targets, "sm_120") == ("sm_90", "ptx")  # newer: the driver JITs the PTX
    with pytest.raises(LaunchError, match="none of which runs on this GPU"):
        prebuilt.pick_target("k", targets, "sm_75")
    assert prebuilt.pick_target("k", {"sm_90a": {"files": {"cubin": "w"}}}, "sm_90") == ("sm_90a", "cubin")
    with pytest.raises(LaunchError):
        prebuilt.pick_target("k", {"sm_90a": {"files": {"cubin": "w", "ptx": "v"}}}, "sm_100")


def test_check_reports_a_stale_artifact(tmp_path: Path) -> None:
    src = tmp_path / "vecadd.py"
    shutil.copy(ROOT / "examples" / "vecadd.py", src)
    out = tmp_path / "out"
    build_package(src, "sm_90", out, {}, lambda m: None)
    r = subprocess.run([sys.executable, "-m", "anodize", "check", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    src.write_text(src.read_text().replace("a[i] + b[i]", "a[i] - b[i]"))
    r = subprocess.run([sys.executable, "-m", "anodize", "check", str(out), "--format", "concise"], capture_output=True, text=True)
    assert r.returncode == 1
    line = next(i for i, t in enumerate(src.read_text().splitlines(), 1) if t.startswith("def vecadd"))
    assert f"vecadd.py:{line}:5: az-stale-artifact" in r.stdout, r.stdout
    src.unlink()  # a deployed package without its source is not judged
    r = subprocess.run([sys.executable, "-m", "anodize", "check", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_build_refuses_a_rejected_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.py"
    src.write_text(textwrap.dedent("""
        from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread

        @launch_contract(domain=1, block=128)
        @kernel
        def shift(a: Slice[f32], c: DisjointSlice[f32]) -> None:
            i = thread.index_1d()
            if i in c:
                c[i + 1] = a[i]
    """))
    assert cli_main(["build", str(src), "--arch", "sm_90", "-o", str(tmp_path / "out")]) == 1
    assert "az-disjoint-index" in capsys.readouterr().err
    assert not (tmp_path / "out" / "bad_kernels").exists()
    assert cli_main(["build", str(src), "--arch", "gfx90a", "-o", str(tmp_path / "out")]) == 2


def test_generic_and_tile_kernels_build_and_launch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A generic module built for one specialisation (a kernel still missing a binding is skipped
    with a notice), and a tile kernel, whose launches get their block from the package."""
    out = tmp_path / "out"
    assert cli_main(["build", str(ROOT / "examples" / "generic_saxpy.py"), "--arch", "sm_90", "--specialize", "T=f32", "-o", str(out)]) == 0
    assert "skipped generic kernel `power`: name its specialisation (--const k=...)" in capsys.readouterr().err
    assert cli_main(["build", str(ROOT / "examples" / "tile_add.py"), "--arch", "sm_90", "-o", str(out)]) == 0
    r = _run(out, """
        import numpy as np
        import anodize as az
        import fakecuda
        import generic_saxpy_kernels as G
        import tile_add_kernels as T
        assert sorted(G.__all__) == ["saxpy"]
        dev, calls = fakecuda.record_launches(fakecuda.Patch())
        n = 4096
        x, y, out = (dev.to_device(np.ones(n, np.float32)) for _ in range(3))
        G.saxpy[az.LaunchConfig.for_num_elems(n, block=256)](2.0, x, y, out)
        try:
            G.saxpy[az.LaunchConfig.for_num_elems(n, block=256)](2.0, dev.empty(n, az.f64), y, out)
        except az.ArgumentError as e:
            assert "parameter `x`" in str(e), e
        else:
            raise AssertionError("dtype not checked")
        T.add[az.LaunchConfig.for_tiles((n,), (1024,))](x, y, out)
        assert calls[-1][1].block == (256, 1, 1), calls[-1][1].block
        assert len(calls) == 2, calls
        print("OK", T.add.num_warps)
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK 8" in r.stdout


@pytest.mark.gpu
def test_built_vecadd_runs_on_the_gpu(built: Path) -> None:
    r = _run(built, """
        import numpy as np
        import anodize as az
        import vecadd_kernels as K
        dev = az.device(0)
        n = 1 << 20
        x = np.random.rand(n).astype(np.float32); y = np.random.rand(n).astype(np.float32)
        a, b, c = dev.to_device(x), dev.to_device(y), dev.empty(n, az.f32)
        K.vecadd[az.LaunchConfig.for_num_elems(n, block=256)](a, b, c)
        assert np.array_equal(c.to_host(), x + y)
        try:
            K.vecadd[az.LaunchConfig.for_num_elems(n, block=256)](a, b, dev.empty(n - 1, az.f32))
        except az.ContractViolation:
            pass
        else:
            raise AssertionError("requires not checked")
        assert "llvmlite" not in sys.modules
        print("OK", K.vecadd.compile().arch)
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout
