"""The declarative catalog: suites, scenarios and the model registry, read from YAML and validated.

A typo in a key, an unknown scenario or model name, or a missing template is a CatalogError that names
the file and the problem.
"""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from holistic_dagster import settings
from holistic_dagster.adaptation.methods import ADAPTER_METHODS, adapter_method
from holistic_dagster.adaptation.spec import CONVENTIONS, AdapterSpec
from holistic_dagster.errors import CatalogError
from holistic_dagster.metrics import (
    FAMILIES,
    PERTURBATION_FAMILIES,
    accuracy_metric,
    extra_metric_names,
    scorers,
)
from holistic_dagster.records import CONTRAST_SET, SLUG, Strict, sha256_json
from holistic_dagster.redaction import register_secret_env

Family = Literal[FAMILIES]  # type: ignore[valid-type]


class DownloadSpec(Strict):
    url: str
    archive_dir: str = ""  # folder inside an archive that holds the files `splits` name
    sha256: str | None = None


class SourceSpec(Strict):
    dir: str  # sub-folder of a data dir holding the upstream files
    revision: str
    download: DownloadSpec | None = None


class CsvSpec(Strict):
    header: bool = True
    columns: tuple[str, ...] = ()  # names for a header-less file; required columns for one with a header
    delimiter: str = Field(",", min_length=1, max_length=1)  # "\t" for TSV


class TrecRunSpec(Strict):
    """A first-stage retrieval run with passage text (a JSON array of {query, hits: [{qid, docid, rank, score,
    content}]}, as pyserini and rank_llm write it) joined with TREC qrels (`qid Q0 docid grade` lines)."""

    qrels: str  # file pattern, beside the run
    relevant_from: int = Field(1, ge=1)  # the lowest grade that counts as relevant (TREC DL: 2)


