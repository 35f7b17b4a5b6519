"""A scenario's upstream records mapped to Instances by its sandboxed Jinja2 expressions (`instance:`), split by
split, each file read by its format (scenarios.formats); a split's contrast set beside its originals. A bad record is
a DataFormatError naming the file, the record and the problem."""

from __future__ import annotations

import json
import logging
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import jinja2

from holistic_dagster.adaptation.templating import TemplateLimitError, evaluate_expression, render, string_template
from holistic_dagster.errors import DataFormatError
from holistic_dagster.metrics import scorers
from holistic_dagster.records import (
    CHOICE_LABELS,
    CONTRAST_SET,
    Instance,
    Reference,
    SourceFile,
    sha256_json,
)
from holistic_dagster.scenarios.formats import file_format
from holistic_dagster.scenarios.formats.base import GZIP_ERRORS, not_gzip, not_utf8, source_file
from holistic_dagster.scenarios.spec import ScenarioSpec, read_splits, split_file

_log = logging.getLogger(__name__)


def _evaluate(
    kind: str, source: str, record: dict[str, Any], path: Path, where: str, *, template: bool, scope: dict | None = None
) -> Any:
    # fields are variables; `record` holds them all, for names that are not identifiers ("Best Answer");
    # `scenario` says which subset and split is being read
    variables = {**record, "record": record, **({"scenario": scope} if scope else {})}
    try:
        if template:
            return render(string_template(source), variables)
        return evaluate_expression(source, variables)
    except TemplateLimitError as e:
        raise DataFormatError(path, where, f"{kind} `{source}`: stopped, the template {e}") from None
    except jinja2.UndefinedError as e:
        raise DataFormatError(
            path, where, f"{kind} `{source}`: {e.message} (record fields: {', '.join(record)})"
        ) from None
    except jinja2.TemplateError as e:
        raise DataFormatError(path, where, f"{kind} `{source}` is not valid Jinja2: {e}") from None
    except Exception as e:  # an expression failing on this record's values (e.g. 'ABCD'.index('E'))
        raise DataFormatError(path, where, f"{kind} `{source}` failed: {type(e).__name__}: {e}") from None


def record_to_instance(
    spec: ScenarioSpec,
    record: dict[str, Any],
    *,
    path: Path,
    where: str,
    split: str,
    subset: str,
    source: SourceFile,
    shuffle: random.Random | None = None,
) -> Instance | None:
    """The record as an Instance (None: an empty input the scenario says to skip). `shuffle`: the split's
    generator for shuffle_choices, drawn from for every record, kept or not."""
    m = spec.instance
    assert m is not None
    scope = {"subset": subset, "split": split}
    order, choices = None, None
    if shuffle is not None:  # drawn before `keep`: a record another split keeps still takes its draw
        choices = _evaluate("choices", m.choices or "", record, path, where, template=False)
        order = list(range(len(choices))) if isinstance(choices, (list, tuple)) else []
        shuffle.shuffle(order)
    if m.keep is not None and not _evaluate("keep", m.keep, record, path, where, template=False, scope=scope):
        return None
    text = _evaluate("input", m.input, record, path, where, template=True)
    text = text.strip() if m.strip else text
    if not text.strip():
        if m.skip_empty_input:
            return None
        raise DataFormatError(path, where, "input is empty")
    references = _references(m, record, path, where, choices, order)
    metadata = {
        k: _evaluate(f"metadata.{k}", v, record, path, where, template=False, scope=scope)
        for k, v in m.metadata.items()
    }
    references, metadata = file_format(spec.format).references(record, spec, references, metadata)
    # (a place in HELM's order, "order 17 (line 5)": that place)
    number = (
        where.removeprefix("line ")
        .removeprefix("row ")
        .removeprefix("order ")
        .removeprefix("query ")
        .removeprefix("train_records ")
        .split(" (", 1)[0]
    )
    if m.id:
        instance_id = str(_evaluate("id", m.id, record, path, where, template=False, scope=scope))
    else:
        instance_id = "/".join(p for p in (subset, split, number) if p)
    for field, value in (("id", instance_id), ("input", text), *(("reference", r.output) for r in references)):
        _unicode(value, field, path, where)
    for name in spec.extra_metrics:  # what a scorer needs of the record, before any request is sent
        check = scorers()[name].validate
        if check and (problem := check(metadata)):
            raise DataFormatError(path, where, problem)
    return Instance(
        instance_id=instance_id,
        split=split,
        input=text,
        references=references,
        source=source,
        record=where,
        subset=subset,
        is_multiple_choice=m.choices is not None,
        metadata=metadata,
    )


