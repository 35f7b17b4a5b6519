"""Great Expectations validation in a background process (what `holistic evaluate` uses) finds exactly what
validating in this process finds; a background process that dies leaves the checks running here."""

from __future__ import annotations

import logging
import os
import signal

import pandas as pd
import pytest

from holistic_dagster.quality import gx as validation
from holistic_dagster.quality.gx import expect, validate, validate_here

pytestmark = pytest.mark.slow  # the background process imports Great Expectations (seconds)

FRAME = pd.DataFrame({"id": ["a", "b", "b", "c"], "value": [0.5, -0.1, 0.2, 1.5], "text": ["x", "", "y", "call 555"]})
CASES = [
    [expect.ExpectTableRowCountToBeBetween(min_value=1)],
    [
        expect.ExpectColumnValuesToBeUnique(column="id"),
        expect.ExpectColumnValuesToBeBetween(column="value", min_value=0, max_value=1),
        expect.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1),
    ],
    [expect.ExpectColumnValuesToNotMatchRegex(column="text", regex=r"\d{3}")],
]


@pytest.fixture
def background():
    validation.start_background()
    yield validation._background.helper
    validation.stop_background()


def test_the_background_process_finds_what_this_one_finds(background):
    assert validation._background.helper is background is not None
    for expectations in CASES:
        for examples in (True, False):
            assert validate(FRAME, expectations, examples) == validate_here(FRAME, expectations, examples)
    passed, details = validate(FRAME, CASES[1])
    assert not passed
    assert details["expect_column_values_to_be_unique"] == {"unexpected_count": 2, "examples": ["b", "b"]}
    assert details["expect_column_values_to_be_between"]["unexpected_count"] == 2
    assert validate(FRAME, CASES[2], examples=False) == (
        False,
        {"expect_column_values_to_not_match_regex": {"unexpected_count": 1}},  # no offending text quoted
    )
    with pytest.raises(AttributeError):  # a misspelt expectation fails as it would here
        validate(FRAME, [expect.ExpectColumnValuesToBeFabulous(column="id")])
    assert validate(FRAME, CASES[0]) == (True, {})  # and the process still answers


def test_a_dead_background_process_leaves_validation_here(background, caplog):
    assert validate(FRAME, CASES[0]) == (True, {})
    os.kill(background._process.pid, signal.SIGKILL)
    background._process.join(timeout=10)
    with caplog.at_level(logging.WARNING, logger="holistic_dagster.quality.gx"):
        assert validate(FRAME, CASES[1]) == validate_here(FRAME, CASES[1])
    assert "validating in this process" in caplog.text
    assert validation._background.helper is None
