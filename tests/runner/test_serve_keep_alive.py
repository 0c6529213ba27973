"""``chuixiang serve`` keeps an idle connection open longer than any ``pollAfterMs``: a client polling on one
connection as told never sends its GET into the server closing that connection."""

from __future__ import annotations

from chuixiang import polling
from chuixiang_local.gateway.api_server import KEEP_ALIVE_S


def test_an_idle_connection_outlives_the_longest_poll_interval() -> None:
    intervals = [v for k, v in vars(polling).items() if k.endswith("_MS") and isinstance(v, int)]
    assert intervals and 2 * max(intervals) <= KEEP_ALIVE_S * 1000
