"""What each call of a recipe reserves at admission (prompt + ``max_tokens``): a section asks for what it writes,
and no plan in sections reserves more than 2.5x a whole answer."""

from __future__ import annotations

from chuixiang.generation.mode_choice import RecipeShape
from chuixiang.generation.sections import (
    DEGRADABLE,
    MAX_RESERVED_RATIO,
    OUTLINE_SECTION,
    Section,
    most_ranges_reserved,
    section_max_tokens,
    sections_reservation,
    whole_reservation,
)
from chuixiang.settings import Settings

MAX_TOKENS = int(Settings.model_fields["recipe_max_tokens"].default)


def test_each_section_asks_for_what_it_writes_with_room_and_far_below_a_whole_answer() -> None:
    shape = RecipeShape()
    for section, typical in (
        (OUTLINE_SECTION, shape.tokens * shape.outline_share),
        (DEGRADABLE[0], shape.tokens * shape.extras_share),
        (DEGRADABLE[1], shape.tokens * shape.image_prompt_share),
        (Section.steps(1, 3), 3 * shape.tokens * shape.step_share),
    ):
        asked = section_max_tokens(section)
        assert 2 * typical <= asked < MAX_TOKENS / 2, (section.name, typical, asked)
    assert section_max_tokens(Section.steps(1, 12)) > section_max_tokens(Section.steps(1, 6))


def test_no_plan_reserves_more_than_two_and_a_half_whole_answers() -> None:
    """The issue's measure: a job of eleven calls asking for 3,000 tokens each reserved ~37,600 tokens where a
    whole answer reserves ~3,300. Now the most ranges allowed keep it within 2.5x, and one more would not."""
    whole = whole_reservation(MAX_TOKENS).total
    most = most_ranges_reserved(MAX_TOKENS)
    assert most == RecipeShape().steps  # a steps range a step: what the peak's time needs
    assert sections_reservation(most).total <= MAX_RESERVED_RATIO * whole
    assert 3_000 < whole < 3_600


def test_the_sections_page_states_the_reservations_as_computed() -> None:
    from pathlib import Path

    page = " ".join((Path(__file__).parents[2] / "docs" / "sections.md").read_text().split())
    whole, most = whole_reservation(MAX_TOKENS).total, most_ranges_reserved(MAX_TOKENS)
    sections = sections_reservation(most).total
    said = f"about {round(whole, -2):,} whole and {round(sections, -2):,} in sections, in {most} steps ranges at most"
    assert said in page, said
