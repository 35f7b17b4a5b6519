"""The vocabulary: the typed records at each stage boundary (read the pipeline from these), the identities that key
them, and the base of every declarative spec.

source file -> Instance -> Request -> Completion -> InstanceScore
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# a name that is a partition key or a file name: lower case, digits, . _ - (scenarios, models, suite baselines)
SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
CHOICE_LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # multiple-choice answers as the prompts letter them
CONTRAST_SET = "contrast_set"  # the robustness perturbation a scenario's `contrast` files give


class Strict(BaseModel):
    """The base of every spec read from YAML (catalog, registry, deployment files): unknown keys are refused (a
    typo is an error naming the file), and a spec is frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Price(Strict):
    """What a model's provider charges, in US dollars per million tokens (a registry entry's `price`)."""

    # US dollars per million prompt tokens
    input_per_million: float = Field(ge=0.0)
    # US dollars per million generated tokens
    output_per_million: float = Field(ge=0.0)

    def cost(self, prompt_tokens: float, output_tokens: float) -> float:
        return (prompt_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1e6


@dataclass(frozen=True)
class SourceFile:
    """Where instances came from: a file (with checksum) or a generator (with its parameters)."""

    uri: str  # path, URL or generator://name?params
    sha256: str
    revision: str  # upstream revision or generator version
    num_bytes: int = 0


@dataclass(frozen=True)
class Reference:
    output: str
    correct: bool


@dataclass(frozen=True)
class Instance:
    instance_id: str
    split: str  # "train" (few-shot pool) or "test" (evaluated)
    input: str
    references: tuple[Reference, ...]
    source: SourceFile
    record: str  # the record's position in its source (line number, row number, generator index)
    subset: str = ""  # e.g. an MMLU subject; few-shot examples come from the same subset
    is_multiple_choice: bool = False
    perturbation: str = ""  # the perturbation that made this instance from `original_id` ("" for an original)
    original_id: str = ""
    # scenario-specific fields a metric needs (e.g. BBQ's context condition and stereotyped groups)
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def correct_references(self) -> list[Reference]:
        return [r for r in self.references if r.correct]


@dataclass(frozen=True)
class Request:
    """One call to a model. `request_id` hashes everything that determines the answer."""

    request_id: str
    instance_id: str
    kind: str  # "generate" | "score" (log-probability of `continuation` after `prompt`)
    prompt: str
    continuation: str = ""
    choice_index: int | None = None
    is_null_context: bool = False  # calibrated multiple choice: the choice scored after "Answer:"
    max_tokens: int = 0
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    num_train_instances: int = 0
    truncated: bool = False
    num_prompt_tokens: int = 0


@dataclass(frozen=True)
class Completion:
    request_id: str
    text: str
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float, ...] = ()  # of the generated tokens, or of the continuation's tokens
    logprob: float = 0.0  # their sum
    num_prompt_tokens: int = 0
    num_completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = ""
    error: str = ""
    top_logprobs: tuple[dict[str, float], ...] = ()  # per generated token: the top alternatives, where given


@dataclass(frozen=True)
class InstanceScore:
    instance_id: str
    metric: str
    family: str
    value: float
    request_id: str  # the request whose completion carries the prediction
    prediction: str = ""
    perturbation: str = ""  # robustness/fairness: the perturbation, or "worst" for the worst case
    scorer: str = ""  # what produced the value when not a formula alone (e.g. the toxicity classifier)


@dataclass(frozen=True)
class ScenarioMetric:
    metric: str
    family: str
    value: float | None  # None: undefined (then `note` says why)
    count: int
    perturbation: str = ""
    scorer: str = ""
    note: str = ""


@dataclass(frozen=True)
class SafetyJudgement:
    """One judge's judgement of one answer's safety (HELM Safety; judging/safety.py gives them, the safety scorer
    averages them): 1 safe, 0 unsafe, 0.5 unclear."""

    score: float | None  # None: the judge failed on this answer (error says why)
    label: str  # the XSTest label the score means ("" on failure)
    raw: str = ""  # a judge model's output as it came
    error: str = ""
    request_id: str = ""  # a judge model's request (a key of the completion cache); "" for the string match


# --- identities: the one place files, requests and model revisions are hashed ---------------------------
def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def request_id(
    *,
    kind: str,
    prompt: str,
    continuation: str,
    max_tokens: int,
    temperature: float,
    stop: tuple[str, ...],
    sample: int = 0,
) -> str:
    """The request's identity: the rendered prompt plus everything that decides the answer, and which of an
    instance's samples it is (HELM's num_outputs: the same prompt sampled again is another request)."""
    identity = {
        "kind": kind,
        "prompt": prompt,
        "continuation": continuation,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stop": list(stop),
    }
    return sha256_json({**identity, "sample": sample} if sample else identity)[:32]


PACKAGE = Path(__file__).resolve().parent
# code, the warehouse schema, templates and judge prompts, word lists and catalogs
SOURCE_SUFFIXES = (".py", ".sql", ".j2", ".txt", ".yaml")


@functools.cache
def code_fingerprint(*roots: Path) -> str:
    """A hash of this package's source files and of those under `roots` (a Celery worker adds its catalog): another
    release or a local edit changes it, so a step is run again (automation.freshness) and a worker started from
    other code is refused (defs/celery.py)."""
    h = hashlib.sha256()
    for root in (PACKAGE, *map(Path, roots)):
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]
