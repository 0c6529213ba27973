"""Powertools Logger and Metrics shared by every function (one namespace).

No Powertools Tracer: the X-Ray SDK it loads cost 30-90 ms of every cold start (a fifth of the
handler import; its recorder builds a sampler and a botocore client at import) and 2.6 MB of the
layer, for one subsegment per invocation. The functions and the state machine keep active X-Ray
tracing (``Tracing: Active``), which records each invocation and each state without the SDK; inside a
stage, :mod:`.tracing` sends a subsegment per model and AWS call, and the job document's ``metrics`` and the
logs say the rest.
"""

from __future__ import annotations

import hashlib
import threading

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric

logger = Logger()
metrics = Metrics(namespace="Chuixiang")


def dimensioned_metric(name: str, unit: MetricUnit, value: float, **dimensions: str) -> None:
    """A metric with dimensions of its own (beside ``service``): its own EMF document, flushed at once, since
    a stage's batched metrics share one dimension set. Every dimension's values must be few (a model, an
    outcome, an error code), or CloudWatch bills a metric per value."""
    with _FLUSHING, single_metric(name=name, unit=unit, value=value, namespace=metrics.namespace) as metric:
        for key, val in dimensions.items():
            metric.add_dimension(name=key, value=val)


#: One EMF document flushed at a time: Powertools prints the document and its newline as two writes, and the
#: threads of one invocation (the canary's probes, a job's sections) interleaved them into lines CloudWatch
#: cannot read (two documents on one line: both metrics lost).
_FLUSHING = threading.Lock()


def model_metric(name: str, unit: MetricUnit, value: float, model: str, **dimensions: str) -> None:
    """A metric with the ``Model`` dimension (and any others)."""
    dimensioned_metric(name, unit, value, Model=model, **dimensions)


def caller_hash(caller: str) -> str:
    """A caller's pseudonym for the logs (``top-callers`` groups by it): the first 16 hex digits of the SHA-256
    of its admission identity (``sub:…``, ``client:…``, ``ip:…``), so the functions' lines carry no raw subject or
    address. A pseudonym, not anonymity: an address can be found again by hashing candidates (the HTTP API's
    access log keeps the addresses anyway, under its own retention)."""
    return hashlib.sha256(caller.encode()).hexdigest()[:16] if caller else "none"
