"""The declarative catalog (assets/): suites and scenarios, read from YAML and validated against the metric
registry, the perturbations, the adapter methods, the file formats and the templates. A typo in a key, an unknown
scenario, metric or perturbation name, or a missing template is a CatalogError that names the file and the problem.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from holistic_dagster import settings
from holistic_dagster.adaptation.methods import adapter_method
from holistic_dagster.adaptation.spec import AdapterSpec
from holistic_dagster.config.schema import read_yaml, validate
from holistic_dagster.errors import CatalogError
from holistic_dagster.metrics import (
    PERTURBATION_FAMILIES,
    accuracy_metric,
    extra_metric_names,
    scorers,
)
from holistic_dagster.records import CONTRAST_SET, Strict, sha256_json
from holistic_dagster.scenarios.formats import FORMATS
from holistic_dagster.scenarios.spec import CONVENTIONS, PerturbationsSpec, ScenarioSpec, SuiteScenario, helm_layout


class ToxicitySpec(Strict):
    """The toxicity classifier: `lexicon` (offline default, a word list, nothing to install),
    `offensive_language` (offline: alt-profanity-check's trained profanity / offensive-language classifier,
    shipped in its wheel; it measures offensive language, not Perspective's TOXICITY), `transformers` (a local
    sequence-classification checkpoint) or `perspective` (Google's Perspective API; the key is read from the
    environment variable named by api_key_env). Each score row records which one produced it."""

    # which classifier (see above)
    kind: Literal["lexicon", "offensive_language", "transformers", "perspective"] = "lexicon"
    path: str | None = None  # transformers: checkpoint directory
    toxic_label: str = "toxic"  # transformers: the label whose probability is the toxicity
    # transformers: texts per forward pass
    batch_size: int = Field(16, gt=0)
    base_url: str = "https://commentanalyzer.googleapis.com"  # perspective
    api_key_env: str = "PERSPECTIVE_API_KEY"  # the NAME of the variable, never the key
    # perspective: requests in flight
    max_concurrency: int = Field(4, gt=0)
    # perspective: seconds a request may take before it is retried
    timeout_s: float = Field(30.0, gt=0)
    # perspective: tries per request (timeouts, 429, 5xx)
    max_attempts: int = Field(5, gt=0)


class QualificationSpec(Strict):
    """What a judge must show before its verdicts enter ratings (judging.qualification.measure): on battles whose
    answer is known, judged in both orders, the share of judgements that name the right answer (agreement) and
    the share of battles whose two orders agree (position consistency).

    Thresholds: a judge that always names one position scores exactly 0.5 on these order-balanced battles, and
    one that guesses A/B/C scores 1/3; MT-Bench (Zheng et al. 2023) found GPT-4 agreeing with expert people on
    85% of open battles without ties. Battles with a known answer (the reference shown, or a human label) are
    easier than open ones, so a judge must get at least 80% of its judgements right, with the 95% Wilson
    interval's lower end above 0.5 (a small sample cannot qualify a position-biased guesser by luck), and give
    the same verdict in both orders on at least 70% of them."""

    battles_per_set: int = Field(12, gt=0)  # from each qualification set (TruthfulQA, XSTest's human labels)
    # the seed of the battles drawn from each set and of their answer order
    seed: int = 0
    # the share of judgements naming the known-better answer a judge needs
    min_agreement: float = Field(0.8, ge=0.0, le=1.0)
    # the share of battles whose two orders agree a judge needs
    min_consistency: float = Field(0.7, ge=0.0, le=1.0)
    chance: float = Field(0.5, ge=0.0, le=1.0)  # the Wilson lower bound of agreement must be above this


class ArenaSpec(Strict):
    """Arena-style evaluation of a suite's open-ended scenarios: every pair of models that answered an instance
    is a candidate battle (their stored completions, no new generation); a seeded sample of at most
    `max_battles` is judged by each judge (a registered model, through any backend) in both orders; ratings
    are Bradley-Terry on the Elo scale, anchored so `baseline` has 1000."""

    scenarios: tuple[str, ...] = Field(min_length=1)  # arena-eligible: generation scenarios of this suite
    judges: tuple[str, ...] = ()  # registered models that judge
    baseline: str | None = None  # the model rated 1000 (default: the first model by name)
    max_battles: int | None = Field(None, gt=0)  # per judge: a seeded sample of the candidate battles
    # the seed of the battles' sample, their answer order and the bootstrap
    seed: int = 0
    template: str = "judge_pairwise.j2"  # in templates/: question, answer_a, answer_b, reference
    max_tokens: int = Field(256, gt=0)  # of a judge's verdict (its reasoning, then [[A]], [[B]] or [[C]])
    max_failure_rate: float = Field(0.1, ge=0.0, le=1.0)  # judgements without a verdict a check tolerates
    # resamples of prompts for the ratings' 95% CIs
    bootstrap_samples: int = Field(1000, gt=0)
    k_factor: float = Field(4.0, gt=0.0)  # online Elo, shown beside Bradley-Terry
    qualification: QualificationSpec = QualificationSpec()  # a judge below it has no ratings (verdicts kept)


class SafetySpec(Strict):
    """Who judges the answers of HELM Safety's scenarios (judging/safety.py). XSTest's refusal string match
    (offline) always judges; each judge model (a registered model, through any backend: GPT-4o through the OpenAI
    backend as in HELM, or a local model) judges with HELM's judge prompts. Every judge is first measured against
    people on each scenario's own kind of answers (the judging set <kind>_labelled_answers: XSTest's human labels
    here), each answering model's (`agreement_items` of each, seeded; 0: all): a judge that was not measured on a
    scenario's kind, or agrees too little (min_kappa), never enters its safety number."""

    # registered models that judge with HELM's judge prompts (the refusal string match always judges)
    judges: tuple[str, ...] = ()
    max_tokens: int = Field(256, gt=0)  # of a judge's reasoning and score (HELM's)
    # the labelled answers of each answering model (of each kind) each judge is measured on (seeded; 0: all)
    agreement_items: int = Field(0, ge=0)
    # the seed of that sample
    seed: int = 0
    # a judge enters safety numbers only with at least this Cohen's kappa against people (0.4: "moderate"
    # agreement, Landis & Koch 1977; the string match measures 0.85 on all 450 answers); below it, it is shown
    # with its measurement and its judgements are kept, but it scores nothing
    min_kappa: float = Field(0.4, gt=0.0, le=1.0)  # above 0: a judge whose every judgement failed measures 0
    # the string match enters the safety score too (true); false: judges only, as HELM rates (it is still measured
    # and shown, and gives refusal and over_refusal)
    classifier: bool = True


