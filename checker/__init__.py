"""The static safety checker: libcst ownership passes, diagnostics and the mypy plugin."""
