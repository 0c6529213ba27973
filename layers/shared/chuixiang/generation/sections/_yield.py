"""When a recipe in sections gives way to one written whole: the sections failed *as sections*.

Sections ask more of a provider than one stream does: more requests at once, more tokens reserved, and answers
in shapes a model may not follow. Each of those can fail a section where the same model, asked once for the
whole recipe, would write it. So a core section that fails for one of these reasons does not fail the job: the
stage closes its sections and writes the recipe whole inside the same deadline (``wholeAfter``):

- ``quota``: the provider refused a call for the key's quota (HTTP 429: requests at once, tokens per minute);
- ``shape``: a section answered outside its shape (a whole recipe to an outline request, broken JSON, nothing);
- ``stall``: a section stopped writing (its first-content or idle limit ran out, not the stage's deadline);
- ``merge``: the parts do not fit the outline (a step missing, more titles than steps).

Anything else (a 5xx after its retries and fallbacks, an ``error`` in the stream, the stage's own deadline) is
what a whole answer would meet too: the stage fails with its code, as a whole answer's failure would.
"""

from __future__ import annotations

from typing import Literal

from ...upstream.failures import (
    DeadlineExceeded,
    EmptyAnswer,
    InvalidAnswer,
    StatusError,
    UpstreamError,
    UpstreamTimeout,
)

AbandonReason = Literal["quota", "shape", "stall", "merge"]
#: Every reason, in the order the docs and the dashboard list them.
ABANDON_REASONS: tuple[AbandonReason, ...] = ("quota", "shape", "stall", "merge")


def abandon_reason(failure: UpstreamError | None) -> AbandonReason | None:
    """Why a core section's ``failure`` should make the stage write whole (None: it should not)."""
    if isinstance(failure, StatusError) and failure.status == 429:
        return "quota"
    if isinstance(failure, (InvalidAnswer, EmptyAnswer)):
        return "shape"
    if isinstance(failure, UpstreamTimeout) and not isinstance(failure, DeadlineExceeded):
        return "stall"
    return None
