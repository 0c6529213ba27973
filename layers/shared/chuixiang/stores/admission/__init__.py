"""Admission: at most so many jobs in flight, at most so many of them one caller's, and no cutting in line.

Each slot is an item (``pk = ADMISSION#<n>``) taken with a conditional put and freed when its job ends (the
state machine's ``FreeSlot`` states delete it), when the API sees the job ended, or at its lease end.

A slot is a **job**, whatever its streams: each job holds one model stream for its life, and a job written in
sections borrows its extra streams from what the key has spare when its recipe stage opens them
(``stores.key_streams``), never at admission. So a burst of ``RecipeConcurrency`` callers is all admitted, and a
job counts once in its caller's share for its whole life.

First come, first served is unfair under load: a client whose job just ended re-POSTs at once and finds the
slot it freed, while clients told to come back later find every slot taken again (a 60-client run: 29
finished no job, 9 finished 6 each). So a refused caller waits in line. Its place (when it was first
refused) is kept while it comes back when told (``Retry-After`` + ``WAIT_GRACE_S``), and a free slot
goes to a newcomer only when it is not owed to someone ahead. The line lives in ``LINE_BUCKETS`` items
(``pk = ADMISSION#line#<b>``, a map of caller digest to place), read with the slots in one batch: the work
per POST is bounded, and no one item takes every write.

The package's face: its modules are private (``_slots``: taking and giving back; ``_state``: the items' keys,
one read of them and the limits; ``_line``: the line), and the rest of the code imports from here.
"""

from ._slots import Admission
from ._state import RETRY_AFTER_MAX_S, WAIT_GRACE_S, Refused, slot_key

__all__ = ["RETRY_AFTER_MAX_S", "WAIT_GRACE_S", "Admission", "Refused", "slot_key"]
