"""Test double: answers with its own process id, so a test can tell which worker served it, and its garbage
collector's thresholds; asked to ``describe``, what else its process is made of (environment, directory, path,
modules loaded, niceness, session, output buffering), so two ways of starting a worker can be compared."""

import gc
import os
import sys
from typing import Any


def lambda_handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    answer = {"pid": os.getpid(), "event": event, "gcThresholds": list(gc.get_threshold())}
    if event.get("describe"):
        answer["process"] = {
            "environ": dict(os.environ),
            "cwd": os.getcwd(),
            "sysPath": sys.path,
            "modules": sorted(sys.modules),
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "session": os.getsid(0),
            "stdoutWriteThrough": getattr(sys.stdout, "write_through", None),
            "flags": repr(sys.flags),
            "executable": sys.executable,
        }
    return answer
