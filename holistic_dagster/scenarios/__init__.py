"""Scenarios: upstream loaders, procedural generators, and the seeded sample a suite version pins."""

from __future__ import annotations

import inspect
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from holistic_dagster.adaptation.examples import source_order
from holistic_dagster.errors import CatalogError, DataFormatError
from holistic_dagster.records import Instance
from holistic_dagster.scenarios.loaders import load_file_instances
from holistic_dagster.scenarios.sampling import helm_eval_indices
from holistic_dagster.scenarios.sources import source_dir
from holistic_dagster.scenarios.spec import ScenarioSpec, SuiteScenario
from holistic_dagster.scenarios.synthetic import GENERATORS


def load_instances(spec: ScenarioSpec, data_dirs: Sequence[Path] | None = None) -> list[Instance]:
    """Every instance the scenario's source holds (all subsets, all splits); its files are looked for in
    `data_dirs` (None: the environment's, settings.data_dirs) before the download cache."""
    generator = spec.helm.generator if spec.helm is not None and spec.helm.generator else spec.generator
    if generator is not None:
        if generator.name not in GENERATORS:
            raise CatalogError(
                f"scenario {spec.name!r}: unknown generator {generator.name!r} (known: {', '.join(GENERATORS)})"
            )
        make, params = GENERATORS[generator.name], dict(generator.params)
        if spec.subsets != ("",) and "modes" in inspect.signature(make).parameters and "modes" not in params:
            params["modes"] = tuple(spec.subsets)  # only the modes asked for: HELM's generator draws 11,000 each
        instances = make(**params)
        return [i for i in instances if i.subset in spec.subsets] if spec.subsets != ("",) else instances
    return load_file_instances(spec, source_dir(spec, data_dirs))


def sample_instances(spec: ScenarioSpec, pin: SuiteScenario, instances: list[Instance]) -> list[Instance]:
    """The suite version's sample: per subset, at most `max_eval_instances` test instances, drawn as the suite's
    sampling method says (scenarios.sampling; a pin without one draws as HELM), plus the few-shot pool (the train
    split, or `train_holdout` test records held out and never evaluated)."""
    seen: dict[str, Instance] = {}
    for inst in instances:
        if inst.instance_id in seen:
            raise DataFormatError(
                inst.source.uri,
                inst.record,
                f"duplicate instance id {inst.instance_id!r} (also {seen[inst.instance_id].record})",
            )
        seen[inst.instance_id] = inst
    by_subset: dict[str, dict[str, list[Instance]]] = defaultdict(lambda: defaultdict(list))
    edited: dict[str, list[Instance]] = defaultdict(list)  # original id -> its copies that came with the data
    for inst in instances:
        if inst.perturbation:
            edited[inst.original_id].append(inst)
        else:
            by_subset[inst.subset][inst.split].append(inst)
    chosen: list[Instance] = []
    for subset in sorted(by_subset):
        rng = random.Random(f"{pin.seed}/{spec.name}/{subset}")
        test = list(by_subset[subset]["test"])
        train = list(by_subset[subset]["train"])
        if pin.conventions == "legacy":
            train, test = _held_out(spec, rng, train, test)
            if len(test) > pin.max_eval_instances:
                keep = set(rng.sample(range(len(test)), pin.max_eval_instances))
                test = [t for k, t in enumerate(test) if k in keep]
        else:
            # HELM's draw over the subset's test instances in file order (one HELM run per subset), made before
            # any few-shot pool is held out of them, so the evaluated instances are HELM's (whose pool is a train
            # file); the pool then comes from the instances not evaluated
            test.sort(key=source_order)
            if not train and spec.train_head:
                head = int(len(test) * spec.train_head)
                train, test = [_as_train(t) for t in test[:head]], test[head:]
            keep = set(helm_eval_indices(len(test), pin.max_eval_instances, pin.seed))
            if len(keep) < len(test):
                rest = [t for k, t in enumerate(test) if k not in keep]
                train, _ = _held_out(spec, rng, train, rest)
                test = [t for k, t in enumerate(test) if k in keep]
            else:
                train, test = _held_out(spec, rng, train, test)
        chosen.extend(train)
        chosen.extend(test)
        chosen.extend(e for t in test for e in edited.get(t.instance_id, ()))
    if pin.max_candidates is not None:  # evaluated queries only: examples may come from any candidate
        chosen = [top_candidates(i, pin.max_candidates) if i.split == "test" else i for i in chosen]
    return chosen


def _held_out(spec: ScenarioSpec, rng: random.Random, train: list[Instance], test: list[Instance]):
    """(train, test): without a train split, `train_holdout` seeded test records become the few-shot pool."""
    if train or not spec.train_holdout:
        return train, test
    held = set(rng.sample(range(len(test)), min(spec.train_holdout, len(test))))
    pool = [replace(_as_train(t), metadata={**t.metadata, HELD_OUT: True}) for k, t in enumerate(test) if k in held]
    return pool, [t for k, t in enumerate(test) if k not in held]


def top_candidates(inst: Instance, k: int) -> Instance:
    """A ranking instance with its first k candidates (first-stage order; HELM's valid_topk): the references and
    the per-candidate metadata lists."""
    if len(inst.references) <= k:
        return inst
    metadata = {
        key: value[:k] if isinstance(value, list) and len(value) == len(inst.references) else value
        for key, value in inst.metadata.items()
    }
    return replace(inst, references=inst.references[:k], metadata=metadata)


HELD_OUT = "held_out"  # an instance's metadata: a few-shot example held out of the evaluated file (no train split)


def _as_train(inst: Instance) -> Instance:
    return replace(inst, split="train")
