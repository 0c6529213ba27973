"""Filter patterns as the CloudWatch Logs user guide's *Filter pattern syntax* page defines them (its examples)."""

from __future__ import annotations

import json

import pytest

from chuixiang_local.logs_filter import UnsupportedPattern, matching

EVENTS = [
    "[ERROR 400] BAD REQUEST",
    "[ERROR 401] UNAUTHORIZED REQUEST",
    "[WARN 419] EXPIRED ARGUMENTS",
    "[SUCCESS 200] AUTHORIZED REQUEST",
    "2026-12-04T22:00:00.000Z 3dc3a1b5-0000-4000-8000-000000000000 Task timed out after 3.00 seconds",
]
JSON_EVENTS = [
    json.dumps({"level": "ERROR", "function_name": "chuixiang-ApiFunction-AbC", "message": "boom", "ms": 12}),
    json.dumps({"level": "INFO", "function_name": "chuixiang-ApiFunction-AbC", "message": "job started", "ms": 3}),
    json.dumps({"level": "ERROR", "function_name": "chuixiang-RecipeFunction-XyZ", "message": "upstream"}),
    json.dumps({"level": "INFO", "message": "synthetic job", "outcome": {"code": "ok"}, "tags": ["a", "b"]}),
]


def test_terms_are_all_required_and_case_sensitive() -> None:
    assert matching("ERROR", EVENTS) == EVENTS[:2]
    assert matching("ERROR UNAUTHORIZED", EVENTS) == [EVENTS[1]]
    assert matching("error", EVENTS) == []


def test_question_marks_make_terms_optional_any_of_them_matching() -> None:
    assert matching("?ERROR ?WARN", EVENTS) == EVENTS[:3]
    assert matching('?"Task timed out" ?"ERROR"', EVENTS) == [EVENTS[0], EVENTS[1], EVENTS[4]]


def test_a_quoted_phrase_matches_as_a_whole_and_a_minus_excludes() -> None:
    assert matching('"Task timed out"', EVENTS) == [EVENTS[4]]
    assert matching('"timed Task"', EVENTS) == []
    assert matching("ERROR -UNAUTHORIZED", EVENTS) == [EVENTS[0]]


def test_json_patterns_select_fields_with_wildcards_and_booleans() -> None:
    assert matching('{ $.function_name = "*Api*" && $.level = "ERROR" }', JSON_EVENTS) == [JSON_EVENTS[0]]
    assert matching('{ $.level = "ERROR" || $.message = "synthetic job" }', JSON_EVENTS) == [
        JSON_EVENTS[0],
        JSON_EVENTS[2],
        JSON_EVENTS[3],
    ]
    assert matching('{ ($.level = "INFO") && $.message != "job started" }', JSON_EVENTS) == [JSON_EVENTS[3]]
    assert matching('{ $.outcome.code = "ok" }', JSON_EVENTS) == [JSON_EVENTS[3]]
    assert matching('{ $.tags[1] = "b" }', JSON_EVENTS) == [JSON_EVENTS[3]]
    assert matching("{ $.ms > 10 }", JSON_EVENTS) == [JSON_EVENTS[0]]


def test_a_json_pattern_never_matches_a_text_line_nor_a_field_the_event_lacks() -> None:
    assert matching('{ $.message = "*" }', EVENTS) == []
    assert matching('{ $.missing = "*" }', JSON_EVENTS) == []


@pytest.mark.parametrize(
    "pattern", ["[ip, user, status = 4*]", "%ERROR%", "{ $.x IS NULL }", '{ $.a = "b"', "{ a = 1 }"]
)
def test_what_is_not_modelled_is_refused_not_guessed(pattern: str) -> None:
    with pytest.raises(UnsupportedPattern):
        matching(pattern, JSON_EVENTS)
