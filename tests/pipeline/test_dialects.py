"""Each model is sent what it accepts and read however it answers (``chuixiang.upstream.dialects``).

The fake model refuses ``response_format`` for ``gpt-image-*`` with the 400 OpenAI sends, and answers
``dall-e-*`` with a URL unless asked for ``b64_json``, as OpenAI does.
"""

from __future__ import annotations

from stack_template import Template

# --- what each model is sent (no sockets) ----------------------------------------------------------


def test_the_ladder_refuses_a_broken_map() -> None:
    from chuixiang_local.commands.ladder import build_ladder

    bad = build_ladder(Template({"ModelDialects": '{"o3": {"maxTokensField": "nope"}}'}))
    assert not bad.ok and any("ModelDialects['o3']" in f for f in bad.failures())
    assert build_ladder(Template({"ModelDialects": '{"o3": {"streamUsage": false}}'})).ok


# --- on a real socket: the fake answers as OpenAI does -------------------------------------------


# --- a provider that does not stream ---------------------------------------------------------------
