"""Ctrl-C for a ``chuixiang`` command: a ``KeyboardInterrupt``, as Python's own handler raises it, wherever it lands.

Python raises it in whatever the main thread runs when the signal is handled. Inside an import that can be a
callback the import machinery runs for itself (a module lock's, as the import ends): the interpreter prints the
exception there ("Exception ignored in: … KeyboardInterrupt") and drops it, and the command runs on as if no key
had been pressed. ``chuixiang cook`` imports the api function's app right after the local cloud is up (~0.5 s), so
a Ctrl-C then was lost once in a dozen test runs. Here a Ctrl-C that lands inside an import is sent again a moment
later, once the import is done. And one that something catches as an ``Exception`` (pydantic's serializer, in Rust,
turns it into a ``PydanticSerializationError``, which the api function cook runs in-process answers as a 500) still
ends the command as interrupted: :func:`pressed` says it came.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

#: How soon a Ctrl-C that landed inside an import is sent again (an import takes milliseconds to a second).
RESEND_AFTER_S = 0.05

_PRESSED = threading.Event()


def install() -> None:
    """Take Ctrl-C where Python's default handler has it (not where it is ignored: a command started in the
    background keeps ignoring it). Only the main thread may set a handler."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_ctrl_c)


def on_ctrl_c(signum: int, frame: FrameType | None) -> None:
    _PRESSED.set()
    if importing(frame):
        resend_later()
        return
    raise KeyboardInterrupt


def importing(frame: FrameType | None) -> bool:
    """Whether the main thread was inside the import machinery (its frames are ``<frozen importlib…>``)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def resend_later() -> None:
    timer = threading.Timer(RESEND_AFTER_S, os.kill, (os.getpid(), signal.SIGINT))
    timer.daemon = True
    timer.start()


def pressed() -> bool:
    """Whether Ctrl-C reached this command (through :func:`on_ctrl_c`), whatever became of its ``KeyboardInterrupt``."""
    return _PRESSED.is_set()
