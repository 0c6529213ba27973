"""The fake model's own outputs are what they claim to be."""

from __future__ import annotations

from model_samples import make_png


def test_fake_png_is_a_png() -> None:
    data = make_png(seed=3)
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")
