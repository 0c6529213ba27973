"""Resilience over the transport: the retry rule, routing over fallback models, the circuit breaker policy."""
