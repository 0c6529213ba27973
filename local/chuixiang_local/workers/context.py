"""The Lambda context a local invocation gets: its remaining time counts down to a fixed instant."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class LocalContext:
    function_name: str
    memory_limit_in_mb: int
    aws_request_id: str
    deadline_ms: int  #: epoch milliseconds at which the invocation is killed
    invoked_function_arn: str = ""
    function_version: str = "$LATEST"
    log_group_name: str = "local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))
