"""The anodize kernel language: one home for what every front end reads.

    vocab        the scalar, slice, witness and intrinsic tables
    types, ir    compiler types and the typed kernel model (frozen IR)
    names        per-scope qualified names of a parsed module
    contract     `@launch_contract`: the `requires` grammar and the contract object
    typer        kernel source -> typed model (every user error located here)
    messages     the message catalogue; diagnostics: Diagnostic, Span, renderers
    errors       the public exception classes

Layers import in one direction only (tests/language/test_layering.py holds it):
language <- checker <- runtime, language <- codegen <- runtime <- the `anodize` facade.
"""

VERSION = "0.2.0"  # the package version (`anodize.__version__`); part of every cache key
