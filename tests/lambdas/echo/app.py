"""Test double: answers with its own process id, so a test can tell which worker served it, and its garbage
collector's thresholds."""

import gc
import os
from typing import Any


def lambda_handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    return {"pid": os.getpid(), "event": event, "gcThresholds": list(gc.get_threshold())}
