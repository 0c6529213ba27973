from typing import Any

"""Test double: a function that raises (a bug in the stage): the state machine catches ``States.TaskFailed``."""


def lambda_handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    raise RuntimeError("a bug in the stage")