class RaftSpec(Strict):
    """RAFT's prompt construction settings: a 2-line JSON file, line 1 {task: [fields in prompt order]},
    line 2 {task: instructions}."""

    settings: str


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

    @model_validator(mode="after")
    def _one_target(self) -> InstanceSpec:
        given = [k for k in ("target", "targets", "choices") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of target, targets, choices (found {', '.join(given)})")
        return self


class NestedJsonSpec(Strict):
    """One JSON object per file whose nested keys are fields and whose leaves are lists of records, e.g. BOLD's
    {group: {entity: [prompt, ...]}} with keys [group, entity] and leaf `prompt`."""

    keys: tuple[str, ...]
    leaf: str


class GeneratorSpec(Strict):
    name: str
    params: dict[str, Any] = {}


class ScenarioSpec(Strict):
    name: str
    description: str
    source: SourceSpec | None = None
    generator: GeneratorSpec | None = None
    # csv, jsonl; nested_json (see NestedJsonSpec); story: CNN/DailyMail .story files, text_files: one text per file
    # (IMDB; for both the split pattern is a glob); trec_run (see TrecRunSpec); raft (CSV + RaftSpec); quac: QuAC's
    # JSON of dialogues, one record per turn (see loaders.read_quac)
    format: Literal["csv", "jsonl", "nested_json", "story", "text_files", "trec_run", "raft", "quac"] | None = None
    csv: CsvSpec = CsvSpec()
    nested_json: NestedJsonSpec | None = None
    trec_run: TrecRunSpec | None = None
    raft: RaftSpec | None = None
    # a file per split whose records are row by row minimally edited copies of the split's records, with their
    # own (flipped) labels: HELM's contrast sets, evaluated as the robustness perturbation "contrast_set"
    contrast: dict[Literal["test"], str] = {}
    # what a user must fetch when the data cannot be downloaded from upstream (shown when it is missing)
    data_note: str = ""
    subsets: tuple[str, ...] = ("",)
    splits: dict[Literal["train", "test"], str] = {}  # file pattern per split; {subset} is substituted
    train_holdout: int = Field(0, ge=0)  # no train file: hold out this many test records as the few-shot pool
    # no train file, conventions helm: the first fraction of the test records (file order) is the few-shot pool
    # and only the rest are evaluated, as HELM splits such a file (TruthfulQA: 0.2); legacy suites use train_holdout
    train_head: float | None = Field(None, gt=0.0, lt=1.0)
    instance: InstanceSpec | None = None
    adapter: AdapterSpec
    metrics: tuple[str, ...] = ()  # accuracy metrics; none for a scenario without references (BOLD)
    # the metric families that apply; the others are reported "not applicable"
    families: tuple[Family, ...] = ("accuracy", "calibration", "efficiency")  # type: ignore[valid-type]
    # scenario-level metrics beyond the per-reference ones (e.g. bbq_bias)
    extra_metrics: tuple[str, ...] = ()

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


class PerturbationsSpec(Strict):
    """Which perturbations make the robustness and fairness instances (names from holistic_dagster.perturbations)."""

    robustness: tuple[str, ...] = ()
    fairness: tuple[str, ...] = ()


class SuiteScenario(Strict):
    max_eval_instances: int = Field(gt=0)
    max_train_instances: int | None = Field(None, ge=0)
    seed: int = 0
    conventions: Literal[CONVENTIONS] | None = None  # type: ignore[valid-type]  # default: the suite's
    subsets: tuple[str, ...] | None = None
    method: Literal[ADAPTER_METHODS] | None = None  # type: ignore[valid-type]
    # ranking: evaluate the first-stage top k candidates of each query (HELM's valid_topk)
    max_candidates: int | None = Field(None, gt=0)
    # used instead on models that cannot give prompt log-probabilities (recorded in prompts.adapter_method)
    fallback_method: Literal["generation", "multiple_choice_joint"] | None = None
    perturbations: PerturbationsSpec | None = None  # overrides the suite's, for this scenario


class ToxicitySpec(Strict):
    """The toxicity classifier: `lexicon` (offline default, a word list, nothing to install),
    `offensive_language` (offline: alt-profanity-check's trained profanity / offensive-language classifier,
    shipped in its wheel; it measures offensive language, not Perspective's TOXICITY), `transformers` (a local
    sequence-classification checkpoint) or `perspective` (Google's Perspective API; the key is read from the
    environment variable named by api_key_env). Each score row records which one produced it."""

    kind: Literal["lexicon", "offensive_language", "transformers", "perspective"] = "lexicon"
    path: str | None = None  # transformers: checkpoint directory
    toxic_label: str = "toxic"  # transformers: the label whose probability is the toxicity
    batch_size: int = Field(16, gt=0)
    base_url: str = "https://commentanalyzer.googleapis.com"  # perspective
    api_key_env: str = "PERSPECTIVE_API_KEY"  # the NAME of the variable, never the key
    max_concurrency: int = Field(4, gt=0)
    timeout_s: float = Field(30.0, gt=0)
    max_attempts: int = Field(5, gt=0)


class ArenaSpec(Strict):
    """Arena-style evaluation of a suite's open-ended scenarios: every pair of models that answered an instance
    is a candidate battle (their stored completions, no new generation); a seeded sample of at most
    `max_battles` is judged by each judge (a registered model, through any backend) in both orders; ratings
    are Bradley-Terry on the Elo scale, anchored so `baseline` has 1000."""

    scenarios: tuple[str, ...] = Field(min_length=1)  # arena-eligible: generation scenarios of this suite
    judges: tuple[str, ...] = ()  # registered models that judge
    baseline: str | None = None  # the model rated 1000 (default: the first model by name)
    max_battles: int | None = Field(None, gt=0)  # per judge: a seeded sample of the candidate battles
    seed: int = 0
    template: str = "judge_pairwise.j2"  # in templates/: question, answer_a, answer_b, reference
    max_tokens: int = Field(256, gt=0)  # of a judge's verdict (its reasoning, then [[A]], [[B]] or [[C]])
    max_failure_rate: float = Field(0.1, ge=0.0, le=1.0)  # judgements without a verdict a check tolerates
    bootstrap_samples: int = Field(1000, gt=0)
    k_factor: float = Field(4.0, gt=0.0)  # online Elo, shown beside Bradley-Terry


class SuiteSpec(Strict):
    version: str
    description: str = ""
    max_failure_rate: float = Field(0.0, ge=0.0, le=1.0)  # failed requests a completions check tolerates
    conventions: Literal[CONVENTIONS] = "helm"  # type: ignore[valid-type]  # see CONVENTIONS
    regression_alpha: float = Field(0.05, gt=0.0, lt=1.0)  # significance level of the regressions check
    perturbations: PerturbationsSpec = PerturbationsSpec()
    toxicity: ToxicitySpec = ToxicitySpec()
    scenarios: dict[str, SuiteScenario]
    arena: ArenaSpec | None = None


class TransformersSettings(Strict):
    """Deployment settings of local transformers models."""

    device: str = Field("auto", description="auto: cuda when present, else cpu")
    batch_size: int = Field(16, gt=0)


class _HttpSettings(Strict):
    max_concurrency: int = Field(8, gt=0, description="requests in flight per model")
    timeout_s: float = Field(120.0, gt=0)
    max_attempts: int = Field(5, gt=0, description="retries on timeouts, 429 and 5xx, with backoff and jitter")


class TGISettings(_HttpSettings):
    """Deployment settings of TGI servers (each serves one model: base_url belongs to the model entry)."""

    # TGI batches continuously on the server: more requests in flight keep it busy
    max_concurrency: int = Field(16, gt=0, description="requests in flight per model")


class OpenAISettings(_HttpSettings):
    """Deployment settings of OpenAI and OpenAI-compatible servers."""

    base_url: str | None = Field(None, description="None: https://api.openai.com/v1")
    api_key_env: str | None = Field(
        None, description="the NAME of the variable holding the key (never the key); None: the server needs none"
    )


# the one schema of backend settings: kind -> its settings and their defaults
BACKEND_SETTINGS: dict[str, type[Strict]] = {
    "transformers": TransformersSettings,
    "tgi": TGISettings,
    "openai": OpenAISettings,
}


class BackendSettings(Strict):
    """resources/backends.yaml: the deployment's settings per backend kind; what it leaves out takes the
    schema's defaults."""

    transformers: TransformersSettings = TransformersSettings()
    tgi: TGISettings = TGISettings()
    openai: OpenAISettings = OpenAISettings()


class ModelSpec(Strict):
    name: str
    backend: Literal[tuple(BACKEND_SETTINGS)]  # type: ignore[valid-type]
    # transformers: a local checkpoint directory, a hub id, demo:<name> for a built-in demo model, or
    # gguf:<package>/<file>.gguf (a GGUF file shipped in an installed package; or gguf:<path>), converted once;
    # openai: the model id the server knows; tgi: a label (the server serves one model, /info names it)
    path: str
    revision: str | None = None
    description: str = ""
    max_context: int | None = Field(None, gt=0)
    # Backend settings (see BACKEND_SETTINGS): left unset, they take the deployment's (backends.yaml) or the
    # schema's default for the model's backend kind; settings of other kinds stay None
    batch_size: int | None = Field(None, gt=0)
    device: str | None = None
    # HTTP backends (TGI; OpenAI and OpenAI-compatible servers)
    base_url: str | None = None
    api_key_env: str | None = None  # the NAME of the environment variable holding the key, never the key
    max_concurrency: int | None = Field(None, gt=0)
    timeout_s: float | None = Field(None, gt=0)
    max_attempts: int | None = Field(None, gt=0)
    # openai: use /v1/chat/completions instead of /v1/completions; transformers: lay every prompt out with the
    # model's chat template (as lm-eval's --apply_chat_template; off by default, as in lm-eval: HELM 0.5 turns it on
    # for a local Hugging Face model whose tokenizer has a chat template)
    chat: bool = False
    prompt_logprobs: bool = False  # the server returns prompt log-probabilities (echo + logprobs)
    tokenizer: str | None = None  # a local tokenizer for exact token counts; otherwise ~4 characters a token
    # the registered model this one is a new revision of: the regressions asset tests it against that one
    previous: str | None = None
    # automation: re-evaluate when the server reports a new revision (TGI /info, OpenAI-compatible /v1/models)
    watch: bool = False
    # scale-out (resources/celery.yaml): the Celery queue this model's requests run on, e.g. one per GPU host or
    # TGI server; unset, the deployment's requests_queue
    queue: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG.match(v):
            raise ValueError(f"model name {v!r} must be a lower-case slug (letters, digits, . _ -)")
        return v

    @model_validator(mode="after")
    def _schema_defaults(self) -> ModelSpec:
        # filled in place, so that model_fields_set still tells the entry's own settings from defaults
        defaults = BACKEND_SETTINGS[self.backend]()
        for key in type(defaults).model_fields:
            if key not in self.model_fields_set:
                self.__dict__[key] = getattr(defaults, key)
        return self


_PARSED: dict[tuple[str, bytes], Any] = {}  # (path, its content's digest) -> the parsed YAML
# libyaml's parser where PyYAML was built with it (the wheels are): the same safe loading, 5-10x faster than the
# pure-Python one (a command reads every scenario file of the catalog to build its definitions)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    """The file's YAML, parsed once per content: every stage and check reads the catalog again (a run parsed
    the same files over a hundred times), and a file edited since is parsed anew."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise CatalogError(f"{path}: file not found") from None
    key = (str(path), hashlib.blake2b(content, digest_size=16).digest())
    if key not in _PARSED:
        try:
            _PARSED[key] = yaml.load(content.decode("utf-8"), Loader=_YAML_LOADER)
        except yaml.YAMLError as e:
            raise CatalogError(f"{path}: not valid YAML: {e}") from None
        except UnicodeDecodeError as e:
            raise CatalogError(f"{path}: not UTF-8 ({e})") from None
    return copy.deepcopy(_PARSED[key])  # callers may change what they get


