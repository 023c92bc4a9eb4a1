"""No traceback from any source (issue 34, item 2): each bad source of the reliability probe is a
located diagnostic in `anodize check`, the same one from compile and from a launch, and a bad file
in a folder does not stop `anodize check DIR`.  bench/RELIABILITY.md "Bad source" tabulates these."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.checker.api import check_source
from anodize.language.syntax import NESTING_LIMIT, read_source

HEAD = '''import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
'''


def _deep(kind: str, n: int) -> str:
    return {
        "sum": " + ".join(["a[i]"] * n),
        "neg": "-" * n + "a[i]",
        "cond": " if a[i] > 0.0 else ".join(["a[i]"] * (n + 1)),
        "call": "min(" * n + "a[i]" + ", 1.0)" * n,
    }[kind]


def _module(tmp_path: Path, name: str, body: str, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202
    (tmp_path / f"{name}.py").write_text(HEAD + body)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return __import__(name)


def _codes(source: str, path: str = "m.py") -> set[tuple[int, str]]:
    return {(d.span.line, d.code) for d in check_source(source, path)}


# ---- expressions of any depth CPython compiles ----------------------------------------------------


@pytest.mark.parametrize("kind", ["sum", "neg", "cond"])
def test_too_deep_is_one_located_unsupported_in_check_compile_and_launch(kind: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    body = f"        c[i] = {_deep(kind, 350)}\n"
    compile(HEAD + body, "m.py", "exec")  # CPython compiles it
    assert _codes(HEAD + body) == {(12, "az-unsupported")}
    (d,) = check_source(HEAD + body, "m.py")
    assert f"nested more than {NESTING_LIMIT} levels" in d.message and d.span.col == 15
    mod = _module(tmp_path, f"deep_{kind}", body, monkeypatch)
    with pytest.raises(az.CheckError) as compiled:
        mod.k.compile("sm_90")
    assert [(x.code, x.span.line, x.span.col) for x in compiled.value.diagnostics] == [("az-unsupported", 12, 15)]
    dev = az.device("cpu")
    a, c = dev.to_device(np.ones(64, np.float32)), dev.empty(64, az.f32)
    with pytest.raises(az.CheckError):
        mod.k[az.LaunchConfig.for_num_elems(64, block=64)](a, c)


@pytest.mark.parametrize("kind", ["sum", "neg", "cond"])
def test_just_under_the_limit_checks_compiles_and_runs(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit is where the walks still fit Python's stack, called from a test's deep stack."""
    import ast

    from anodize.language.syntax import too_deep

    n = 150
    while too_deep(ast.parse(HEAD + f"        c[i] = {_deep(kind, n + 1)}\n")) is None:
        n += 1
    body = f"        c[i] = {_deep(kind, n)}\n"
    assert n > 150 and _codes(HEAD + body) == set()
    mod = _module(tmp_path, f"under_{kind}", body, monkeypatch)
    assert ".entry k(" in mod.k.compile("sm_90").ptx
    dev = az.device("cpu")
    a, c = dev.to_device(np.ones(64, np.float32)), dev.empty(64, az.f32)
    mod.k[az.LaunchConfig.for_num_elems(64, block=64)](a, c)
    want = {"sum": float(n), "neg": (-1.0) ** n, "cond": 1.0}[kind]
    assert c.to_host()[0] == want


def test_calls_nested_as_deep_as_the_tokenizer_allows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """195 nested calls (the tokenizer allows 200 open parentheses): under the limit, fine."""
    body = f"        c[i] = {_deep('call', 195)}\n"
    assert _codes(HEAD + body) == set()
    mod = _module(tmp_path, "deep_calls", body, monkeypatch)
    assert ".entry k(" in mod.k.compile("sm_90").ptx


def test_deep_host_code_is_reported_not_crashed() -> None:
    src = "import anodize\n\nx = " + " + ".join(["1"] * 400) + "\n"
    assert _codes(src) == {(3, "az-unsupported")}


def test_nested_parentheses_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """199 nested parentheses: whatever the parser says (fine on 3.11, a limit on some builds),
    check and compile say the same, and neither raises."""
    body = "        c[i] = " + "(" * 199 + "a[i]" + ")" * 199 + "\n"
    checked = _codes(HEAD + body)
    mod = _module(tmp_path, "parens199", body, monkeypatch)
    try:
        mod.k.compile("sm_90")
        compiled: set[tuple[int, str]] = set()
    except az.CheckError as e:
        compiled = {(d.span.line, d.code) for d in e.diagnostics}
    assert checked == compiled


# ---- literals and strings ---------------------------------------------------------------------


@pytest.mark.parametrize("literal", ["10**400", "1000000000000000000000000000000000000000000", "1e39", "-(10**39)"])
def test_literal_out_of_f32_range_is_az_type(literal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = f"        c[i] = a[i] + {literal}\n"
    assert _codes(HEAD + body) == {(12, "az-type")}
    mod = _module(tmp_path, f"lit_{abs(hash(literal))}", body, monkeypatch)
    with pytest.raises(az.CheckError) as e:
        mod.k.compile("sm_90")
    assert [d.code for d in e.value.diagnostics] == ["az-type"]


def test_lone_surrogate_print_is_located_and_compile_agrees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = '        print("x\\ud800y")\n        c[i] = a[i]\n'
    assert _codes(HEAD + body) == {(12, "az-unsupported")}
    mod = _module(tmp_path, "surrogate_print", body, monkeypatch)
    with pytest.raises(az.CheckError):
        mod.k.compile("sm_90")


# ---- files read as Python reads them ------------------------------------------------------------


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "anodize", *args], capture_output=True, text=True, timeout=240, cwd=cwd)


