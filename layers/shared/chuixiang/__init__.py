"""Shared code of the Chuixiang backend, deployed as a Lambda layer.

Every function's ``app.py`` is a thin adapter over the modules here, so the
behaviour that matters (deadlines, stream reading, retries, job state) is
written and tested once.
"""
