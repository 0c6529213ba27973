"""Stopping the local servers: HTTP ones without waiting for their poll, child ones with their parent."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from typing import Any


def stop_server(server: Any) -> None:
    """``shutdown()`` of a socketserver returns at ``serve_forever``'s next poll (up to 0.5 s later); a
    connection to it wakes the poll at once, so a local stack stops in milliseconds."""
    stopping = threading.Thread(target=server.shutdown, daemon=True)
    stopping.start()
    while stopping.is_alive():
        with contextlib.suppress(OSError):
            socket.create_connection(server.server_address[:2], timeout=0.2).close()
        stopping.join(0.02)


def exit_with_parent(stop: Callable[[], None]) -> None:
    """Call ``stop`` once the parent is gone, however it ended (SIGKILL included): the parent starts
    this process with ``stdin=PIPE`` and never writes to it, so end-of-file on stdin is its exit.
    Without this, a ``serve`` killed outright left its API process and fake model running."""

    def watch() -> None:
        # The raw descriptor, not sys.stdin: a daemon thread blocked in a buffered read holds the
        # buffer's lock, and the interpreter then dies at exit with "could not acquire lock".
        while os.read(0, 4096):
            pass
        stop()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
