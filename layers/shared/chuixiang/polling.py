"""How soon a client should poll a job again: ``pollAfterMs`` follows the job.

A fixed 3 s costs the same requests whether there is anything new to show or not. Before the model
writes (up to a minute at the peak) there is nothing to show but a spinner; while it writes, progress is
written every ``ProgressIntervalMs``; near the end the client wants the recipe the moment it is there;
while the picture is drawn (~30 s) the recipe is already on screen. At the peak this is ~49 polls for a
3-minute job instead of 60 (``docs/capacity.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .job_status import JobStage, JobStatus, is_terminal

#: Before the model has written anything (queued or thinking): nothing to show but a spinner.
WAITING_MS = 5000
#: While the recipe streams: about every other progress write.
STREAMING_MS = 3000
#: When the recipe is about to be complete (a few seconds left, or 90 % written).
FINISHING_MS = 1500
#: While a recipe is written in sections (~25 s at the peak): its outline, then each steps range, complete within
#: seconds of each other; a client that polls this often sees the outline before the steps replace it.
SECTIONS_MS = 1500
#: While the picture is drawn: the recipe is already shown.
DRAWING_MS = 5000
#: The job is being finalized (a write away from terminal).
FINALIZING_MS = 1000


def poll_after_ms(status: str | None, stage: str | None, progress: Mapping[str, Any] | None) -> int | None:
    """``None`` once the job is terminal (stop polling); else when the next poll is worth it."""
    if is_terminal(status):
        return None
    stage = stage or JobStage.SUBMIT
    progress = progress or {}
    if status != JobStatus.RUNNING or stage == JobStage.SUBMIT:
        return WAITING_MS
    if stage == JobStage.RECIPE:
        if not progress:
            return WAITING_MS
        eta = progress.get("etaMs")
        if (eta is not None and int(eta) <= 5000) or int(progress.get("percent", 0)) >= 90:
            return FINISHING_MS
        if progress.get("sections"):  # written in sections: the outline, then each range, land within seconds
            return SECTIONS_MS
        return STREAMING_MS
    if stage == JobStage.IMAGE:
        return DRAWING_MS
    return FINALIZING_MS
