"""The help texts that list the scalar types list every one the vocabulary has."""

from __future__ import annotations

from anodize.language.catalogue import HELPS
from anodize.language.vocab import SCALARS


def test_scalar_lists_in_help_name_every_scalar_type() -> None:
    for key in ("scalar-types", "write-f32"):
        listed = HELPS[key].rsplit("`", 2)[-2].split()
        assert listed == list(SCALARS), (key, HELPS[key])
        assert len(listed) == 15
