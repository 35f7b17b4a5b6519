"""Loaders for HELM Lite's and HELM Classic's scenarios whose data is not here offline (LegalBench, WMT14,
NaturalQuestions open book, MS MARCO regular), on records written in upstream's layouts and asked as HELM's run
specs ask them; and a suite's optional scenarios, skipped with their reason where their data is missing."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from holistic_dagster.adaptation.adapter import build_requests
from holistic_dagster.adaptation.examples import select_examples
from holistic_dagster.errors import DataFormatError
from holistic_dagster.scenarios.loaders import load_file_instances
from tests.adaptation.test_adaptation import WORDS
from tests.conftest import write

FIXTURES = Path(__file__).parent / "fixtures"

# two tasks of HazyResearch/legalbench's helm_prompt_settings.jsonl, as upstream writes them (one line each)
LEGALBENCH_SETTINGS = [
    {"abercrombie": [["Description", "text"]], "proa": [["Statute", "text"]]},
    {
        "abercrombie": "A mark is generic if it is the common name for the product. Label the type of mark.",
        "proa": "Does the clause specify a private right of action? Answer Yes or No.",
    },
    {"abercrombie": "answer", "proa": "answer"},
    {"abercrombie": "Type", "proa": "Answer"},
    {"abercrombie": 5, "proa": 5},
]


def write_legalbench(root, settings=LEGALBENCH_SETTINGS) -> None:
    write(root / "helm_prompt_settings.jsonl", "".join(json.dumps(line) + "\n" for line in settings))
    rows = {
        "train": [("generic", 0, 'The mark "Ivory" for a product made of elephant tusks.'),
                  ("descriptive", 1, 'The mark "Tasty" for bread.')],
        "test": [("fanciful", 0, 'The mark "Zorblax" for shoes.')],
    }  # fmt: skip
    for split, records in rows.items():
        lines = ["answer\tindex\ttext", *("\t".join(map(str, r)) for r in records)]
        write(root / "data" / "abercrombie" / f"{split}.tsv", "\n".join(lines) + "\n")


def test_legalbench_reads_a_task_with_its_helm_prompt_settings_and_asks_as_helm(catalog, tmp_path):
    write_legalbench(tmp_path)
    spec = catalog.scenario("legalbench").model_copy(update={"subsets": ("abercrombie",)})
    instances = load_file_instances(spec, tmp_path)
    assert [(i.split, i.input, i.references[0].output) for i in instances] == [
        ("test", 'Description: The mark "Zorblax" for shoes.', "fanciful"),
        ("train", 'Description: The mark "Ivory" for a product made of elephant tusks.', "generic"),  # HELM's test
        ("train", 'Description: The mark "Tasty" for bread.', "descriptive"),
    ]
    (request,) = build_requests(instances, spec.adapter, catalog.templates_dir, WORDS, seed=0)
    # HELM's generation adapter: the task's instructions, then each example "<fields>\n<noun>: <answer>"
    shots = select_examples([i for i in instances if i.split == "train"], 5, 0)
    examples = "".join(f"{s.input}\nType: {s.references[0].output}\n\n" for s in shots)
    instructions = LEGALBENCH_SETTINGS[1]["abercrombie"]
    assert request.prompt == f'{instructions}\n\n{examples}Description: The mark "Zorblax" for shoes.\nType:'
    assert (request.max_tokens, request.stop, request.num_train_instances) == (30, ("\n",), 2)


def test_legalbench_settings_without_the_task_name_the_file_and_the_line(catalog, tmp_path):
    write_legalbench(tmp_path, [{k: v for k, v in line.items() if k != "abercrombie"} for line in LEGALBENCH_SETTINGS])
    spec = catalog.scenario("legalbench").model_copy(update={"subsets": ("abercrombie",)})
    with pytest.raises(
        DataFormatError, match=r"helm_prompt_settings.jsonl, record line 1: no fields for task 'abercrombie'"
    ):
        load_file_instances(spec, tmp_path)


@pytest.mark.parametrize(
    ("line", "value", "problem"),
    [
        (0, "text", r"record line 1: fields of task 'abercrombie': expected a list of \[label, column\] pairs"),
        (0, [["Description"]], r"record line 1: fields of task 'abercrombie': expected a list of \[label, column\]"),
        (0, [], r"record line 1: fields of task 'abercrombie': expected a list"),
        (2, ["answer"], r"record line 3: label_key of task 'abercrombie': expected text"),
        (4, "five", r"record line 5: shots of task 'abercrombie': expected a count"),
    ],
)
def test_legalbench_settings_malformed_name_the_file_the_line_and_the_setting(catalog, tmp_path, line, value, problem):
    settings = [dict(s) for s in LEGALBENCH_SETTINGS]
    settings[line]["abercrombie"] = value
    write_legalbench(tmp_path, settings)
    spec = catalog.scenario("legalbench").model_copy(update={"subsets": ("abercrombie",)})
    with pytest.raises(DataFormatError, match=rf"helm_prompt_settings.jsonl, {problem}"):
        load_file_instances(spec, tmp_path)


def nq_record(n: int) -> dict:
    """A NaturalQuestions record in upstream's layout: a page's HTML (an entity, a no-break space, a table), 0 to 3
    annotators with long and short answers as byte spans, some without a short answer."""
    paras = [
        f"<P>Paragraph one of page {n}: the answer is Answer{n} &amp; Co,\u00a0founded {1900 + n}.</P>",
        f"<Table><Tr><Td>Second part, alt{n} and Other{n % 3}</Td></Tr></Table>",
    ]
    page = f"<H1>Page {n}</H1>" + "".join(paras)
    raw = page.encode("utf-8")

    def span(text: str) -> dict:
        start = raw.index(text.encode("utf-8"))
        return {"start_byte": start, "end_byte": start + len(text.encode("utf-8"))}

    annotations = []
    for a in range(n % 4):
        shorts = [] if (n + a) % 3 == 0 else [span(f"Answer{n} &amp; Co")] + ([span(f"alt{n}")] if a == 2 else [])
        annotations.append({"long_answer": span(paras[a % 2]), "short_answers": shorts, "yes_no_answer": "NONE"})
    return {
        "example_id": 1000 + n,
        "question_text": f"who founded page {n}" + ("?" if n % 5 == 0 else ""),
        "document_title": f"Page {n}",
        "document_html": page,
        "document_tokens": [{"token": "Page", "html_token": False}],
        "annotations": annotations,
    }


def write_nq_files(root) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for f in range(5):
        with gzip.open(root / f"nq-dev-0{f}.jsonl.gz", "wt", encoding="utf-8") as out:
            out.writelines(json.dumps(nq_record(n)) + "\n" for n in range(f * 9, f * 9 + 9))


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda raw: raw[: len(raw) // 2], r"nq-dev-02.jsonl.gz(, record after line \d+)?: the gzip file is cut off"),
        (lambda raw: gzip.decompress(raw), r"nq-dev-02.jsonl.gz: not a gzip file \(.*\); download it again"),
    ],
)
def test_natural_qa_a_truncated_or_non_gzip_file_is_named(catalog, tmp_path, damage, problem):
    write_nq_files(tmp_path)
    broken = tmp_path / "nq-dev-02.jsonl.gz"
    broken.write_bytes(damage(broken.read_bytes()))
    with pytest.raises(DataFormatError, match=problem):
        load_file_instances(catalog.scenario("natural_qa_openbook_longans"), tmp_path)


def test_natural_qa_open_book_reads_the_full_files_as_helms_own_code(catalog, tmp_path):
    write_nq_files(tmp_path)
    instances = load_file_instances(catalog.scenario("natural_qa_openbook_longans"), tmp_path)
    helm = json.loads((FIXTURES / "helm_nq_openbook_longans.json").read_text(encoding="utf-8"))["instances"]
    ours = {(i.split, i.input, tuple(r.output for r in i.references)) for i in instances}
    assert ours == {(h["split"], h["input"], tuple(h["references"])) for h in helm} and len(instances) == len(helm)
    assert {i.split for i in instances} == {"train", "test"} and all(r.correct for i in instances for r in i.references)
    assert any(len(i.references) > 1 for i in instances)  # an evaluated question: every distinct short answer


def test_natural_qa_closed_book_reads_the_full_files_as_helms_own_code(catalog, tmp_path):
    # under HELM's conventions: nq-dev read as the open book reads it, the question alone asked; each few-shot
    # example with the one answer HELM draws, each evaluated question with every distinct one
    write_nq_files(tmp_path)
    spec, pin = catalog.resolved_scenario("helm-lite-v1", "natural_qa_closedbook")
    assert (spec.format, spec.source.dir) == ("nq_documents", "natural_qa_full") and pin.optional
    instances = load_file_instances(spec, tmp_path)
    helm = json.loads((FIXTURES / "helm_nq_closedbook.json").read_text(encoding="utf-8"))
    assert "NaturalQAScenario(mode='closedbook')" in helm["produced_by"]
    for split in ("train", "test"):  # in HELM's order: its draws and its examples follow it
        ours = [(i.input, tuple(r.output for r in i.references)) for i in instances if i.split == split]
        assert ours == [(h["input"], tuple(h["references"])) for h in helm["instances"] if h["split"] == split]
    assert len(instances) == len(helm["instances"])
    assert all(len(i.references) == 1 for i in instances if i.split == "train")
    assert any(len(i.references) > 1 for i in instances if i.split == "test")
    (request,) = build_requests(
        [i for i in instances if i.split == "train"] + [i for i in instances if i.split == "test"][:1],
        spec.adapter,
        catalog.templates_dir,
        WORDS,
        seed=0,
    )
    # HELM's generation layout with input_noun "Question": five examples, each with its one answer
    assert request.prompt.count("Question: ") == 6 and request.prompt.endswith("Question: Who founded page 2?\nAnswer:")
    assert request.stop == ("\n",) and request.max_tokens == 300
    # the other suites keep reading NQ-open
    legacy, _ = catalog.resolved_scenario("v5", "natural_qa_closedbook")
    assert (legacy.format, legacy.source.dir) == ("jsonl", "natural_qa")


def wmt_rows(split: str) -> list[tuple[str, str]]:
    """(Czech, English) pairs of a split; train repeats some English sentences (HELM keeps the first of each)."""
    if split == "train":
        return [(f"Věta {n}.", f"Sentence {n % 23}.") for n in range(40)]
    return [(f" {split} věta {n} ", f"{split} sentence {n}") for n in range(5)]


def write_wmt_shards(root) -> None:
    """WMT14's cs-en config as the Hub stores it: train in two shards, validation and test in one each."""
    import duckdb

    (root / "cs-en").mkdir(parents=True)
    shards = {
        "train-00000-of-00002": wmt_rows("train")[:25],
        "train-00001-of-00002": wmt_rows("train")[25:],
        "validation-00000-of-00001": wmt_rows("validation"),
        "test-00000-of-00001": wmt_rows("test"),
    }
    con = duckdb.connect()
    for name, rows in shards.items():
        con.execute("CREATE OR REPLACE TABLE t (translation STRUCT(cs VARCHAR, en VARCHAR), n INT)")
        con.executemany("INSERT INTO t VALUES ({'cs': ?, 'en': ?}, ?)", [(*r, n) for n, r in enumerate(rows)])
        con.execute(
            f"COPY (SELECT translation FROM t ORDER BY n) TO '{root / 'cs-en' / name}.parquet' (FORMAT parquet)"
        )


