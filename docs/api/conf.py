"""Sphinx configuration for the API reference (docs/api/): autodoc over the public modules.

Build it with `sphinx-build -W -b html docs/api <out>` (tests/test_docs_build.py does, in CI).
Offline by design: no intersphinx, no theme or extension outside Sphinx itself.
"""

from __future__ import annotations

import os
import sys

# the repository root, so that `import anodize` documents this checkout
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

project = "anodize"
author = "the anodize authors"
extensions = ["sphinx.ext.autodoc"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True}
default_role = "code"  # `x` in a docstring is code, as in the project's Markdown docs
html_theme = "alabaster"
exclude_patterns = ["_build"]
