"""The module text's digest, the key of the front cache (anodize/language/front.py)."""

from __future__ import annotations


def test_a_source_is_hashed_once_for_both_front_lookups() -> None:
    """`cached_front` and `front_for_source` of one text hash it once (the digest of the text
    last hashed is kept with the text itself); an equal text in another object gets the same
    digest, computed again."""
    import hashlib

    from anodize.language import front

    text = "x = 1\n" * 3
    want = hashlib.sha256(text.encode()).hexdigest()
    assert front.source_digest(text) == want
    assert front._LAST_DIGEST is not None and front._LAST_DIGEST[0] is text
    other = "".join(["x = 1\n"] * 3)
    assert other is not text and front.source_digest(other) == want and front._LAST_DIGEST[0] is other
