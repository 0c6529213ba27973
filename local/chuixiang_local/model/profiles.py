"""Realistic model behaviours for the embedded fake model, chosen by the requested model name.

Each profile is a measured behaviour of a real model (a recipe request sent to nine
models, streamed and timed, at several times of day) written in real seconds; the fake
plays it ``time_scale`` times faster so a bench of every profile runs offline in seconds.

* ``fake-steady``: ~1,600 tokens at 18 tokens/s after 2 s (the model in production, ~90 s).
* ``fake-peak``: the same model at the evening peak, 3x slower (it no longer fits the total limit).
* ``fake-late-start``: valid, but its first content comes after 57 s (just inside the 60 s limit).
* ``fake-broken-json``: writes at the steady pace, but the JSON is broken.
* ``fake-length``: twice as fast, but spends ``max_tokens`` on reasoning and writes no content.
* ``fake-thinker``: writes ``<think>…</think>`` into the content before a valid JSON recipe.
* ``fake-evening``: the production model at the evening peak as the write-up measured one stream: first content
  after 6.2 s, ~18 tokens/s (20 while writing, a pause of up to 4.1 s every 400 tokens): ~90 s for a whole
  recipe; each stream at that speed however many are open (hosted APIs batch requests).
* ``fake-offpeak``: the same model off-peak: first content after 2-4 s, a whole recipe in 19-32 s.
* ``fake-capped``: the steady model behind a provider that caps a key's tokens/s: streams share 18 tokens/s, so
  writing sections side by side gains nothing.

A request naming a section (the ``X-Recipe-Section`` header, ``RecipeSections=parallel``) gets that section of the
same recipe (``model_samples.section_doc``), at the same pace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from model_samples import long_recipe_for, section_doc

#: Real time per token of the production model (18 tokens/s): ``--fake-pace-ms`` is measured against it.
REAL_MS_PER_TOKEN = 1000 / 18


@dataclass(frozen=True)
class ModelProfile:
    name: str
    first_content_s: float  #: real seconds from the request to the first text
    tokens_per_s: float  #: real writing rate
    kind: str = "ok"  #: ok | broken_json | length | thinker
    think_tokens: int = 0  #: reasoning written before the JSON (``thinker``)
    description: str = ""
    #: A range instead of one figure: each request draws its first content from [first_content_s, this]…
    first_content_s_max: float | None = None
    #: … and its writing rate from [this, tokens_per_s]
    tokens_per_s_min: float | None = None
    #: the share of requests that spend ``max_tokens`` on reasoning and write no content (a ``length`` answer)
    length_share: float = 0.0
    #: a pause of up to ``pause_s_max`` (drawn) after every ``pause_every`` tokens: the gaps a busy model leaves
    pause_every: int = 0
    pause_s_max: float = 0.0
    #: the key's tokens/s over all its streams at once (None: each stream writes at its own rate)
    key_tokens_per_s: float | None = None
    #: benched by ``chuixiang bench`` without ``--models`` (the sections bench's own models are not)
    bench_default: bool = True


PROFILES: dict[str, ModelProfile] = {
    p.name: p
    for p in (
        ModelProfile("fake-steady", 2.0, 18.0, description="~1,600 tokens at 18 tokens/s"),
        ModelProfile("fake-peak", 6.0, 6.0, description="the same model at the evening peak, 3x slower"),
        ModelProfile("fake-late-start", 57.0, 30.0, description="first content after 57 s"),
        ModelProfile("fake-broken-json", 2.0, 18.0, kind="broken_json", description="invalid JSON"),
        ModelProfile("fake-length", 1.0, 36.0, kind="length", description="max_tokens spent on reasoning"),
        ModelProfile(
            "fake-evening",
            6.2,
            20.0,
            pause_every=400,
            pause_s_max=4.1,
            description="the evening peak: first content 6.2 s, ~18 tokens/s with pauses up to 4.1 s",
            bench_default=False,
        ),
        ModelProfile(
            "fake-offpeak",
            2.0,
            1600 / 19,
            first_content_s_max=4.0,
            tokens_per_s_min=1600 / 32,
            description="off-peak: first content 2-4 s, ~1,600 tokens in 19-32 s",
            bench_default=False,
        ),
        ModelProfile(
            "fake-capped",
            2.0,
            18.0,
            key_tokens_per_s=18.0,
            description="a key capped at 18 tokens/s over its streams",
            bench_default=False,
        ),
        ModelProfile(
            "fake-thinker",
            2.0,
            24.0,
            kind="thinker",
            think_tokens=200,
            description="<think>…</think> in the content, then the JSON",
        ),
    )
}


def profile_text(profile: ModelProfile, dish: str, section: str | None = None) -> str:
    """The content a profile writes (``length`` writes reasoning instead, see the fake)."""
    text = json.dumps(section_doc(long_recipe_for(dish), section), ensure_ascii=False)
    if profile.kind == "broken_json":
        return text.replace('"steps": [', '"steps": [[', 1)  # an unclosed array: not JSON
    if profile.kind == "thinker":
        thought = "先确定主料和辅料，再按下锅顺序排列步骤，注意火候和调味的先后。" * 10
        return f"<think>{thought[: profile.think_tokens]}</think>\n{text}"
    return text
