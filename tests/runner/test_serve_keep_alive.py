"""``chuixiang serve`` keeps an idle connection open longer than any ``pollAfterMs``: a client polling on one
connection as told never sends its GET into the server closing that connection."""

from __future__ import annotations

from chuixiang.polling import longest_poll_ms
from chuixiang.timeouts import PROGRESS_INTERVAL
from chuixiang_local.gateway.api_server import KEEP_ALIVE_S


def test_an_idle_connection_outlives_the_longest_poll_interval() -> None:
    """At the template's progress interval (every wait is in proportion to it)."""
    assert 2 * longest_poll_ms(PROGRESS_INTERVAL.default) <= KEEP_ALIVE_S * 1000
