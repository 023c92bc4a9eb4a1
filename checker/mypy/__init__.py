"""Transformers of the mypy plugin (`anodize.checker.mypy_plugin` dispatches to them).

Each module answers one kind of hook and holds no rule logic of its own: kernel
bodies go through `anodize.checker.api.check_source`, messages through
`anodize.language.messages`, and the plugin only adapts them to mypy.
"""
