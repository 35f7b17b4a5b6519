"""NarrativeQA in upstream's layout (qaps.csv, third_party/wikipedia/summaries.csv), read as HELM's
NarrativeQAScenario reads it under the HELM suites' conventions: the same instances HELM's own code makes of the same
files (tests/scenarios/fixtures/helm_narrative_qa.json), its mistakes named with their file and record; the
suites with other conventions keep reading the derived copy."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest

from holistic_dagster.errors import DataFormatError
from holistic_dagster.scenarios.loaders import load_file_instances

FIXTURES = Path(__file__).parent / "fixtures"
SPLITS = {"train": 4, "valid": 2, "test": 3}  # stories per split


def narrativeqa_rows() -> tuple[list[dict], list[dict]]:
    """(qaps.csv's rows, summaries.csv's rows): 1 to 4 questions per story, questions with and without their "?",
    padded with spaces, summaries with commas, quotes and line breaks, stories of one split listed apart."""
    qaps, summaries = [], []
    n = 0
    for split, stories in SPLITS.items():
        for s in range(stories):
            doc = f"{split[:2]}{s:02d}-{7 * s + len(split)}"
            summaries.append({"document_id": doc, "set": split,
                              "summary": f'  Story {doc}, told "plainly".\nIt ends in chapter {s + 2}, and so on.  ',
                              "summary_tokenized": "x"})  # fmt: skip
            for q in range(1 + (s + len(split)) % 4):
                n += 1
                question = f" Who is character {q} of {doc}" + ("?" if (n % 3) else "") + " "
                # answers as written: one padded with a space, and both the same text now and then (HELM keeps both)
                answer1 = f"Person {q}" + (" " if n % 4 == 1 else "")
                answer2 = answer1 if n % 5 == 2 else f"the {q}th, of {doc}"
                qaps.append({"document_id": doc, "set": split, "question": question, "answer1": answer1,
                             "answer2": answer2, "question_tokenized": "x", "answer1_tokenized": "x",
                             "answer2_tokenized": "x"})  # fmt: skip
    # a story's questions need not be contiguous in upstream's file, nor a split's stories: move a train question and
    # the first valid story's questions to the end, after the test stories
    qaps.append(qaps.pop(1))
    first_valid = next(r["document_id"] for r in qaps if r["set"] == "valid")
    qaps = [r for r in qaps if r["document_id"] != first_valid] + [r for r in qaps if r["document_id"] == first_valid]
    return qaps, summaries


def write_narrativeqa_files(root: Path) -> None:
    """The repository's layout: qaps.csv at its root, the summaries under third_party/wikipedia/."""
    qaps, summaries = narrativeqa_rows()
    for path, rows in ((root / "qaps.csv", qaps), (root / "third_party" / "wikipedia" / "summaries.csv", summaries)):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def helm_read(catalog):
    spec, _ = catalog.resolved_scenario("helm-lite-v1", "narrative_qa")
    return spec


def test_narrativeqa_in_upstreams_layout_reads_as_helms_own_code(catalog, tmp_path):
    write_narrativeqa_files(tmp_path)
    spec = helm_read(catalog)
    assert spec.format == "narrativeqa_csv" and spec.train_holdout == 0  # HELM's train split is the pool
    instances = load_file_instances(spec, tmp_path)
    helm = json.loads((FIXTURES / "helm_narrative_qa.json").read_text(encoding="utf-8"))
    assert "crfm-helm 0.5.16" in helm["produced_by"]
    # HELM evaluates its valid and test splits: our test split is valid's questions, then test's
    expected = [(h["split"] if h["split"] == "train" else "test", h["input"], tuple(h["references"]))
                for h in helm["instances"]]  # fmt: skip
    ours = [(i.split, i.input, tuple(r.output for r in i.references)) for i in instances]
    assert sorted(ours) == sorted(expected) and len(ours) == sum(SPLITS.values())  # one question per story
    assert [o for o in ours if o[0] == "test"] == [e for e in expected if e[0] == "test"]  # in HELM's order
    assert all(r.correct for i in instances for r in i.references)
    assert {i.split for i in instances} == {"train", "test"}