def test_wmt14_reads_the_hubs_parquet_shards_as_helms_own_code(catalog, tmp_path):
    write_wmt_shards(tmp_path)
    spec = catalog.scenario("wmt_14").model_copy(update={"subsets": ("cs-en",)})
    instances = load_file_instances(spec, tmp_path)
    helm = json.loads((FIXTURES / "helm_wmt_14.json").read_text(encoding="utf-8"))["instances"]
    for split in ("train", "test"):  # in HELM's order: its draws and its examples follow it
        ours = [(i.input, i.references[0].output) for i in instances if i.split == split]
        assert ours == [(h["input"], h["reference"]) for h in helm if h["split"] == split], split
    assert len({i.instance_id for i in instances}) == len(instances) == 23 + 10
    (request,) = build_requests(
        [i for i in instances if i.split == "train" or i.instance_id == "cs-en/test/0"],
        spec.adapter,
        catalog.templates_dir,
        WORDS,
        seed=0,
    )
    assert request.prompt.startswith("Translate the following sentences from Czech to English.\nCzech: Věta ")
    assert request.prompt.endswith("\n\nCzech:  test věta 0 \nEnglish:") and request.stop == ("\n\n",)


def write_msmarco(root) -> None:
    """HELM's MS MARCO files: q1 ranked 4 passages (its judged one, p9, outside BM25's top 3), q2 only 2 (too few),
    q3 no judged passage (dropped), q4 its judged passage at rank 1."""
    write(root / "regular_queries.tsv", "q1\twhat is a cat\nq2\twhat is a dog\nq3\twhat is a cow\nq4\twhere is rome\n")
    write(root / "regular_qrels.tsv", "q1\t0\tp9\t1\nq2\t0\tp1\t1\nq4\t0\tp5\t1\n")
    topk = ["q1\tp1\t1", "q1\tp2\t2", "q1\tp3\t3", "q1\tp9\t4", "q2\tp1\t1", "q2\tp2\t2"]
    topk += ["q3\tp1\t1", "q3\tp2\t2", "q3\tp3\t3", "q4\tp5\t1", "q4\tp6\t2", "q4\tp7\t3"]
    write(root / "regular_topk.tsv", "\n".join(topk) + "\n")
    write(root / "documents.tsv", "".join(f"p{n}\tPassage number {n}.\n" for n in range(1, 10)))


