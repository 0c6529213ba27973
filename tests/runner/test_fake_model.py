"""The fake model's own outputs are what they claim to be."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_samples import make_png

from chuixiang_local.model.fake_model import FakeModel, common_prefix, token_schedule
from chuixiang_local.model.profiles import PROFILES, REAL_MS_PER_TOKEN


def test_fake_png_is_a_png() -> None:
    data = make_png(seed=3)
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")


def test_a_capped_key_keeps_its_rate_however_late_its_streams_ask() -> None:
    """Eight streams on a key capped at 18 tokens/s that started a second ago, their threads asking for each
    token's time only now (late, as on a busy machine): the key's slots follow one another at the cap's interval
    from the streams' start, as a provider's do, not from when each late thread asked."""
    fake = FakeModel(pace_s=REAL_MS_PER_TOKEN / 1000 / 40)  # time x40: 720 tokens/s over the key
    capped = PROFILES["fake-capped"]
    assert capped.key_tokens_per_s is not None
    interval, start = fake.time_scale / capped.key_tokens_per_s, time.monotonic() - 1.0
    streams = [token_schedule(fake, capped, 50, interval, start=start) for _ in range(8)]
    slots = [due(i) for i in range(50) for due in streams]
    # A microsecond: each slot is the last plus an interval, added at the monotonic clock's magnitude (its uptime:
    # 32,831 s on a machine up nine hours put 400 additions' rounding 1.1e-9 s off), against a 1.4 ms interval.
    assert slots == pytest.approx([start + k * interval for k in range(len(slots))], abs=1e-6)


def _shared(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab菜🍅", max_size=40), st.text(alphabet="ab菜🍅", max_size=40), st.text(max_size=20))
def test_the_shared_prefix_is_the_characters_both_begin_with(a: str, b: str, common: str) -> None:
    """A prompt's cached tokens count from it: the binary search over slices agrees with reading both strings."""
    assert common_prefix(common + a, common + b) == _shared(common + a, common + b)


def test_a_prompt_repeated_is_cached_in_whole_blocks_of_64_tokens() -> None:
    fake = FakeModel(pace_s=0.001)
    system = "你是一位厨师。" * 200  # 1,400 characters: 1,166 tokens at 1.2 characters a token
    assert fake.cached_tokens("m", system + "番茄炒蛋") == 0  # the first prompt: nothing seen before
    assert fake.cached_tokens("m", system + "宫保鸡丁") == int(len(system) / 1.2) // 64 * 64
    assert fake.cached_tokens("other", system + "宫保鸡丁") == 0  # a cache is per model