def test_the_evaluated_stories_and_the_examples_are_drawn_from_helms_order(catalog, tmp_path):
    # HELM's eval instances are valid's then test's, each story where it first appears in qaps.csv (here the first
    # valid story's rows come last in the file): its draw of 3 of the 5 picks by place in that order, as ours does
    from holistic_dagster.scenarios import sample_instances
    from holistic_dagster.scenarios.sampling import helm_eval_indices

    write_narrativeqa_files(tmp_path)
    spec, pin = helm_read(catalog), catalog.resolved_scenario("helm-lite-v1", "narrative_qa")[1]
    assert pin.max_eval_instances == 3
    drawn = sample_instances(spec, pin, load_file_instances(spec, tmp_path))
    helm = json.loads((FIXTURES / "helm_narrative_qa.json").read_text(encoding="utf-8"))["instances"]
    evaluated = [h for h in helm if h["split"] != "train"]
    chosen = {evaluated[k]["input"] for k in helm_eval_indices(len(evaluated), 3, pin.seed)}
    assert {i.input for i in drawn if i.split == "test"} == chosen
    assert [h["split"] for h in evaluated] == ["valid", "valid", "test", "test", "test"]


def test_the_other_suites_keep_reading_the_derived_copy(catalog):
    spec, _ = catalog.resolved_scenario("v5", "narrative_qa")
    assert spec.format == "jsonl" and spec.train_holdout == 10 and spec.source.dir == "narrativeqa"


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda root: (root / "third_party" / "wikipedia" / "summaries.csv").unlink(),
         r"summaries.csv: file not found: NarrativeQA's summaries, beside qaps.csv"),
        (lambda root: (root / "qaps.csv").write_text("document_id,set,question\nd,test,q\n"),
         r"qaps.csv, record 0 \(the header\): no column\(s\) answer1, answer2"),
        (lambda root: (root / "third_party" / "wikipedia" / "summaries.csv").write_text(
            "document_id,set,summary\nnothing,test,x\n"), r"qaps.csv, record \d+: story '.*' \(train\) has no summary"),
    ],
)  # fmt: skip
def test_a_broken_layout_names_the_file_and_the_record(catalog, tmp_path, damage, problem):
    write_narrativeqa_files(tmp_path)
    damage(tmp_path)
    with pytest.raises(DataFormatError, match=problem):
        load_file_instances(helm_read(catalog), tmp_path)


def test_the_summaries_are_a_source_file_of_the_dataset_and_their_change_runs_it_again(catalog, tmp_path, monkeypatch):
    """summaries.csv is read beside qaps.csv, and no instance names it as its source: it is recorded with the
    dataset's source files all the same, so that freshness sees a change to it."""
    from holistic_dagster.automation.freshness import datasets_step
    from holistic_dagster.config.deployment import Deployment
    from holistic_dagster.stages import StageContext
    from holistic_dagster.stages.dataset import build_dataset
    from holistic_dagster.warehouse import Warehouse

    write_narrativeqa_files(tmp_path / "data" / helm_read(catalog).source.dir)
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path / "data"))
    deployment, warehouse = Deployment(), Warehouse(tmp_path / "w.duckdb")
    summary = build_dataset(StageContext(warehouse, catalog, deployment), "helm-lite-v1", "narrative_qa")
    files = warehouse.df("SELECT uri, sha256 FROM source_files WHERE scenario = 'narrative_qa'")
    assert sorted(Path(u).name for u in files["uri"]) == ["qaps.csv", "summaries.csv"]
    assert len(summary["source_files"]) == 2
    summaries = tmp_path / "data" / "narrativeqa_upstream" / "third_party" / "wikipedia" / "summaries.csv"
    assert files.set_index("uri").loc[str(summaries), "sha256"] == hashlib.sha256(summaries.read_bytes()).hexdigest()

    # what freshness compares (with the fingerprint) to skip the datasets: the same until summaries.csv changes
    step = datasets_step(deployment, warehouse, catalog, "helm-lite-v1")
    assert any(key.endswith("summaries.csv") for key, *_ in step.files)
    assert datasets_step(deployment, warehouse, catalog, "helm-lite-v1").files == step.files
    summaries.write_text(summaries.read_text(encoding="utf-8").replace("plainly", "simply"), encoding="utf-8")
    assert datasets_step(deployment, warehouse, catalog, "helm-lite-v1").files != step.files
