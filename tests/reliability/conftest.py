"""Reliability tests: tools/ on sys.path (the generator, fuzz, difftest, mutate, sanitize)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
