"""``RecipeRouting=fastest``: order the candidates by their measured speed, skip one that cannot finish in time."""

from __future__ import annotations

from collections.abc import Sequence

from .health import ModelHealth


class FastestFirst:
    """``RecipeRouting=fastest``: the candidates in order of their predicted time to a valid recipe (pessimistic:
    p90 first content, p10 writing speed, over the valid rate), the ones with no recent measurement after, in
    their configured order; a model predicted not to finish in the time left is skipped without a request,
    unless it is the last."""

    def __init__(self, health: dict[str, ModelHealth], expected_tokens: int) -> None:
        self.health, self.expected_tokens = health, expected_tokens

    #: A model whose recipes are valid less often than this goes after every other (unknown ones included):
    #: its failures end the job (a bad answer is not a reason to fall back), however fast it is.
    MIN_VALID_RATE = 0.9

    def order(self, models: Sequence[str]) -> list[str]:
        known = [m for m in models if self.health[m].known]
        unknown = [m for m in models if not self.health[m].known]
        unreliable = [m for m in known if (self.health[m].valid_rate or 1.0) < self.MIN_VALID_RATE]
        fast = sorted(
            (m for m in known if m not in unreliable),
            key=lambda m: self.health[m].expected_ms(self.expected_tokens) or 0.0,
        )
        return fast + unknown + sorted(unreliable, key=lambda m: self.health[m].expected_ms(self.expected_tokens) or 0)

    def predicted(self, model: str) -> float | None:
        """``model``'s pessimistic time to a recipe, when measured (None: not measured lately)."""
        health = self.health.get(model)
        return health.predicted_ms(self.expected_tokens) if health is not None else None

    def skip(self, model: str, remaining_ms: float, last: bool) -> str | None:
        """Why ``model`` is not worth a request now (None: call it)."""
        predicted = self.health[model].predicted_ms(self.expected_tokens)
        if last or predicted is None or predicted <= remaining_ms:
            return None
        return f"predicted {predicted:.0f} ms to a recipe, {remaining_ms:.0f} ms left"
