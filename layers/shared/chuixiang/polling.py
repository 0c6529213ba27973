"""How soon a client should poll a job again: ``pollAfterMs`` follows the job.

A fixed 3 s costs the same requests whether there is anything new to show or not. Before the model
writes (up to a minute at the peak) there is nothing to show but a spinner; while it writes, progress is
written every ``ProgressIntervalMs``; near the end the client wants the recipe the moment it is there;
while the picture is drawn (~30 s) the recipe is already on screen. At the peak this is ~49 polls for a
3-minute job instead of 60 (``docs/capacity.md``).

The cadences are those of the template's default ``ProgressIntervalMs`` (2 s); a stack deployed with another
interval gets them in proportion. A client's view is no fresher than the last progress write, so the interval is
the one setting for how fresh the view is: halving it halves every wait (and doubles the polls).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .job_status import JobStage, JobStatus, is_terminal
from .timeouts import PROGRESS_INTERVAL

if TYPE_CHECKING:
    from .settings import Settings

#: The first poll of a new job: the model takes seconds before it writes anything.
FIRST_POLL_MS = 3000

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
#: No wait is shorter, whatever the interval: the interval's own least value.
SHORTEST_MS = PROGRESS_INTERVAL.minimum


def in_proportion(cadence_ms: int, interval_ms: int) -> int:
    """A cadence above (at the default interval) for a stack whose ``ProgressIntervalMs`` is ``interval_ms``."""
    return max(SHORTEST_MS, round(cadence_ms * interval_ms / PROGRESS_INTERVAL.default))


def first_poll_ms(settings: Settings) -> int:
    """The 202's ``pollAfterMs``, for the stack ``settings`` are of."""
    return in_proportion(FIRST_POLL_MS, PROGRESS_INTERVAL.of(settings))


def longest_poll_ms(interval_ms: int) -> int:
    """The longest a client following ``pollAfterMs`` waits between two polls."""
    return in_proportion(max(FIRST_POLL_MS, WAITING_MS, STREAMING_MS, DRAWING_MS), interval_ms)


def poll_after_ms(
    status: str | None, stage: str | None, progress: Mapping[str, Any] | None, interval_ms: int
) -> int | None:
    """``None`` once the job is terminal (stop polling); else when the next poll is worth it, for a stack whose
    progress interval is ``interval_ms``."""
    cadence = _cadence(status, stage, progress)
    return None if cadence is None else in_proportion(cadence, interval_ms)


def _cadence(status: str | None, stage: str | None, progress: Mapping[str, Any] | None) -> int | None:
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
