"""The scaled-down ladder every timing test runs on, and how late a give-up may be."""

from __future__ import annotations

from chuixiang.timeouts import scaled_parameters

#: Every test's client comes from one address, which admission counts as one caller: the per-caller share is
#: tested on its own (``tests/unit/test_admission.py``, ``tests/pipeline/test_fair_share.py``), off elsewhere.
ONE_CALLER = {"RecipeConcurrencyPerCaller": "0"}
#: Each limit's scaled value, from its declaration (``chuixiang.timeouts``), passed through the same
#: template parameters production uses.
SCALED = {**scaled_parameters(), **ONE_CALLER}
#: One stream a job (``RecipeSections=whole``): for the tests whose subject is one stream's path through the stack
#: (a fault scripted per request, a provider's recorded answer, a breaker's count of calls) or admission counted
#: in jobs. The template's default (``auto``, writing a cold stack's jobs in sections) runs in the tests of
#: sections and of whole commands (``cook``, ``serve``, the sections pipeline).
WHOLE = {"RecipeSections": "whole"}
#: How late a give-up may be, measured on a real socket (the issue's bound).
LATE_S = 0.3
