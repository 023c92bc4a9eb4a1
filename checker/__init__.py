"""The static safety checker: ownership passes over Python's `ast`, diagnostics and the mypy plugin."""
