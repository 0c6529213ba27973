"""The charts' one way to matplotlib: ``make run`` installs it, but a venv made otherwise may lack it, so a
command that draws says how to get it instead of crashing on an import."""

from __future__ import annotations

from typing import Any

from stack_template import ConfigError

INSTALL = ".venv/bin/pip install -e ."


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display), or a :class:`ConfigError` (exit 2) naming the
    install command."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError(
            f"drawing a chart needs matplotlib, which this venv lacks: {INSTALL} (as `make run` does)"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
