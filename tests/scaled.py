"""The scaled-down ladder every timing test runs on, and how late a give-up may be."""

from __future__ import annotations

from chuixiang.timeouts import scaled_parameters

#: Each limit's scaled value, from its declaration (``chuixiang.timeouts``), passed through the same
#: template parameters production uses.
SCALED = scaled_parameters()
#: How late a give-up may be, measured on a real socket (the issue's bound).
LATE_S = 0.3