def _references(
    m, record: dict[str, Any], path: Path, where: str, choices: Any, order: list[int] | None
) -> tuple[Reference, ...]:
    """The record's references as the instance mapping gives them: its choices (the correct one by answer_index, in
    the shuffled order when there is one), its correct answers, its one target, or none."""
    if m.choices is not None:
        if choices is None:  # (already evaluated for the shuffle)
            choices = _evaluate("choices", m.choices, record, path, where, template=False)
        # (one choice is allowed: MMLU-Pro has such a question, and HELM asks it)
        if not isinstance(choices, (list, tuple)) or not choices or not all(isinstance(c, str) for c in choices):
            raise DataFormatError(path, where, f"choices must be a non-empty list of strings, got {choices!r}")
        if len(choices) > len(CHOICE_LABELS):
            raise DataFormatError(path, where, f"{len(choices)} choices; at most {len(CHOICE_LABELS)} are supported")
        answer = _evaluate("answer_index", m.answer_index or "", record, path, where, template=False)
        if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(choices):
            raise DataFormatError(
                path, where, f"answer_index must be an integer in 0..{len(choices) - 1}, got {answer!r}"
            )
        references = tuple(Reference(str(c).strip() if m.strip else str(c), i == answer) for i, c in enumerate(choices))
        # HELM's random.shuffle(references): the same swaps for the same length
        return references if order is None else tuple(references[i] for i in order)
    if m.targets is not None:
        targets = _evaluate("targets", m.targets, record, path, where, template=False)
        if (
            isinstance(targets, str)
            or not isinstance(targets, (list, tuple))
            or not all(isinstance(t, str) for t in targets)
        ):
            raise DataFormatError(path, where, f"targets must be a list of strings, got {targets!r}")
        distinct = list(dict.fromkeys(t.strip() for t in targets if t.strip()))
        if not distinct:
            raise DataFormatError(path, where, "targets (the correct answers) are empty")
        return tuple(Reference(t, True) for t in distinct)
    if m.target is not None:
        target = _evaluate("target", m.target, record, path, where, template=True).strip()
        if not target:
            raise DataFormatError(path, where, "target (the correct answer) is empty")
        return (Reference(target, True),)
    return ()  # open-ended generation (BOLD): nothing to compare with, only bias, toxicity and efficiency apply


def _unicode(text: str, field: str, path: Path, where: str) -> None:
    """Text that can be stored: a lone surrogate (JSON's "\ud800" unpaired) is no character, and the warehouse
    refused the whole dataset at its write, naming no file."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = text[e.start : e.end].encode("unicode_escape").decode()
        problem = f"{field} holds {bad} at position {e.start}: a lone surrogate, not text"
        raise DataFormatError(path, where, problem) from None


def load_file_instances(spec: ScenarioSpec, root: Path) -> list[Instance]:
    """All instances of every subset and split, in file order (a split's contrast set after its originals)."""
    if spec.helm is not None and spec.helm.instance is not None:  # HELM's own mapping of a record
        spec = spec.model_copy(update={"instance": spec.helm.instance})
    instances: list[Instance] = []
    for subset in spec.subsets:
        instances += _train_records(spec, subset)
        for split, pattern in sorted(read_splits(spec).items(), key=lambda kv: kv[0] != "test"):
            pattern = split_file(pattern, subset)
            if split == "train" and spec.train_optional and not any(root.glob(pattern)):
                continue  # no few-shot pool here: 0-shot (the dataset's num_train says so)
            originals = _read_split(spec, root, pattern, split, subset)
            instances += [i for i in originals if i is not None]
            if split in spec.contrast:
                pattern = split_file(spec.contrast[split], subset)
                contrast = _read_split(spec, root, pattern, split, subset, helm_order=False)
                instances += _contrast_set(root / pattern, originals, contrast)
    return instances


def companion_sources(spec: ScenarioSpec, sources: list[SourceFile]) -> list[SourceFile]:
    """The files the scenario's format read beside its instances' files (FileFormat.companions), with checksums."""
    if spec.format is None:
        return []
    fmt = file_format(spec.format)
    beside = {c for s in sources if Path(s.uri).is_file() for c in fmt.companions(Path(s.uri))}
    return [source_file(spec, path) for path in sorted(beside) if path.is_file()]


def _train_records(spec: ScenarioSpec, subset: str) -> list[Instance]:
    """The few-shot pool the scenario file itself gives (`train_records`), as instances of its train split."""
    if not spec.train_records:
        return []
    text = json.dumps(spec.train_records)
    path = Path(f"{spec.name}.yaml")  # where the records are: the scenario file's train_records
    source = SourceFile(
        uri=f"scenario:{spec.name}#train_records",
        sha256=sha256_json(spec.train_records),
        revision="scenario file",
        num_bytes=len(text),
    )
    out = []
    for n, record in enumerate(spec.train_records, start=1):
        where = f"train_records {n}"
        inst = record_to_instance(spec, record, path=path, where=where, split="train", subset=subset, source=source)
        if inst is not None:
            out.append(inst)
    return out


def _read_split(
    spec: ScenarioSpec, root: Path, pattern: str, split: str, subset: str, helm_order: bool = True
) -> list[Instance | None]:
    """The instances of one split's file(s), one entry per record (None: a record the scenario skips); helm_order:
    in the order HELM's own reading gives them (`helm:`; never for a contrast file, aligned row by row)."""
    helm = spec.helm if helm_order else None
    fmt = file_format(spec.format)
    if fmt.globbed:
        paths = sorted(root.glob(pattern))
        if not paths:
            raise DataFormatError(root / pattern, None, f"no files match (scenario {spec.name!r}, split {split!r})")
        files = list(fmt.file_records(spec, root, pattern, paths))
        if helm is not None and helm.sort is not None:
            files = _helm_sorted(spec, files, split, subset)
        out = [
            record_to_instance(spec, record, path=path, where=where, split=split, subset=subset, source=source)
            for path, where, record, source in files
        ]
        moved = helm.evaluated_from_train if helm is not None and split == "train" else None
        return _evaluated_from_train(moved, root, out) if moved else out
    path = root / pattern
    if not path.exists():
        raise DataFormatError(path, None, f"file not found (scenario {spec.name!r}, split {split!r})")
    source = source_file(spec, path)
    out: list[Instance | None] = []
    seed = spec.instance.shuffle_choices if spec.instance else None
    shuffle = random.Random(seed) if seed is not None else None
    try:
        records = [(where, record, split) for where, record in fmt.records(path, spec, root, split, subset)]
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    except GZIP_ERRORS as e:
        raise not_gzip(path, None, e) from None
    reorders = helm is not None and (helm.keep or helm.shuffle_seed is not None or helm.test_size is not None)
    if reorders and split == "test" and records:
        records = _as_helm_reads(spec, records, path, subset)
    for where, record, split_ in records:
        out.append(
            record_to_instance(
                spec, record, path=path, where=where, split=split_, subset=subset, source=source, shuffle=shuffle
            )
        )
    if not out:  # an empty (e.g. truncated) download must not become an empty dataset
        raise DataFormatError(path, None, f"no records: the file is empty (scenario {spec.name!r}, split {split!r})")
    return out


def _evaluated_from_train(moved, root: Path, instances: list[Instance | None]) -> list[Instance | None]:
    """The train instances whose text the files list, moved to the test split (`helm.evaluated_from_train`). Without
    those files nothing moves, and a warning says so."""
    texts: set[str] = set()
    for name in moved.files:
        path = root / name
        if not path.exists():
            _log.warning("%s is not here: the train records HELM also evaluates are not known, none is moved", path)
            return instances
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()[1:], start=2):
            fields = line.strip().split("\t")
            if len(fields) <= moved.column:
                raise DataFormatError(path, f"line {n}", f"no column {moved.column} (tab-separated)")
            texts.add(fields[moved.column])
    return [replace(i, split="test") if i is not None and i.input in texts else i for i in instances]