def test_msmarco_regular_reads_helms_files_candidates_are_the_top_k_and_the_judged(catalog, tmp_path):
    write_msmarco(tmp_path)
    spec = catalog.scenario("msmarco_regular")
    spec = spec.model_copy(update={"msmarco_tsv": spec.msmarco_tsv.model_copy(update={"valid_topk": 3})})
    q1, q4 = load_file_instances(spec, tmp_path)
    assert (q1.instance_id, q1.input, q4.instance_id) == ("dev/q1", "what is a cat", "dev/q4")
    # BM25's top 3, then the judged passage it ranked 4th; grade 1 is relevant in MS MARCO's dev qrels
    assert [r.output for r in q1.references] == [f"Passage number {n}." for n in (1, 2, 3, 9)]
    assert [r.correct for r in q1.references] == [False, False, False, True]
    assert (q1.metadata["relevance"], q1.metadata["first_stage_rank"]) == ([0, 0, 0, 1], [1, 2, 3, 4])
    assert q1.metadata["relevant_from"] == 1 and q4.references[0].correct
    write(tmp_path / "documents.tsv", "p1\tPassage number 1.\n")
    with pytest.raises(
        DataFormatError, match=r"regular_queries.tsv, record line 1: passage p2 of query q1 is not in docu"
    ):
        load_file_instances(spec, tmp_path)


