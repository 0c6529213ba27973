"""The product's unit tier (``make test-fast``): in-process only (:mod:`tests.support.in_process`)."""

from ..support.in_process import (
    _settings_from_the_test_alone,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)

__all__ = [
    "_settings_from_the_test_alone",
    "pytest_runtest_call",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
]
