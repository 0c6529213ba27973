"""Test double: a function that never returns (a stuck dependency, a bug). Used to prove
that Lambda's Timeout, the state's TimeoutSeconds and the execution timeout still end the job."""

import time
from typing import Any


def lambda_handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    while True:
        time.sleep(1)
