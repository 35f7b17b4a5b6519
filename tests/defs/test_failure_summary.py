"""A failed step's one-line summary names the user's error (ours, which names the file), not the library error
it was raised from: a truncated GGUF said "cannot reshape array" and nothing of the file."""

from __future__ import annotations

import sys

from dagster._utils.error import serializable_error_info_from_exc_info

from holistic_dagster.defs.runner import _root_cause
from holistic_dagster.errors import CatalogError, DataFormatError


def _error_info(raise_it):
    try:
        try:
            raise_it()
        except Exception as e:  # Dagster wraps the step's exception as its own, the user's error as its cause
            raise RuntimeError("Error occurred while executing op") from e
    except RuntimeError:
        return serializable_error_info_from_exc_info(sys.exc_info())


def test_the_summary_names_our_error_not_the_library_error_under_it():
    def truncated_gguf():
        try:
            raise ValueError("cannot reshape array of size 28214336 into shape (49152,612)")
        except ValueError as e:
            raise CatalogError("/models/cut.gguf: not a GGUF file llama.cpp can read; a truncated download?") from e

    summary = _root_cause(_error_info(truncated_gguf))
    assert "/models/cut.gguf: not a GGUF file" in summary and "cannot reshape" not in summary


def test_without_an_error_of_ours_the_innermost_is_shown():
    def library_only():
        raise ValueError("a library's own message")

    assert _root_cause(_error_info(library_only)).endswith("ValueError: a library's own message")

    def ours():
        raise DataFormatError("data/x.jsonl", "line 3", "not valid JSON")

    assert _root_cause(_error_info(ours)).endswith("data/x.jsonl, record line 3: not valid JSON")
