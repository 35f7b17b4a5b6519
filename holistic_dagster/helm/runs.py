"""HELM's run folders as HELM writes them (`benchmark_output/runs/<suite>/<run>/`), read and checked.

A run folder holds `run_spec.json` (what was asked: scenario, adapter, model), `scenario_state.json` (every
request with its instance and the model's result), `per_instance_stats.json` (every metric per instance) and
`stats.json` (the aggregates), plus `scenario.json` (a description). The models below are the fields of those
files that an import uses, as HELM 0.5's dataclasses name them; fields they do not name are ignored. A file that
lacks one, or has it of another type, fails naming the file and the field (`request_states[3].result`). Types
are HELM's JSON types, strictly: a number written as a string ("1") is refused, not read as 1.0. A run's files
must be its own: a file that is a symbolic link is refused (it could be another run's), and the scenario
state's adapter spec must be the run spec's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import SourceFile, sha256_file

REQUIRED_FILES = ("run_spec.json", "scenario_state.json", "per_instance_stats.json", "stats.json")
OPTIONAL_FILES = ("scenario.json",)


class _Fields(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)  # strict: "1" is no number


class Text(_Fields):
    text: str


class HelmReference(_Fields):
    output: Text
    tags: list[str] = []

    @property
    def correct(self) -> bool:
        return "correct" in self.tags


class HelmInstance(_Fields):
    input: Text
    references: list[HelmReference]
    split: str
    id: str
    sub_split: str | None = None
    perturbation: dict[str, Any] | None = None


class Token(_Fields):
    text: str
    logprob: float = 0.0


class HelmCompletion(_Fields):
    text: str
    logprob: float = 0.0
    tokens: list[Token] = []
    finish_reason: dict[str, Any] | None = None


class HelmResult(_Fields):
    success: bool
    completions: list[HelmCompletion] = []
    request_time: float | None = None
    error: str | None = None


class HelmRequest(_Fields):
    model: str
    prompt: str
    temperature: float = 1.0
    max_tokens: int = 100
    stop_sequences: list[str] = []
    echo_prompt: bool = False
    num_completions: int = 1
    top_k_per_token: int = 1


class RequestState(_Fields):
    instance: HelmInstance
    train_trial_index: int = 0
    request: HelmRequest
    result: HelmResult | None = None
    output_mapping: dict[str, str] | None = None
    reference_index: int | None = None
    request_mode: str | None = None
    num_train_instances: int = 0
    prompt_truncated: bool = False


class ScenarioState(_Fields):
    adapter_spec: dict[str, Any]
    request_states: list[RequestState]


class StatName(_Fields):
    name: str
    split: str | None = None
    sub_split: str | None = None
    perturbation: dict[str, Any] | None = None


# a statistic's number: JSON's NaN and Infinity (which json.loads accepts) are refused, naming the file and field
Finite = Annotated[float, Field(allow_inf_nan=False)]


class Stat(_Fields):
    name: StatName
    count: int
    sum: Finite = 0.0
    sum_squared: Finite = 0.0
    min: Finite | None = None
    max: Finite | None = None
    mean: Finite | None = None


class InstanceStats(_Fields):
    instance_id: str
    train_trial_index: int = 0
    perturbation: dict[str, Any] | None = None
    stats: list[Stat]


class ScenarioSpec(_Fields):
    class_name: str
    args: dict[str, Any] = {}


class AdapterSpec(_Fields):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)  # kept whole: an export writes it back
    method: str
    model: str
    model_deployment: str | None = None
    max_train_instances: int = 5
    max_eval_instances: int | None = None
    num_train_trials: int = 1
    temperature: float = 1.0
    max_tokens: int = 100
    stop_sequences: list[str] = []


class RunSpec(_Fields):
    name: str
    scenario_spec: ScenarioSpec
    adapter_spec: AdapterSpec
    metric_specs: list[dict[str, Any]] = []
    data_augmenter_spec: dict[str, Any] | None = None
    groups: list[str] = []


@dataclass(frozen=True)
class HelmRun:
    """One HELM run folder, read and checked."""

    folder: Path
    files: dict[str, SourceFile]  # file name -> its path, sha256 and size
    spec: RunSpec
    raw_spec: dict[str, Any]  # run_spec.json as written, for an export to write back
    states: list[RequestState]
    instance_stats: list[InstanceStats]
    stats: list[Stat]
    about: dict[str, Any]  # scenario.json (name, description, tags), where present

    @property
    def suite(self) -> str:
        return self.folder.parent.name

    @property
    def model(self) -> str:
        return self.spec.adapter_spec.model

    @property
    def group(self) -> str:
        """HELM's run group (its leaderboard's scenario): the first of run_spec's groups."""
        return self.spec.groups[0] if self.spec.groups else self.spec.name.split(":", 1)[0]

    @property
    def subset(self) -> str:
        """The scenario arguments that tell this run's instances apart from another run's of the same group
        (MMLU's subject, synthetic reasoning's mode): their values, joined."""
        return ",".join(str(v) for _, v in sorted(self.spec.scenario_spec.args.items()))