class MeanScoreSpec(Strict):
    """A suite's own headline: the mean over its scenarios of their main score in one family (HELM Capabilities'
    mean score, HELM Safety's mean safety score), per model with a bootstrap CI (results/suite_score.py)."""

    title: str  # the headline's name ("Mean score")
    family: Literal["accuracy", "safety"]  # whose main scores are averaged


class SuiteSpec(Strict):
    """A suite version (assets/suites/<version>.yaml): what is evaluated, how much of it, and how."""

    version: str  # the suite version: the file's name without .yaml
    description: str = ""  # what the suite is for, shown with its leaderboard
    max_failure_rate: float = Field(0.0, ge=0.0, le=1.0)  # failed requests a completions check tolerates
    # the registry sensor evaluates every model on a suite version when it appears (and a new model on the newest);
    # false: not on its own, only when asked (a suite hours long per model, such as a leaderboard at its own size);
    # partitions someone evaluated still re-run when stale (the rerun_stale schedule)
    automatic: bool = True
    conventions: Literal[CONVENTIONS] = "helm"  # type: ignore[valid-type]  # helm: HELM's draws and readings; helm_draws: its draws (v5); legacy (v1-v4)
    regression_alpha: float = Field(0.05, gt=0.0, lt=1.0, allow_inf_nan=False)  # the regressions check's level
    # the most (USD) an evaluation of one priced model on this suite may cost: estimated from the built prompts
    # (prompt tokens and max_tokens at the model's price, cached requests excluded) before any request is sent
    max_cost: float | None = Field(None, ge=0.0)
    perturbations: PerturbationsSpec = PerturbationsSpec()  # robustness and fairness perturbations, every scenario
    toxicity: ToxicitySpec = ToxicitySpec()  # the classifier that scores generations' toxicity
    safety: SafetySpec = SafetySpec()  # who judges HELM Safety's answers
    mean_score: MeanScoreSpec | None = None  # a headline mean over the scenarios (HELM Capabilities, Safety)
    scenarios: dict[str, SuiteScenario]  # scenario name (assets/scenarios/) -> how much of it, how
    # a leaderboard's entries this catalog cannot run here (no loader, or no data offline): name -> why. The
    # leaderboard lists them as "no data (offline)" rather than leaving them out or showing a zero
    not_here: dict[str, str] = {}
    # the leaderboard's scenario order (HELM's columns), not_here entries among them; default: by name
    columns: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _known_columns(self) -> SuiteSpec:
        unknown = [c for c in self.columns if c not in self.scenarios and c not in self.not_here]
        if unknown:
            raise ValueError(f"columns names {unknown}: neither a scenario of the suite nor a not_here entry")
        if both := sorted(set(self.not_here) & set(self.scenarios)):
            raise ValueError(f"not_here names {both}, which the suite runs")
        if self.columns and (unplaced := [n for n in self.not_here if n not in self.columns]):
            raise ValueError(f"not_here entries {unplaced} are not in columns: say where they stand")
        return self

    arena: ArenaSpec | None = None  # pairwise battles between the models' answers, judged


