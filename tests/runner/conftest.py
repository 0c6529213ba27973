"""The local runner's own unit tier (``make test-runner``): its emulations held to what AWS documents (IAM, moto's
patches, the front door, the fake model, the alarm and Logs Insights evaluators, the dashboard's renderer) and
its commands; in-process only, as the product's unit tier (:mod:`tests.support.in_process`)."""

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