def test_bom_and_coding_line_read_as_python_reads_them(tmp_path: Path) -> None:
    good = HEAD + "        c[i] = a[i]  # caf\u00e9\n"
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + good.encode())
    (tmp_path / "latin.py").write_bytes(("# -*- coding: latin-1 -*-\n" + good).encode("latin-1"))
    (tmp_path / "crlf.py").write_bytes(good.replace("\n", "\r\n").encode())
    for name in ("bom.py", "latin.py", "crlf.py"):
        p = tmp_path / name
        assert read_source(p) == (("# -*- coding: latin-1 -*-\n" if name == "latin.py" else "") + good)
        r = _cli("check", str(p))
        assert r.returncode == 0, r.stdout + r.stderr
        r = _cli("compile", f"{p}:k", "--emit", "ptx")
        assert r.returncode == 0 and ".entry k(" in r.stdout, r.stderr
    line = 13
    bad = ("# -*- coding: latin-1 -*-\n" + HEAD + "        a[i] = 1.0\n").encode("latin-1")
    (tmp_path / "latin_bad.py").write_bytes(bad)
    r = _cli("check", "--format", "json", str(tmp_path / "latin_bad.py"))
    assert [(d["line"], d["code"]) for d in json.loads(r.stdout)] == [(line, "az-shared-write")], r.stdout


def test_check_dir_reports_unreadable_dangling_and_fifo_and_goes_on(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text(HEAD + "        c[i] = a[i]\n")
    (tmp_path / "bad.py").write_text(HEAD + "        a[i] = 1.0\n")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "gone.py")
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "deep.py").write_text(HEAD + f"        c[i] = {_deep('sum', 350)}\n")
    (tmp_path / "unknown_coding.py").write_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    (tmp_path / "not_latin.py").write_bytes(b"x = '\xff'\n")
    r = _cli("check", "--format", "json", str(tmp_path))  # must neither hang on the FIFO nor stop
    got = {(Path(d["path"]).name, d["code"]) for d in json.loads(r.stdout)}
    assert got == {("bad.py", "az-shared-write"), ("dangling.py", "az-syntax"), ("fifo.py", "az-syntax"),
                   ("deep.py", "az-unsupported"), ("unknown_coding.py", "az-syntax"), ("not_latin.py", "az-syntax")}, r.stdout
    assert r.returncode == 1


def test_unreadable_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No permission (root reads anything, so the open is made to fail as it would)."""
    from anodize.checker import api

    p = tmp_path / "secret.py"
    p.write_text("x = 1\n")

    def denied(path: object) -> str:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(api, "read_source", denied)
    (d,) = api.check_file(p).diagnostics
    assert d.code == "az-syntax" and "Permission denied" in d.message and d.span.path == str(p)


def test_full_disk_writing_the_output_is_an_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import builtins

    from anodize.cli import main

    src = tmp_path / "fulldisk.py"
    src.write_text(HEAD + "        c[i] = a[i]\n")
    out = tmp_path / "out.ptx"
    real_open = builtins.open

    class Full:
        def __init__(self, f):  # noqa: ANN001
            self.f = f

        def __enter__(self):  # noqa: ANN204
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    def opener(file, mode="r", *a, **kw):  # noqa: ANN001, ANN202
        f = real_open(file, mode, *a, **kw)
        return Full(f) if str(file) == str(out) and "w" in mode else f

    monkeypatch.setattr(builtins, "open", opener)
    assert main(["compile", f"{src}:k", "--emit", "ptx", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"cannot write {out}: No space left on device" in err and "Traceback" not in err
    assert not out.exists()  # no half-written file


# ---- run-time scalars ---------------------------------------------------------------------------


SAXPY = textwrap.dedent('''
    from anodize import DisjointSlice, Slice, f16, f32, f64, i32, kernel, launch_contract, thread
    import anodize as az


    @launch_contract(domain=1, block=64, requires=lambda x, y: len(x) == len(y))
    @kernel
    def saxpy(a: f32, x: Slice[f32], y: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in y:
            y[i] = a * x[i] + y[i]


    @launch_contract(domain=1, block=64, requires=lambda x, y: len(x) == len(y))
    @kernel
    def mixed(a: f64, h: f16, n: i32, x: Slice[f32], y: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in y:
            y[i] = x[i]


    @launch_contract(domain=1, block=64)
    @kernel
    def const_f(y: DisjointSlice[f64], v: az.Constant[float], m: az.Constant[int]) -> None:
        i = thread.index_1d()
        if i in y:
            y[i] = v
''')


@pytest.mark.parametrize("call", [
    "saxpy[cfg](10**400, x, y)", "saxpy[cfg](-10**400, x, y)", "saxpy[cfg](10**39, x, y)",
    "mixed[cfg](10**400, 1.0, 1, x, y)", "mixed[cfg](1.0, 10**400, 1, x, y)", "mixed[cfg](1.0, 1.0, 10**400, x, y)",
    "const_f[cfg](yd, 10**400, 1)", "const_f[cfg](yd, 1.0, 10**400)",
])
def test_run_time_scalar_out_of_range_is_an_argument_error(call: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rt_saxpy.py").write_text(SAXPY)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("rt_saxpy", None)
    import rt_saxpy

    dev = az.device("cpu")
    env = {"cfg": az.LaunchConfig.for_num_elems(64, block=64), "x": dev.to_device(np.ones(64, np.float32)),
           "y": dev.to_device(np.ones(64, np.float32)), "yd": dev.to_device(np.ones(64)), **vars(rt_saxpy)}
    eval("saxpy[cfg](2.0, x, y)", env)  # the launch works, and warms the quick path
    with pytest.raises(az.ArgumentError) as e:
        eval(call, env)
    assert len(str(e.value)) < 400  # a 400-digit int is shortened