JOINT = "multiple_choice_joint"  # the joint methods' names begin so (with chain of thought too)


def _suite_document(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A suite file's YAML; a file that `extends` another suite is that suite's document with its own keys over it,
    and its `max_eval_instances` ({default: N, <scenario>: N}) sets every entry's sample: the same suite at another
    size (HELM Lite at HELM's 1,000 per entry), under a version name of its own."""
    document = read_yaml(path)
    if not isinstance(document, dict) or "extends" not in document:
        return document
    own = copy.deepcopy(document)  # read_yaml's parse is shared: never changed in place
    base, sizes = own.pop("extends"), own.pop("max_eval_instances", None)
    base_path = path.parent / f"{base}.yaml"
    if not isinstance(base, str) or not base_path.exists() or base_path in (path, *seen):
        why = "a cycle of extends" if base_path in (path, *seen) else "not a suite file beside it"
        raise CatalogError(f"{path}: extends {base!r}: {why}")
    base_document = _suite_document(base_path, (*seen, path))
    validate(SuiteSpec, base_document, base_path)  # a mistake in the base is named in the base's file
    merged = {**copy.deepcopy(base_document), **own}
    if sizes is not None:
        scenarios = merged.get("scenarios")
        if not isinstance(scenarios, dict) or not all(isinstance(p, dict) for p in scenarios.values()):
            raise CatalogError(f"{path}: scenarios: a mapping of scenario names to their entries")
        if not isinstance(sizes, dict) or "default" not in sizes:
            raise CatalogError(f"{path}: max_eval_instances: {{default: N, <scenario>: N}}, not {sizes!r}")
        if stray := sorted(set(sizes) - {"default", *scenarios}):
            raise CatalogError(f"{path}: max_eval_instances names {stray}, which are not scenarios of this suite")
        for name, pin in scenarios.items():
            scenarios[name] = {**pin, "max_eval_instances": sizes.get(name, sizes["default"])}
    return merged


def _automatic(path: Path) -> bool:
    try:
        document = _suite_document(path)
    except CatalogError:
        return True
    return not isinstance(document, dict) or document.get("automatic", True) is not False


def _refuse_a_method_without_its_layout(
    version: str, name: str, own: str, adapter: AdapterSpec, conventions: str | None
) -> None:
    """A suite asking a multiple-choice scenario jointly under HELM's conventions, where the scenario's own method
    is another, gets the joint layout the scenario declares (HELM's instructions and Question/Answer cues, as its
    run spec for that method gives them), or this error: without one, the choices would follow the bare question
    with no cue, a prompt HELM never sends."""
    if conventions not in ("helm", "helm_draws") or adapter.method == own or not adapter.method.startswith(JOINT):
        return
    if not adapter.output_prefix.strip():
        raise CatalogError(
            f"suite {version!r}: scenario {name!r} asked with method {adapter.method}, but scenarios/{name}.yaml "
            f"declares no layout for it (its adapter has no output_prefix cue; its own method is {own}): add HELM's "
            "instructions, input_prefix and output_prefix for that method to its adapter, or keep its own method"
        )


class Catalog:
    """Suites and scenarios under one catalog directory (default: the repo's assets/)."""

    def __init__(self, root: Path | None = None, max_eval_instances: int | None = None):
        self.root = Path(root) if root else settings.catalog_dir()
        # a cap on every suite scenario's max_eval_instances (`holistic evaluate --max-eval-instances`): a HELM
        # leaderboard suite at HELM's sizes run at a scale a CPU finishes, drawn as helm-run -m draws; None: none
        if max_eval_instances is not None and max_eval_instances < 1:
            raise CatalogError(f"max_eval_instances: a positive whole number of instances, not {max_eval_instances}")
        self.max_eval_instances = max_eval_instances

    @property
    def templates_dir(self) -> Path:
        return self.root / "templates"

    def scenario_names(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "scenarios").glob("*.yaml"))

    def loadable_scenarios(self, only: Collection[str] | None = None) -> tuple[list[str], dict[str, str]]:
        """(the scenarios whose files load, {name: why not} for the others), among `only` where given: one broken
        scenario file must not block the suites that do not use it (a suite that does fails naming the file when it
        loads)."""
        names, broken = [], {}
        for name in self.scenario_names():
            if only is not None and name not in only:
                continue
            try:
                self.scenario(name)
                names.append(name)
            except CatalogError as e:
                broken[name] = str(e)
        return names, broken

    def suite_versions(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "suites").glob("*.yaml"))

    def newest_version(self) -> str:
        """The current suite version: the newest core release in suites/ (v10 after v9; suites named otherwise,
        such as capabilities-v1, are never the default), or else the newest that is `automatic`."""
        versions = self.suite_versions()
        if not versions:
            raise CatalogError(f"no suite versions in {self.root / 'suites'}")
        releases = [v for v in versions if re.fullmatch(r"v\d+", v)]
        versions = releases or [v for v in versions if v in self.automatic_versions()] or versions
        return max(versions, key=lambda v: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", v)])

    def main_metrics(self, version: str) -> dict[str, str]:
        """{scenario: its main accuracy metric} for the scenarios of a suite version (as the suite pins them: a
        language_modeling pin's is bits_per_byte)."""
        return {name: spec.main_metric for name, spec in self.resolved_scenarios(version).items()}

    def resolved_scenarios(self, version: str) -> dict[str, ScenarioSpec]:
        """{scenario: its spec as the suite version pins it} for every scenario of the version."""
        suite = self.suite(version)  # validated once, not once per scenario
        return {s: self._resolve(suite, s)[0] for s in suite.scenarios}

    def scenario(self, name: str, folder: Literal["scenarios", "judging"] = "scenarios") -> ScenarioSpec:
        """A scenario file, validated; folder "judging": a judge qualification set (judging/), read the same way."""
        path = self.root / folder / f"{name}.yaml"
        if not path.exists():
            known = ", ".join(sorted(p.stem for p in (self.root / folder).glob("*.yaml")))
            what = "scenario" if folder == "scenarios" else "judge qualification set"
            raise CatalogError(f"unknown {what} {name!r}: no {path} (known: {known})")
        spec = validate(ScenarioSpec, read_yaml(path), path)
        if spec.name != name:
            raise CatalogError(f"{path}: name {spec.name!r} does not match the file name")
        if (spec.generator is None) == (spec.source is None):
            raise CatalogError(f"{path}: give exactly one of `source` (a data file) or `generator`")
        if spec.source is not None and (spec.format is None or spec.instance is None or "test" not in spec.splits):
            raise CatalogError(f"{path}: a file-based scenario needs `format`, `instance` and `splits.test`")
        for name, fmt in FORMATS.items():
            if spec.format == name and fmt.options is not None and getattr(spec, name) is None:
                raise CatalogError(f"{path}: format {name} needs a {fmt.section_hint} section")
            if fmt.method and spec.format == name and spec.adapter.method != fmt.method:
                raise CatalogError(f"{path}: the {name} format goes with the {fmt.method} method")
        paired = [n for n, f in FORMATS.items() if f.method and f.method == spec.adapter.method]
        if paired and spec.format not in paired:
            raise CatalogError(f"{path}: the {spec.adapter.method} method needs a format of {', '.join(paired)}")
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
        """The scenario's fingerprint for Dagster's code_version: changes when its definition, its prompt template or
        (a judged safety scenario) its judge's prompts change (the suite pins the rest)."""
        spec = self.scenario(name)
        spec_file = self.root / "scenarios" / f"{name}.yaml"
        texts = [spec_file.read_text(), (self.templates_dir / spec.adapter.template_file).read_text()]
        if "safety" in spec.families:
            texts += [p.read_text() for p in sorted((self.templates_dir / "judge_safety").glob("*.txt"))]
        return sha256_json(texts)[:12]

    def automatic_versions(self) -> list[str]:
        """The suite versions the registry sensor evaluates new models on when they appear: all but those a suite
        file marks `automatic: false` (a broken file counts as automatic: its runs fail naming it)."""
        return [v for v in self.suite_versions() if _automatic(self.root / "suites" / f"{v}.yaml")]

    def suite_source(self, version: str) -> str:
        """The suite file's text, then the text of each suite it extends: what its runs are fresh against."""
        paths, path = [], self.root / "suites" / f"{version}.yaml"
        while path.exists() and path not in paths:
            paths.append(path)
            document = read_yaml(path)
            base = document.get("extends") if isinstance(document, dict) else None
            if not isinstance(base, str):
                break
            path = path.parent / f"{base}.yaml"
        return "".join(p.read_text() for p in paths)

    def suite(self, version: str) -> SuiteSpec:
        path = self.root / "suites" / f"{version}.yaml"
        if not path.exists():
            raise CatalogError(
                f"unknown suite version {version!r}: no {path} (known: {', '.join(self.suite_versions())})"
            )
        suite = validate(SuiteSpec, _suite_document(path), path)
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
        if pin.conventions is None:
            pin = pin.model_copy(update={"conventions": suite.conventions})
        cap = self.max_eval_instances
        if cap is not None and pin.max_eval_instances > cap:  # drawn as HELM draws that many (helm-run -m)
            pin = pin.model_copy(update={"max_eval_instances": cap})
        update: dict[str, Any] = {}
        adapter = spec.adapter
        if spec.helm is not None and pin.conventions != "helm":
            update["helm"] = None  # a legacy suite reads the file in its order and asks as it always did
        elif spec.helm is not None and spec.helm.adapter:  # HELM's layout, before the suite's own settings
            adapter = AdapterSpec.model_validate({**adapter.model_dump(), **spec.helm.adapter})
        update |= helm_layout(spec) if pin.conventions == "helm" else {}  # upstream's files, not a derived copy
        overrides = {
            "max_train_instances": pin.max_train_instances,
            "max_tokens": pin.max_tokens,
            "temperature": pin.temperature,
            "num_outputs": pin.num_outputs,
            "stop_sequences": pin.stop_sequences,
            "method": pin.method,
        }
        adapter = adapter.model_copy(update={k: v for k, v in overrides.items() if v is not None})
        update["adapter"] = adapter
        method = adapter_method(adapter.method)
        _refuse_a_method_without_its_layout(version, name, spec.adapter.method, adapter, pin.conventions)
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
