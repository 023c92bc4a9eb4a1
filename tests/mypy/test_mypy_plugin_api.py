"""The plugin's registration with mypy: codes, entry point and cache key."""

from __future__ import annotations

import os
from pathlib import Path

import mypy.errorcodes
import pytest
from mypy.plugin import ReportConfigContext

import anodize
from anodize.checker import mypy_plugin
from anodize.language.messages import CODES


def test_every_catalogue_code_is_a_mypy_error_code() -> None:
    for code in CODES:
        registered = mypy.errorcodes.error_codes.get(code)
        assert registered is not None, code
        assert registered.code == code
        assert registered.description == CODES[code]


def test_entry_point_returns_the_plugin_class() -> None:
    cls = mypy_plugin.plugin("2.4.1")
    assert issubclass(cls, mypy.plugin.Plugin)
    assert cls is mypy_plugin.AnodizePlugin


def test_report_config_data_carries_version_and_rules() -> None:
    from mypy.options import Options

    p = mypy_plugin.AnodizePlugin(Options())
    data = p.report_config_data(ReportConfigContext("m", "m.py", False))
    assert isinstance(data, str)  # one short string: mypy round-trips it through JSON per module
    name, version, digest = data.split(" ")
    assert name == "anodize.checker.mypy_plugin" and version == anodize.__version__
    assert len(digest) == 16 and mypy_plugin._rules_digest() != "unknown"
    # typeshed's stubs never import anodize: no plugin data, as without the plugin
    stub = os.path.join(mypy_plugin._TYPESHED, "stdlib", "builtins.pyi")
    assert p.report_config_data(ReportConfigContext("builtins", stub, False)) is None


def test_rules_digest_follows_an_edit_of_a_rule_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache key changes when a checker or language source changes (size or mtime)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    before = mypy_plugin._py_stats(str(pkg), "")
    assert [rel for rel, _, _ in before] == ["a.py", "sub/b.py"]
    (pkg / "sub" / "b.py").write_text("y = 3\n")  # same size: the mtime changes
    st = os.stat(pkg / "sub" / "b.py")
    os.utime(pkg / "sub" / "b.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert mypy_plugin._py_stats(str(pkg), "") != before
    (pkg / "a.py").write_text("x = 10\n")  # a new size
    assert [s for _, s, _ in mypy_plugin._py_stats(str(pkg), "")][0] == 7


def test_hooks_dispatch_to_transformers() -> None:
    from mypy.options import Options

    p = mypy_plugin.AnodizePlugin(Options())
    assert p.get_function_hook("anodize.kernel.kernel") is not None
    assert p.get_method_hook("anodize.kernel.Kernel.__getitem__") is not None
    assert p.get_method_signature_hook("anodize.kernel.Launch.__call__") is not None
    assert p.get_method_hook("anodize.runtime.device.Device.empty") is not None
    assert p.get_function_hook("builtins.len") is None


def test_the_plugins_import_loads_no_engine_and_no_diagnostics_class() -> None:
    """mypy imports the plugin on every run, a warm one included, where no hook fires: the
    import must not load the rule engine, the language's front end or the error classes
    (building their dataclasses was most of the plugin's cost on a warm run)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    code = "import sys, anodize.checker.mypy_plugin; print(' '.join(sorted(m for m in sys.modules if m.startswith('anodize'))))"
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    assert "anodize.checker.mypy_plugin" in out
    for heavy in ("anodize.language.diagnostics", "anodize.language.errors", "anodize.language.front",
                  "anodize.checker.engine", "anodize.checker.mypy.engine_results", "anodize.checker.mypy.kernels"):
        assert heavy not in out, heavy
