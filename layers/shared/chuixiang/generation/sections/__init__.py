"""A recipe in sections (``RecipeSections=parallel``): what each call asks for, and how the parts merge.

One stream writes a recipe at the model's speed, ~1,600 tokens at ~18 tokens/s at the evening peak: about
90 s whatever is done around it. Its parts are independent once the ingredients and the step titles are
fixed, so they can be written at the same time (Skeleton-of-Thought, Ning et al., ICLR 2024,
arXiv 2307.15337): a short **outline** first, then the steps in 2-3 ranges, the pairings and nutrition
(``extras``) and the image prompt, side by side. The stage then takes about the outline plus the slowest
section.

Every call repeats one prefix (the system prompt, the dish, the outline once written) and ends with what
differs, the part asked for: providers' prompt caches bill a repeated prefix at a fraction of the price.

The steps and the outline are **core**: without them there is no recipe. ``extras`` and ``imagePrompt`` are
**degradable**: dropped when they fail, the recipe is still served (``degraded`` on the job).

The package's face: ``_plan`` (the sections, their messages, the merge), ``_outline`` (the outline read as it
streams), ``_tokens`` (each call's share of the
tokens, and what a job reserves), ``_progress`` (what a poll sees while the parts stream), ``_parts`` (each part's
figures), ``_yield`` (when the sections give way to one stream) and ``_writer`` (the stage in sections) are its
own; the rest of the code imports from here.
"""

from ._outline import PipelinedSteps, outline_head
from ._plan import (
    DEGRADABLE,
    EXTRAS,
    IMAGE_PROMPT,
    OUTLINE_SECTION,
    Extras,
    Outline,
    Section,
    StepsPart,
    fallback_image_prompt,
    in_range,
    merge,
    messages,
    outline_text,
    plan,
    split_steps,
)
from ._progress import SectionStreams
from ._tokens import (
    MAX_RESERVED_RATIO,
    most_ranges_reserved,
    section_max_tokens,
    sections_reservation,
    whole_reservation,
)
from ._writer import default_max_streams, write_in_sections
from ._yield import AbandonReason

__all__ = [
    "DEGRADABLE",
    "EXTRAS",
    "IMAGE_PROMPT",
    "MAX_RESERVED_RATIO",
    "OUTLINE_SECTION",
    "AbandonReason",
    "Extras",
    "Outline",
    "PipelinedSteps",
    "Section",
    "SectionStreams",
    "StepsPart",
    "default_max_streams",
    "fallback_image_prompt",
    "in_range",
    "merge",
    "messages",
    "most_ranges_reserved",
    "outline_head",
    "outline_text",
    "plan",
    "section_max_tokens",
    "sections_reservation",
    "split_steps",
    "whole_reservation",
    "write_in_sections",
]
