"""Test double: answers with its own process id, so a test can tell which worker served it."""

import os


def lambda_handler(event: dict, context: object) -> dict:
    return {"pid": os.getpid(), "event": event}
