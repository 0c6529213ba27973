"""The product's unit tier (``make test-fast``): in-process only (:mod:`tests.support.in_process`)."""

from ..support.in_process import (
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    settings_from_the_test_alone,
)

__all__ = [
    "pytest_runtest_call",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
    "settings_from_the_test_alone",
]
