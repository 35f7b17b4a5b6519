"""Seeded draws of in-context examples from a subset's training pool, as the suite's conventions say
(adaptation.spec.CONVENTIONS): `helm`, HELM 0.5.16's own draw (its adapter's sample_examples), reproduced step for
step so that the same seed picks the same examples in the same order as HELM's code; and `legacy`, this project's
draw before suite v5."""

from __future__ import annotations

import random
import re
from collections import defaultdict
from itertools import cycle

from holistic_dagster.records import Instance

_DIGITS = re.compile(r"(\d+)")


def source_order(inst: Instance) -> tuple:
    """Sort key that puts instances in the order their file's loader reads them, whatever order they were stored
    in: by file, then by record in natural order (row 2 before row 10); a record placed by HELM's own order
    ("order 3 (line 17)") by that place alone, whatever its file. For CSV and JSONL records ("row N",
    "line N") that is the file's order, which is HELM's (its scenarios read a file top to bottom); for records
    named by a path or by nested keys it is their natural order, which need not be HELM's."""
    chunks = _DIGITS.split(inst.record)  # text at even positions, numbers at odd ones: comparable chunk by chunk
    place = tuple(int(c) if k % 2 else c for k, c in enumerate(chunks))
    if inst.record.startswith("order "):  # a place in HELM's own order, over every file it reads (`helm:`, hf_rows)
        return ("", place)
    return (inst.source.uri, place)


def helm_examples(pool: list[Instance], k: int, seed: int) -> list[Instance]:
    """HELM's in-context examples (`InContextLearningAdapter.sample_examples` with sample_train), step for step on
    a generator seeded as HELM seeds the global one (random.seed(train_trial_index)): group the pool (in file
    order) by first correct answer; labels from most to least frequent, equally frequent ones (in text order)
    shuffled; then one example per label in turn, each popped from its group at a random index; when the labels
    run out, a random sample of the instances without a correct answer. Unlike HELM, which loops forever when
    the labelled instances run out before k, the round stops when every group is empty."""
    rng = random.Random(seed)
    remaining = min(len(pool), k)
    unlabeled: list[Instance] = []
    by_label: dict[str, list[Instance]] = defaultdict(list)
    for inst in sorted(pool, key=source_order):
        if inst.correct_references:
            by_label[inst.correct_references[0].output].append(inst)
        else:
            unlabeled.append(inst)
    by_count: dict[int, list[str]] = defaultdict(list)
    for label, members in sorted(by_label.items()):
        by_count[len(members)].append(label)
    labels: list[str] = []
    for count in sorted(by_count, reverse=True):
        rng.shuffle(by_count[count])
        labels.extend(by_count[count])
    examples: list[Instance] = []
    left = sum(len(m) for m in by_label.values())
    for label in cycle(labels):
        if remaining == 0 or left == 0 or not label:  # HELM stops at an empty label text too
            break
        members = by_label[label]
        if members:
            examples.append(members.pop(rng.randrange(len(members))))
            remaining, left = remaining - 1, left - 1
    return examples + rng.sample(unlabeled, min(remaining, len(unlabeled)))


def legacy_examples(pool: list[Instance], k: int, seed: int) -> list[Instance]:
    """The draw of suites before v5: group the pool by correct output, visit labels from most to least frequent
    (equally frequent ones in order of their text), and take one example per label in turn, seeded."""
    rng = random.Random(seed)
    groups: dict[str, list[Instance]] = defaultdict(list)
    for inst in sorted(pool, key=lambda i: i.instance_id):
        groups[inst.correct_references[0].output if inst.correct_references else ""].append(inst)
    for members in groups.values():
        rng.shuffle(members)
    labels = sorted(groups, key=lambda lab: (-len(groups[lab]), lab))
    chosen: list[Instance] = []
    while len(chosen) < min(k, len(pool)):
        for lab in labels:
            if groups[lab] and len(chosen) < k:
                chosen.append(groups[lab].pop())
    return chosen


def select_examples(pool: list[Instance], k: int, seed: int, method: str | None = "helm") -> list[Instance]:
    """The in-context examples for one subset's pool, drawn as the suite's sampling method says (None: HELM's)."""
    if k <= 0 or not pool:
        return []
    return legacy_examples(pool, k, seed) if method == "legacy" else helm_examples(pool, k, seed)
