"""Powertools Logger, Tracer and Metrics shared by every function (one namespace)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics(namespace="Chuixiang")
