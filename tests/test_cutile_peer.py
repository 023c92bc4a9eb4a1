"""bench/cutile_peer.py (the canonical GEMM beside cuTile Python and cuBLAS) without a GPU or
cuTile: the no-cuTile exit, where it imports cuda.tile from, and its small helpers; and the
carry scripts' contract with it (tools/fetch_cutile.sh, tools/cutile_setup.sh)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "cutile_peer.py"


def _peer() -> Any:
    spec = importlib.util.spec_from_file_location("cutile_peer_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _run(home: Path, *args: str, pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CUTILE_HOME", "PYTHONPATH")}
    env["CUTILE_HOME"] = str(home)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)


def _fake_tile(py: Path, version: str) -> None:
    """A stand-in cuda.tile under `py` (a namespace `cuda`, as the wheel has it)."""
    (py / "cuda" / "tile").mkdir(parents=True)
    (py / "cuda" / "tile" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (py / "cuda" / "tile" / "_compile.py").write_text("")


def test_without_cutile_it_says_so_and_exits_0(tmp_path: Path) -> None:
    r = _run(tmp_path / "absent")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "cuTile Python is not importable" in r.stdout
    assert f"looked in {tmp_path / 'absent'}/py" in r.stdout
    assert "bash tools/cutile_setup.sh" in r.stdout
    assert "Traceback" not in r.stderr


def test_a_broken_cutile_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "py" / "cuda" / "tile").mkdir(parents=True)
    (tmp_path / "py" / "cuda" / "tile" / "__init__.py").write_text("from cuda.tile._cext import launch\n")
    r = _run(tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "No module named 'cuda.tile._cext'" in r.stdout


def test_a_missing_dependency_of_the_compiler_is_reported(tmp_path: Path) -> None:
    # the package's top imports, its compiler driver does not (typing_extensions absent)
    _fake_tile(tmp_path / "py", "9.9")
    (tmp_path / "py" / "cuda" / "tile" / "_compile.py").write_text("import not_a_module_anywhere\n")
    r = _run(tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "cuTile Python is not importable (ModuleNotFoundError: No module named 'not_a_module_anywhere')" in r.stdout


def test_cutile_is_imported_from_cutile_home(tmp_path: Path) -> None:
    _fake_tile(tmp_path / "py", "9.9-home")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import importlib.util as u; "
            "s = u.spec_from_file_location('p', sys.argv[2]); m = u.module_from_spec(s); s.loader.exec_module(m); "
            "mod, why = m.import_cutile(m.cutile_home()); print(mod.__version__, why == '', m.ct is mod)")
    env = {**os.environ, "CUTILE_HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code, str(ROOT), str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert r.stdout.split() == ["9.9-home", "True", "True"], r.stderr[-2000:]


def test_a_regular_cuda_package_does_not_hide_cuda_tile(tmp_path: Path) -> None:
    # an older cuda-python's `cuda/__init__.py` wins over the namespace portion under CUTILE_HOME/py
    (tmp_path / "site" / "cuda").mkdir(parents=True)
    (tmp_path / "site" / "cuda" / "__init__.py").write_text("REGULAR = True\n")
    _fake_tile(tmp_path / "home" / "py", "9.9-shadowed")
    code = ("import sys, importlib.util as u; s = u.spec_from_file_location('p', sys.argv[1]); m = u.module_from_spec(s); "
            "s.loader.exec_module(m); mod, why = m.import_cutile(m.cutile_home()); import cuda; "
            "print(mod.__version__ if mod else why, cuda.REGULAR)")
    env = {**os.environ, "CUTILE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(tmp_path / "site")}
    r = subprocess.run([sys.executable, "-c", code, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert r.stdout.split() == ["9.9-shadowed", "True"], (r.stdout, r.stderr[-2000:])


def test_cutile_home_defaults_to_tmp_cutile(monkeypatch: pytest.MonkeyPatch) -> None:
    peer = _peer()
    monkeypatch.delenv("CUTILE_HOME", raising=False)
    assert peer.cutile_home() == Path("/tmp/cutile")  # where tools/cutile_setup.sh unpacks by default
    monkeypatch.setenv("CUTILE_HOME", "/x/y")
    assert peer.cutile_home() == Path("/x/y")
    setup = (ROOT / "tools" / "cutile_setup.sh").read_text()
    assert 'dest=${1:-${CUTILE_HOME:-/tmp/cutile}}' in setup


def test_tiles_and_ratio_rows() -> None:
    peer = _peer()
    assert peer.parse_tiles("128x128x64,128x256x64", 3) == [(128, 128, 64), (128, 256, 64)]
    assert peer.parse_tiles("128x256x64x8", 4) == [(128, 256, 64, 8)]
    with pytest.raises(SystemExit, match="needs 4 numbers"):
        peer.parse_tiles("128x256x64", 4)
    flops = 2.0 * 4096 ** 3
    row = peer.ratio_line("anodize 128x256x64/8w", 0.25, flops, 0.2, 0.3).split()
    assert row[-4:] == ["0.2500", f"{flops / 0.25 / 1e9:.1f}", "0.800", "1.200"]  # cuBLAS/ours, cuTile/ours
    assert peer.ratio_line("cuBLAS", 0.2, flops, 0.2, None).split()[-1] == "-"


def test_the_carry_is_ignored_and_pinned() -> None:
    assert "/.cutile/" in (ROOT / ".gitignore").read_text().splitlines()
    fetch = (ROOT / "tools" / "fetch_cutile.sh").read_text()
    for pin in ("cuda-tile==1.7.0", "nvidia-cuda-tileiras==13.4.92", "nvidia-cuda-nvcc==13.4.92", "nvidia-nvvm==13.4.92"):
        assert f"{pin} --hash=sha256:" in fetch, pin
    assert "--require-hashes" in fetch
    # the layout the bench and cuTile read: tileiras with ptxas beside it and libnvvm at ../lib
    for path in ("cu13/bin/tileiras", "cu13/bin/ptxas", "cu13/lib/libnvvm.so.4", '"py/" + n'):
        assert path in fetch, path
    peer = (SCRIPT).read_text()
    assert 'home / "cu13" / "bin"' in peer and 'home / "py"' in peer


def test_rounds_rotate_skip_the_warm_up_and_recheck(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # the timing loop and the summary without a GPU: fixed times, one output gone wrong during the timing
    peer = _peer()
    order: list[str] = []
    fixed = {"cuBLAS (torch.matmul)": 0.18, "cuTile 128x128x64": 0.20, "anodize 128x256x64/8w": 0.22, "anodize 128x128x64/4w": 0.25}
    cons = [peer.Contender(n, n, n) for n in fixed]
    monkeypatch.setattr(peer, "build", lambda args, t, s: (cons, "ref", ["cuTile 128x256x64: TileCompilerError: x"]))
    monkeypatch.setattr(peer, "wall", lambda call, calls: order.append(call) or fixed[call])
    monkeypatch.setattr(peer, "check", lambda con, ref, k: "went wrong" if con.name == "anodize 128x128x64/4w" else "")
    args = peer.argparse.Namespace(size=4096, rounds=3, calls=20)
    failed = peer.measure(args, "f16")
    assert len(order) == 4 * 4 and order[:4] == list(fixed) and order[4:8] == [*list(fixed)[1:], list(fixed)[0]]
    assert all(len(c.times) == 3 for c in cons)  # round 0 not kept
    assert failed == ["cuTile 128x256x64: TileCompilerError: x", "anodize 128x128x64/4w: wrong result after the timing: went wrong"]
    out = capsys.readouterr().out
    assert "f16: anodize best (128x256x64/8w) 0.2200 ms = 0.818x cuBLAS (target 0.9: NOT met), 0.909x cuTile (target 1.0: NOT met)" in out
    assert "f16: cuTile best 0.2000 ms = 0.900x cuBLAS" in out