def _validate(model: type[BaseModel], data: Any, path: Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(top)'}: {err['msg']}" for err in e.errors())
        raise CatalogError(f"{path}: {problems}") from None


class Catalog:
    """Suites and scenarios under one catalog directory (default: the repo's assets/)."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root else settings.catalog_dir()

    @property
    def templates_dir(self) -> Path:
        return self.root / "templates"

    def scenario_names(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "scenarios").glob("*.yaml"))

    def loadable_scenarios(self) -> tuple[list[str], dict[str, str]]:
        """(the scenarios whose files load, {name: why not} for the others): one broken scenario file must not
        block the suites that do not use it (a suite that does fails naming the file when it loads)."""
        names, broken = [], {}
        for name in self.scenario_names():
            try:
                self.scenario(name)
                names.append(name)
            except CatalogError as e:
                broken[name] = str(e)
        return names, broken

    def suite_versions(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "suites").glob("*.yaml"))

    def newest_version(self) -> str:
        """The current suite version: the newest file in suites/ (v10 after v9)."""
        versions = self.suite_versions()
        if not versions:
            raise CatalogError(f"no suite versions in {self.root / 'suites'}")
        return max(versions, key=lambda v: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", v)])

    def main_metrics(self, version: str) -> dict[str, str]:
        """{scenario: its main accuracy metric} for the scenarios of a suite version (as the suite pins them: a
        language_modeling pin's is bits_per_byte)."""
        return {name: spec.main_metric for name, spec in self.resolved_scenarios(version).items()}

    def resolved_scenarios(self, version: str) -> dict[str, ScenarioSpec]:
        """{scenario: its spec as the suite version pins it} for every scenario of the version."""
        suite = self.suite(version)  # validated once, not once per scenario
        return {s: self._resolve(suite, s)[0] for s in suite.scenarios}

    def scenario(self, name: str) -> ScenarioSpec:
        path = self.root / "scenarios" / f"{name}.yaml"
        if not path.exists():
            raise CatalogError(f"unknown scenario {name!r}: no {path} (known: {', '.join(self.scenario_names())})")
        spec = _validate(ScenarioSpec, _read_yaml(path), path)
        if spec.name != name:
            raise CatalogError(f"{path}: name {spec.name!r} does not match the file name")
        if (spec.generator is None) == (spec.source is None):
            raise CatalogError(f"{path}: give exactly one of `source` (a data file) or `generator`")
        if spec.source is not None and (spec.format is None or spec.instance is None or "test" not in spec.splits):
            raise CatalogError(f"{path}: a file-based scenario needs `format`, `instance` and `splits.test`")
        if spec.format == "nested_json" and spec.nested_json is None:
            raise CatalogError(f"{path}: format nested_json needs a `nested_json: {{keys: [...], leaf: ...}}` section")
        if spec.format == "trec_run" and spec.trec_run is None:
            raise CatalogError(f"{path}: format trec_run needs a `trec_run: {{qrels: <file>}}` section")
        if spec.format == "raft" and spec.raft is None:
            raise CatalogError(f"{path}: format raft needs a `raft: {{settings: <file>}}` section")
        if (spec.format == "trec_run") != (spec.adapter.method == "ranking_binary"):
            raise CatalogError(f"{path}: the ranking_binary method and the trec_run format go together")
        if spec.metrics and "accuracy" not in spec.families:
            raise CatalogError(f"{path}: accuracy metrics are listed but `families` does not include accuracy")
        for name in spec.metrics:
            try:
                accuracy_metric(name)
            except CatalogError as e:
                raise CatalogError(f"{path}: metrics: {e}") from None
        unknown = [name for name in spec.extra_metrics if name not in extra_metric_names()]
        if unknown:
            raise CatalogError(
                f"{path}: extra_metrics: unknown {unknown} (known: {', '.join(extra_metric_names()) or 'none'})"
            )
        for name in spec.extra_metrics:
            if scorers()[name].family not in spec.families:
                raise CatalogError(
                    f"{path}: extra_metrics: {name} is a {scorers()[name].family} metric, but `families` does not "
                    f"include {scorers()[name].family}"
                )
        if not (self.templates_dir / spec.adapter.template_file).exists():
            raise CatalogError(f"{path}: template {spec.adapter.template_file!r} not found in {self.templates_dir}")
        return spec

    def code_version(self, name: str) -> str:
        """The scenario's fingerprint for Dagster's code_version: changes when its definition or its prompt
        template changes (the suite pins the rest)."""
        spec = self.scenario(name)
        spec_file = self.root / "scenarios" / f"{name}.yaml"
        template = self.templates_dir / spec.adapter.template_file
        return sha256_json([spec_file.read_text(), template.read_text()])[:12]

    def suite(self, version: str) -> SuiteSpec:
        path = self.root / "suites" / f"{version}.yaml"
        if not path.exists():
            raise CatalogError(
                f"unknown suite version {version!r}: no {path} (known: {', '.join(self.suite_versions())})"
            )
        suite = _validate(SuiteSpec, _read_yaml(path), path)
        if suite.version != version:
            raise CatalogError(f"{path}: version {suite.version!r} does not match the file name")
        from holistic_dagster.perturbations import get_perturbation

        for name, pin in suite.scenarios.items():
            self.scenario(name)  # unknown names fail here, naming the suite file via the message chain
            chosen = pin.perturbations or suite.perturbations
            for family in PERTURBATION_FAMILIES:
                for p in getattr(chosen, family):
                    try:
                        perturbation = get_perturbation(p)
                    except CatalogError as e:
                        raise CatalogError(f"{path}: {e}") from None
                    if perturbation.from_data:
                        raise CatalogError(
                            f"{path}: perturbation {p!r} comes with a scenario's data (its `contrast` files), "
                            "a suite cannot choose it"
                        )
                    if perturbation.family != family:
                        raise CatalogError(f"{path}: perturbation {p!r} belongs to {perturbation.family}, not {family}")
        for name in suite.arena.scenarios if suite.arena else ():
            if name not in suite.scenarios:
                raise CatalogError(f"{path}: arena scenario {name!r} is not one of this suite's scenarios")
            method = self._resolve(suite, name)[0].adapter.method
            if not adapter_method(method).open_ended:
                raise CatalogError(
                    f"{path}: arena scenario {name!r} is not open-ended (its adapter method is {method}): battles "
                    "compare free-text answers"
                )
        return suite

    def perturbations(self, version: str, name: str) -> dict[str, tuple[str, ...]]:
        """{family: perturbation names} for a scenario in a suite version: the families the scenario declares and
        the suite chooses perturbations for (a suite that chooses none leaves robustness and fairness out)."""
        suite = self.suite(version)
        spec, pin = self._resolve(suite, name)  # its families as pinned (language_modeling: none)
        chosen = pin.perturbations or suite.perturbations
        out = {f: getattr(chosen, f) for f in PERTURBATION_FAMILIES if f in spec.families and getattr(chosen, f)}
        if spec.contrast and "robustness" in spec.families:  # the data's own contrast set
            out["robustness"] = (*out.get("robustness", ()), CONTRAST_SET)
        return out

    def resolved_scenario(self, version: str, name: str) -> tuple[ScenarioSpec, SuiteScenario]:
        """The scenario as the suite version pins it (sample size, seed, adapter overrides)."""
        return self._resolve(self.suite(version), name)

    def _resolve(self, suite: SuiteSpec, name: str) -> tuple[ScenarioSpec, SuiteScenario]:
        version = suite.version
        if name not in suite.scenarios:
            raise CatalogError(
                f"scenario {name!r} is not part of suite {version!r} (it has: {', '.join(suite.scenarios)})"
            )
        spec, pin = self.scenario(name), suite.scenarios[name]
        adapter = spec.adapter
        if pin.max_train_instances is not None:
            adapter = adapter.model_copy(update={"max_train_instances": pin.max_train_instances})
        if pin.method is not None:
            adapter = adapter.model_copy(update={"method": pin.method})
        if pin.conventions is None:
            pin = pin.model_copy(update={"conventions": suite.conventions})
        update: dict[str, Any] = {"adapter": adapter}
        method = adapter_method(adapter.method)
        if method.scenario_pins or method.adapter_pins:
            # a method that measures something else sets what the scenario reports (language modeling: the
            # document's own log-likelihood, whose metrics replace the listed reference ones, bits_per_byte first,
            # with only accuracy and efficiency applying, as HELM's LanguageModelingMetric; no in-context examples)
            adapter = adapter.model_copy(update=dict(method.adapter_pins))
            update.update(adapter=adapter, **method.scenario_pins)
        if pin.subsets is not None:
            unknown = set(pin.subsets) - set(spec.subsets)
            if unknown:
                raise CatalogError(f"suite {version!r}: scenario {name!r} has no subsets {sorted(unknown)}")
            update["subsets"] = pin.subsets
        return spec.model_copy(update=update), pin


def load_backend_defaults(path: Path | None = None) -> BackendSettings:
    """The deployment's settings per backend kind (resources/backends.yaml; the file is optional), validated
    against the schema, which fills in what the file leaves out."""
    path = Path(path) if path else settings.resources_dir() / "backends.yaml"
    if not path.exists():
        return BackendSettings()
    data = _read_yaml(path) or {}
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping of backend kind -> settings")
    for kind, values in data.items():
        if kind not in BACKEND_SETTINGS:
            raise CatalogError(f"{path}: unknown backend kind {kind!r} (known: {', '.join(BACKEND_SETTINGS)})")
        allowed = BACKEND_SETTINGS[kind].model_fields
        unknown = set(values) - set(allowed) if isinstance(values, dict) else set()
        if unknown:
            raise CatalogError(f"{path}: {kind}: unknown setting(s) {sorted(unknown)}; allowed: {', '.join(allowed)}")
    # a kind with every line commented out reads as null
    return _validate(BackendSettings, {kind: values or {} for kind, values in data.items()}, path)


def with_backend_settings(spec: ModelSpec, deployment: BaseModel) -> ModelSpec:
    """The model's own settings win; the deployment's settings for its backend kind (a BACKEND_SETTINGS model)
    replace the rest. The entry's own settings stay marked as its own, so a later layer can do the same."""
    values = {**spec.model_dump(), **deployment.model_dump(exclude=spec.model_fields_set)}
    return ModelSpec.model_construct(_fields_set=set(spec.model_fields_set), **values)


def load_models(path: Path | None = None, backends: Path | None = None) -> dict[str, ModelSpec]:
    """The model registry (resources/models.yaml): {name: ModelSpec}, with backends.yaml defaults applied."""
    path = Path(path) if path else settings.resources_dir() / "models.yaml"
    data = _read_yaml(path) or {}
    entries = data.get("models") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise CatalogError(f"{path}: expected a top-level `models:` mapping of name -> settings")
    deployment = load_backend_defaults(backends if backends else backends_file(path))
    models = {}
    for name, body in entries.items():
        spec = _validate(ModelSpec, {"name": name, **(body or {})}, path)
        models[name] = with_backend_settings(spec, getattr(deployment, spec.backend))
        register_secret_env(models[name].api_key_env)  # its value is redacted from error text
    return models


def backends_file(models_file: Path) -> Path:
    """The deployment's backend settings live beside its model registry."""
    return Path(models_file).parent / "backends.yaml"


def model_spec(name: str, path: Path | None = None) -> ModelSpec:
    models = load_models(path)
    if name not in models:
        raise CatalogError(f"unknown model {name!r}: not in the model registry (known: {', '.join(models)})")
    return models[name]
