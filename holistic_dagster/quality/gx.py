"""Great Expectations validation of one frame, in this process or in a background one.

Importing Great Expectations 1.x costs about 3 s of CPU (it pulls in scipy, altair and SQLAlchemy), which a
short evaluation paid before its first check. The checks therefore name their expectations with `expect`
(plain specs: the GX class name and its arguments) and GX objects are built where the validation runs. A
command that knows checks will follow (`holistic evaluate`) calls `start_background()` first: a spawned process
imports GX on the machine's other core while this one imports Dagster and the model, then validates each frame
it is sent. Results are the same either way: both paths run `validate_here`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from holistic_dagster.clients import background

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Expectation:
    """A Great Expectations expectation by class name (great_expectations.expectations.<type>) and arguments."""

    type: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def build(self):
        import great_expectations as gx

        return getattr(gx.expectations, self.type)(**self.kwargs)


class _Expectations:
    """`expect.ExpectColumnValuesToBeUnique(column="id")`: GX's own class names, checked when built."""

    def __getattr__(self, name: str):
        if not name.startswith("Expect"):
            raise AttributeError(name)
        return lambda **kwargs: Expectation(name, kwargs)


expect = _Expectations()


@lru_cache(maxsize=1)
def _batch_definition():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_pandas("holistic").add_dataframe_asset("stage_table")
    return asset.add_batch_definition_whole_dataframe("whole")


def validate_here(
    frame: pd.DataFrame, expectations: list[Expectation], examples: bool = True
) -> tuple[bool, dict[str, Any]]:
    """(all passed, details per failed expectation type: unexpected_count and, with examples, offending values)."""
    import great_expectations as gx

    batch_definition = _batch_definition()  # creates the GX context the suite needs
    suite = gx.ExpectationSuite(name="stage")
    for e in expectations:
        suite.add_expectation(e.build())
    result = batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(suite)
    details = {}
    for r in result.results:
        if not r.success:
            found = r.result.get("partial_unexpected_list") or r.result.get("observed_value")
            key = r.expectation_config.type
            if key in details:  # the same expectation on another column or pattern
                config = r.expectation_config.kwargs
                key += "".join(f" {config[k]}" for k in ("column", "regex") if k in config)
            details[key] = {"unexpected_count": r.result.get("unexpected_count")}
            if examples:  # not for text that must not be stored (a PII check's offending values)
                details[key]["examples"] = _jsonable(found)
    return bool(result.success), details


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in list(value)[:10]]
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


_background = background.Offload("holistic-gx", __name__, "_batch_definition", log, doing="validating")


def start_background() -> None:
    """Validate in a background process from now on in this process (started once; ends when this one does)."""
    _background.start()


def stop_background() -> None:
    _background.stop()


def validate(
    frame: pd.DataFrame, expectations: list[Expectation], examples: bool = True
) -> tuple[bool, dict[str, Any]]:
    """validate_here's result, computed in the background process when one was started."""
    return _background.run(validate_here, frame, expectations, examples)
