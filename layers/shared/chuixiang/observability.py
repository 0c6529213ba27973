"""Powertools Logger, Tracer and Metrics shared by every function (one namespace)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric

logger = Logger()
tracer = Tracer()
metrics = Metrics(namespace="Chuixiang")


def model_metric(name: str, unit: MetricUnit, value: float, model: str, **dimensions: str) -> None:
    """A metric with the ``Model`` dimension (and any others): its own EMF document, flushed at once,
    since the stage's batched metrics share one dimension set (``service``)."""
    with single_metric(name=name, unit=unit, value=value, namespace=metrics.namespace) as metric:
        metric.add_dimension(name="Model", value=model)
        for key, val in dimensions.items():
            metric.add_dimension(name=key, value=val)