def find_run_folders(paths: list[Path]) -> list[Path]:
    """Each path is a run folder (it holds run_spec.json) or a folder of them (a suite: runs/<suite>/)."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        if not path.is_dir():
            raise DataFormatError(path, None, "not a folder (give HELM run folders, or benchmark_output/runs/<suite>)")
        if (path / "run_spec.json").exists():
            found.append(path)
            continue
        runs = sorted(p for p in path.iterdir() if (p / "run_spec.json").exists())
        if not runs:
            raise DataFormatError(path, None, "no HELM run folders in it (none holds a run_spec.json)")
        found.extend(runs)
    return list(dict.fromkeys(p.resolve() for p in found))


M = TypeVar("M", bound=BaseModel)


def _parse(path: Path, model: type[M] | Any) -> Any:
    """The file's JSON checked against `model` (a pydantic model, or a list of one): an error names the file and
    the field, e.g. `request_states[3].instance.input.text: Field required`."""
    from pydantic import TypeAdapter

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataFormatError(path, None, f"not readable JSON ({e})") from None
    try:
        return TypeAdapter(model).validate_python(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".") or "(top)"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise DataFormatError(path, where, f"{first['msg']}{more}") from None


def read_run(folder: Path) -> HelmRun:
    folder = Path(folder)
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise DataFormatError(folder, None, f"not a complete HELM run folder, missing {', '.join(missing)}")
    for name in (*REQUIRED_FILES, *OPTIONAL_FILES):
        if (folder / name).is_symlink():
            raise DataFormatError(
                folder / name, None, f"a symbolic link (to {(folder / name).resolve()}): a run's files must be its own"
            )
    files = {
        name: SourceFile(str(folder / name), sha256_file(folder / name), "helm run", (folder / name).stat().st_size)
        for name in (*REQUIRED_FILES, *OPTIONAL_FILES)
        if (folder / name).is_file()
    }
    spec = _parse(folder / "run_spec.json", RunSpec)
    state = _parse(folder / "scenario_state.json", ScenarioState)
    per_instance = _parse(folder / "per_instance_stats.json", list[InstanceStats])
    raw_spec = json.loads((folder / "run_spec.json").read_text(encoding="utf-8"))
    if state.adapter_spec != raw_spec.get("adapter_spec"):  # HELM writes the run's adapter spec into both
        raise DataFormatError(
            folder / "scenario_state.json", "adapter_spec", "differs from run_spec.json's: the files are not one run's"
        )
    run = HelmRun(
        folder=folder,
        files=files,
        spec=spec,
        raw_spec=raw_spec,
        states=state.request_states,
        instance_stats=per_instance,
        stats=_parse(folder / "stats.json", list[Stat]),
        about=_parse(folder / "scenario.json", dict[str, Any]) if "scenario.json" in files else {},
    )
    _check_consistent(run)
    return run


def _check_consistent(run: HelmRun) -> None:
    """What the files say about each other: the states' instances are the ones with stats, and each evaluated
    request has a result."""
    states = folder_file(run, "scenario_state.json")
    if not run.states:
        raise DataFormatError(states, None, "request_states is empty (a run that asked nothing)")
    for i, state in enumerate(run.states):
        if state.result is None:
            raise DataFormatError(states, f"request_states[{i}]", "result: missing (a dry run? it has no outputs)")
        if state.result.success and not state.result.completions:
            raise DataFormatError(states, f"request_states[{i}]", "result.completions: empty for a successful request")
    ids = {s.instance.id for s in run.states}
    for i, entry in enumerate(run.instance_stats):
        if entry.instance_id not in ids:
            raise DataFormatError(
                folder_file(run, "per_instance_stats.json"),
                f"[{i}]",
                f"instance_id {entry.instance_id!r} is not an instance of {states}",
            )


def folder_file(run: HelmRun, name: str) -> Path:
    return run.folder / name
