"""The plugin's registration with mypy: codes, entry point and cache key."""

from __future__ import annotations

import mypy.errorcodes
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


def test_report_config_data_carries_version_and_settings() -> None:
    from mypy.options import Options

    data = mypy_plugin.AnodizePlugin(Options()).report_config_data(ReportConfigContext("m", "m.py", False))
    assert data["version"] == anodize.__version__
    assert data["settings"]["codes"] == sorted(CODES)
    assert isinstance(data["rules"], str) and data["rules"] != "unknown"


def test_hooks_dispatch_to_transformers() -> None:
    from mypy.options import Options

    p = mypy_plugin.AnodizePlugin(Options())
    assert p.get_function_hook("anodize.kernel.kernel") is not None
    assert p.get_method_hook("anodize.kernel.Kernel.__getitem__") is not None
    assert p.get_method_signature_hook("anodize.kernel.Launch.__call__") is not None
    assert p.get_method_hook("anodize.runtime.device.Device.empty") is not None
    assert p.get_function_hook("builtins.len") is None
