"""Errors that name what went wrong, where: the file, the record and the problem."""

from __future__ import annotations


class HolisticError(Exception):
    """Base class for errors a user can act on (bad catalog, bad data, unknown names)."""


class CatalogError(HolisticError):
    """A suite, scenario, template or model registry entry is missing or malformed."""


class DataFormatError(HolisticError):
    """A source data file has a record that cannot be read."""

    def __init__(self, path: object, record: object, problem: str):
        self.path, self.record, self.problem = str(path), record, problem
        where = f"{self.path}, record {record}" if record is not None else self.path
        super().__init__(f"{where}: {problem}")


class DataUnavailableError(HolisticError):
    """Source data is neither in a configured local directory nor downloadable."""


class CapabilityError(HolisticError):
    """A model cannot do what a scenario's adapter needs (e.g. prompt log-probabilities)."""


class LibraryVersionError(HolisticError):
    """An installed library is one this code would run silently wrong with (e.g. a renamed argument it ignores)."""