@pytest.mark.parametrize(
    ("documents", "problem"),
    [
        ("p1\tshort\np2\t" + "x" * 200_000 + "\n", r"documents.tsv, record line 2: field larger than field limit"),
        ('p1\tshort\np2\t"an opened quote\np3\tthird\np4\tfourth\n',
         r"documents.tsv, record line 2: a quote opened on this line is not closed on it \(the row runs to line 4\)"),
    ],
)  # fmt: skip
def test_msmarco_a_field_over_the_limit_or_an_unclosed_quote_is_blamed_on_its_file_and_line(
    catalog, tmp_path, documents, problem
):
    write_msmarco(tmp_path)
    write(tmp_path / "documents.tsv", documents)
    spec = catalog.scenario("msmarco_regular")
    spec = spec.model_copy(update={"msmarco_tsv": spec.msmarco_tsv.model_copy(update={"valid_topk": 3})})
    with pytest.raises(DataFormatError, match=problem):
        load_file_instances(spec, tmp_path)


def test_helms_bleu_against_hand_counts():
    from holistic_dagster.metrics.summarization import bleu_1, bleu_4

    # nltk's word_tokenize splits the final period: 7 tokens each; 3 of the prediction's 4 four-grams match
    assert bleu_4("The cat sat on the mat.", "A cat sat on the mat.") == pytest.approx(3 / 4)
    assert bleu_1("The cat sat on the mat.", "A cat sat on the mat.") == pytest.approx(6 / 7)
    # its one 4-gram does not match: nltk (and so HELM) gives 1e-308 rather than 0
    assert bleu_4("The cat sat on the mat.", "The cat sat.") == pytest.approx(0.0, abs=1e-300)
    # brevity penalty exp(1 - 7/5): 5 tokens against 7, every 1-gram matching
    assert bleu_1("The cat sat on the mat.", "cat sat on the mat") == pytest.approx(math.exp(1 - 7 / 5))
