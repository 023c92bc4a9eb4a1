"""What a user reads when anodize refuses a launch or a kernel fails its check: the error
prints as `anodize.AliasingError: ...`, and the printed traceback holds the user's frames only:
the entry points raise with no anodize frames below them, and `anodize.tracebacks` leaves the
entry point's own frame out of what `sys.excepthook` prints (`ANODIZE_TRACEBACK=full` keeps it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import anodize as az

ROOT = Path(__file__).resolve().parents[2]

HEADER = """
import numpy as np
import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def double(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] * 2.0


@launch_contract(domain=1, block=64)
@kernel
def racy(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    c[i + 1] = 1.0


dev = az.device("cpu")
a = dev.to_device(np.arange(64, dtype=np.float32))
cfg = az.LaunchConfig.for_num_elems(64, block=64)
"""

_INTERNAL = re.compile(r'File "[^"]*[\\/](anodize|runtime|codegen|checker)[\\/][^"]*"')


def _run(tmp_path: Path, body: str, **extra_env: str) -> str:
    script = tmp_path / "user_script.py"
    script.write_text(HEADER + textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANODIZE_CACHE": "0", **extra_env}
    if "ANODIZE_TRACEBACK" not in extra_env:
        env.pop("ANODIZE_TRACEBACK", None)
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1, out.stderr
    return out.stderr


def _frames(stderr: str) -> list[str]:
    return re.findall(r'^  File "([^"]*)", line \d+, in (\S+)$', stderr, re.M)


def _internal(stderr: str) -> list[tuple[str, str]]:
    return [(f, fn) for f, fn in _frames(stderr) if _INTERNAL.search(f'File "{f}"')]


def _entry_only(stderr: str) -> None:
    """No anodize frame at all: the user's frames only."""
    assert _internal(stderr) == [], stderr


def test_aliasing_launch(tmp_path: Path) -> None:
    err = _run(tmp_path, "double[cfg](a, a)\n")
    assert re.search(r"^anodize\.AliasingError: kernel `double`: output `c` .* is the same buffer as `a`", err, re.M), err
    assert "help: " in err and "read-modify-write" in err
    _entry_only(err)
    assert "user_script.py" in _frames(err)[0][0]


def test_argument_error_through_unsafe_launch_has_no_internal_frame(tmp_path: Path) -> None:
    err = _run(tmp_path, "double.unsafe_launch(cfg, a, 3.0)\n")
    assert re.search(r"^anodize\.ArgumentError: kernel `double`, parameter `c`", err, re.M), err
    assert _internal(err) == [], err


def test_non_contiguous_view(tmp_path: Path) -> None:
    err = _run(tmp_path, "double[az.LaunchConfig.for_num_elems(32, block=64)](a[::2], dev.empty(32, az.f32))\n")
    assert re.search(r"^anodize\.ArgumentError: kernel `double`, parameter `a`: got a non-contiguous view", err, re.M), err
    _entry_only(err)


def test_check_failure_at_first_launch(tmp_path: Path) -> None:
    err = _run(tmp_path, "racy[cfg](dev.empty(64, az.f32))\n")
    assert re.search(r"^anodize\.CheckError: ", err, re.M), err
    assert "az-disjoint-index" in err
    _entry_only(err)


def test_check_failure_at_compile_has_no_internal_frame(tmp_path: Path) -> None:
    err = _run(tmp_path, 'racy.compile(arch="sm_90")\n')
    assert re.search(r"^anodize\.CheckError: ", err, re.M), err
    assert _internal(err) == [], err


def test_public_errors_are_named_as_imported() -> None:
    for cls in (az.CheckError, az.LaunchError, az.ContractViolation, az.AliasingError, az.ArgumentError,
                az.KernelFault, az.OutOfMemoryError, az.InFlightError):
        assert cls.__module__ == "anodize" and getattr(az, cls.__name__) is cls


@pytest.mark.parametrize("cls", [az.AliasingError, az.ArgumentError])
def test_public_errors_pickle(cls: type) -> None:
    import pickle

    e = cls("message", help="help text")
    assert type(pickle.loads(pickle.dumps(e))) is cls


GENERIC = """
from typing import TypeVar

T = TypeVar("T", az.f32, az.f64)


@launch_contract(domain=1, block=64)
@kernel
def gdouble(a: Slice[T], c: DisjointSlice[T]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + a[i]
"""


def test_generic_launch_outside_the_constraint(tmp_path: Path) -> None:
    err = _run(tmp_path, GENERIC + "gdouble[cfg](dev.to_device(np.arange(64, dtype=np.int32)), dev.empty(64, az.i32))\n")
    assert re.search(r"^anodize\.ArgumentError: ", err, re.M) and "f32" in err and "f64" in err, err
    _entry_only(err)


def test_full_tracebacks_on_request(tmp_path: Path) -> None:
    err = _run(tmp_path, "double[cfg](a, a)\n", ANODIZE_TRACEBACK="full")
    assert re.search(r"^anodize\.AliasingError: ", err, re.M), err
    assert any(fn == "__call__" for _, fn in _internal(err)), err


def test_other_exceptions_print_in_full(tmp_path: Path) -> None:
    """The filter touches anodize's user errors only: a TypeError from a direct kernel call keeps
    the frame that raised it."""
    err = _run(tmp_path, "double(a, a)\n")
    assert re.search(r"^TypeError: kernel `double` cannot be called directly", err, re.M), err
    assert _internal(err), err


def test_user_frames_keeps_the_users_frames() -> None:
    from anodize.tracebacks import user_frames

    def user() -> None:
        az.LaunchConfig(grid=(0,), block=(1,))

    with pytest.raises(az.LaunchError) as info:
        user()
    names = []
    kept = user_frames(info.value.__traceback__)
    while kept is not None:
        names.append(kept.tb_frame.f_code.co_name)
        kept = kept.tb_next
    assert names == ["test_user_frames_keeps_the_users_frames", "user"], names
