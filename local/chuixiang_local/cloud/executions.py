"""The state machine's executions as AWS reports them, read from moto's backend in this process."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from stack_template import ACCOUNT, REGION


class Executions:
    """One state machine's executions. Read in memory, not through moto's API: EventBridge pushes its
    events, and polling moto's API for them twice a second cost the server ~5 % of a core."""

    def __init__(self, state_machine_arn: str, stepfunctions: Callable[[], Any]) -> None:
        """``stepfunctions``: a boto3 client of the local cloud (for DescribeExecution)."""
        self.state_machine_arn = state_machine_arn
        self._client = stepfunctions

    def _with_status(self, statuses: tuple[str, ...]) -> list[str]:
        return [ex.execution_arn for ex in self.all() if ex.status in statuses]

    def all(self) -> list[Any]:
        """Every execution of the state machine, as moto holds it (``execution_arn``, ``status``, dates)."""
        from moto.stepfunctions.exceptions import StateMachineDoesNotExist
        from moto.stepfunctions.responses import get_backend

        try:
            machine = get_backend(ACCOUNT, REGION).describe_state_machine(self.state_machine_arn)
        except StateMachineDoesNotExist:  # the cloud is being torn down
            return []
        return list(machine.executions)

    def ended_badly(self) -> list[str]:
        """The executions that FAILED, TIMED_OUT or were ABORTED."""
        return self._with_status(("FAILED", "TIMED_OUT", "ABORTED"))

    def running(self) -> list[str]:
        return self._with_status(("RUNNING",))

    def arn_of(self, job_id: str) -> str:
        """The ARN of a job's execution (named after the job)."""
        return f"{self.state_machine_arn.replace(':stateMachine:', ':execution:')}:{job_id}"

    def describe(self, execution_arn: str) -> dict[str, Any]:
        """DescribeExecution, with the status AWS would report.

        moto's interpreter ends an execution that hit the machine's TimeoutSeconds as
        FAILED with error ``States.Timeout``; AWS reports TIMED_OUT (and EventBridge
        says so), so it is normalised here.
        """
        detail: dict[str, Any] = self._client().describe_execution(executionArn=execution_arn)
        if detail["status"] == "FAILED" and detail.get("error") == "States.Timeout":
            detail["status"] = "TIMED_OUT"
        return detail

    def status_change_event(self, execution: dict[str, Any]) -> dict[str, Any]:
        """The "Step Functions Execution Status Change" event EventBridge would deliver for ``execution``."""

        def ms(value: Any) -> int | None:
            return int(value.timestamp() * 1000) if value else None

        return {
            "version": "0",
            "id": str(time.time_ns()),
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "account": ACCOUNT,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": REGION,
            "resources": [execution["executionArn"]],
            "detail": {
                "executionArn": execution["executionArn"],
                "stateMachineArn": self.state_machine_arn,
                "name": execution["name"],
                "status": execution["status"],
                "startDate": ms(execution.get("startDate")),
                "stopDate": ms(execution.get("stopDate")),
                "input": execution.get("input"),
                "output": execution.get("output"),
            },
        }