def _helm_sorted(spec: ScenarioSpec, files: list, split: str, subset: str) -> list:
    """A globbed split's files in HELM's order (`helm.sort`, a key per record), each placed `order <s>-<n> (<file>)`:
    HELM lists the train split (s = 0) before the others (s = 1)."""
    scope = {"subset": subset, "split": split}
    keyed = [
        (_evaluate("helm.sort", spec.helm.sort, record, path, where, template=False, scope=scope), n)
        for n, (path, where, record, _) in enumerate(files)
    ]
    order = [n for _, n in sorted(keyed)]
    section = 0 if split == "train" else 1
    return [
        (files[n][0], f"order {section}-{k + 1} ({files[n][1]})", files[n][2], files[n][3]) for k, n in enumerate(order)
    ]


def _as_helm_reads(spec: ScenarioSpec, records: list, path: Path, subset: str) -> list:
    """The file's records as HELM's scenario class reads them (`helm:`): those it keeps, shuffled with Python's
    random.seed(seed), the last test_size of them test and the others train. A record's place becomes
    `order <n> (line <k>)`: its place in that order (which the draw follows) and where it is in the file."""
    helm = spec.helm
    if helm.keep is not None:
        scope = {"subset": subset, "split": "test"}
        records = [
            r for r in records if _evaluate("helm.keep", helm.keep, r[1], path, r[0], template=False, scope=scope)
        ]
    if helm.shuffle_seed is not None:
        random.Random(helm.shuffle_seed).shuffle(records)  # random.seed(s); random.shuffle(...), as HELM
    first_test = len(records) - helm.test_size if helm.test_size is not None else 0
    return [
        (f"order {n + 1} ({where})", record, "test" if n >= first_test else "train")
        for n, (where, record, _) in enumerate(records)
    ]


def _contrast_set(path: Path, originals: list[Instance | None], contrast: list[Instance | None]) -> list[Instance]:
    """Record k of the contrast file is the minimally edited copy of record k of the split's file (HELM's contrast
    sets): an instance of the robustness perturbation `contrast_set`, linked to its original, with its own label."""
    if len(contrast) != len(originals):
        raise DataFormatError(
            path, None, f"{len(contrast)} records, but the originals it edits have {len(originals)}: they must align"
        )
    return [
        replace(
            edited,
            instance_id=f"{original.instance_id}~{CONTRAST_SET}",
            perturbation=CONTRAST_SET,
            original_id=original.instance_id,
        )
        for original, edited in zip(originals, contrast)
        if original is not None and edited is not None
    ]
