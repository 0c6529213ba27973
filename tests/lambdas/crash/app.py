"""Test double: a function that raises (a bug in the stage): the state machine catches ``States.TaskFailed``."""


def lambda_handler(event: dict, context: object) -> dict:
    raise RuntimeError("a bug in the stage")
