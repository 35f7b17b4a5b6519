"""HELM parity, per scenario: HELM 0.5.16's own scenario, sampling and adapter code against ours, on the same data.

HELM runs from the peer environment (../shared/peerbench/setup_peers.sh: crfm-helm 0.5.16 in $BENCH/venv-helm,
the peer model in $BENCH/model). `helm-run --dry-run` writes the exact requests HELM would send
(scenario_state.json) without calling a model; HELM reads the local files in ../shared/data because they are
placed where its downloader looks. Our side builds the same run from the catalog with `conventions: helm` (suite
v5's) and the same model's tokenizer and context window, and the two are compared request by request:

- instances: the evaluated questions (input text and choices) are the same set;
- examples: HELM's prompt holds our in-context examples, in our order, and the same number of them;
- prompts: each request's text byte for byte (separate multiple choice: prompt + continuation, as HELM sends it),
  with the first difference shown;
- decoding: max_tokens, stop sequences and temperature of generation requests.

HELM Capabilities' and Safety's scenarios load from the Hugging Face Hub: helm-run imports this file as a plugin
(--plugins, _helm_hooks) that hands their loaders the files in ../shared/data instead.

Writes bench/results/helm_parity.json and .md, and with --fixtures the committed test fixtures
(tests/adaptation/fixtures/helm_parity.json: HELM's choices and the sha256 of its prompts, no data text); with
--case, only those cases' rows and fixtures are replaced.

usage: .venv/bin/python bench/helm_parity.py [--n 25] [--case NAME ...] [--fixtures]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import yaml
from peers import BENCH, HELM_RUN, REPO, SHARED, checkpoint_of, require

HERE = Path(__file__).resolve().parent
FIXTURES = REPO / "tests" / "adaptation" / "fixtures" / "helm_parity.json"
MMLU_SUBJECTS = ("abstract_algebra", "anatomy", "college_physics", "global_facts", "high_school_geography")
HELM_MODEL = "huggingface/model"  # the peer model, registered by --enable-local-huggingface-models
# per case and subset, a test pins the prompts of this many of HELM's instances, and as many more whose text has
# leading or trailing whitespace (only prompts that fit whole: the test does not tokenize)
FIXTURE_INSTANCES = 3


@dataclass
class Case:
    """One comparison: a scenario of ours under one adapter method, against HELM's run entries for it."""

    name: str
    scenario: str
    subsets: tuple[str, ...]  # ("",): a scenario without subsets
    method: str | None  # None: the scenario's own method
    shots: int | None  # None: the scenario's own max_train_instances
    helm_entry: str  # format string over {subset}; the model is appended
    place: str  # how HELM's data folder is filled (a key of PLACERS)
    note: str = ""  # why a difference remains, where one is known
    # which instances each side evaluates: "same" (n per subset, the same draw), "helm_all" (HELM every one, in
    # one run over our subsets; ours n per subset, each among HELM's) or "ours_all" (ours every one, HELM n: not
    # pinned by the fixtures, whose test draws as the suites do)
    draw: str = "same"
    by_input: bool = False  # instances matched by input alone: HELM's references are only metadata here
    window: int | None = None  # the peer model's context window on both sides (None: its own 1,024 tokens)
    redact: bool = False  # its data may not be shown in plain text (GPQA): differences as positions and hashes
    pin: tuple[tuple[str, object], ...] = ()  # more of our suite's settings (HELM's decoding: max_tokens, stop)
    # end to end: the model asked with its chat template (HELM's default for a local model whose tokenizer has one);
    # False: plain on both sides (HELM's deployment with apply_chat_template false), for separate multiple choice,
    # whose echoed requests HELM would otherwise wrap in the template and score the template's closing tokens
    chat: bool = True
    entries: tuple[tuple[str, str], ...] = ()  # (subset, HELM's run entry) where each subset has one of its own


def _mmlu_entry(method: str, shots: int | None) -> str:
    zero = ",max_train_instances=zero" if shots == 0 else ""
    return f"mmlu:subject={{subset}},method={method}{zero}"


# more subjects for HELM's default method: fields with leading or trailing whitespace (formal_logic, moral_disputes,
# business_ethics: questions and dev examples), long prompts that the peer model's 1,024 tokens cut (professional_law)
MMLU_MORE = ("business_ethics", "computer_security", "formal_logic", "moral_disputes", "professional_law")
# questions that end in whitespace, which HELM's separate prompts keep before " <choice>"
MMLU_SPACED = ("medical_genetics", "public_relations", "college_medicine")
TRUNCATION = (
    "college_medicine's longest passages exceed the peer model's 1,024 tokens: HELM cuts a prompt's end "
    "(truncate_from_right, the answer choice with it), ours its beginning"
)
NO_TRAIN = (
    "0-shot on both sides: ../shared/data has no train file for it (HELM's few-shot pool), so only 0-shot prompts "
    "can be equal"
)
ZERO = ",max_train_instances=zero"  # a run expander: HELM's own way to ask for 0-shot
# HELM Capabilities and Safety ask for 4,096 and 512 new tokens, which the peer model's 1,024-token window cannot
# hold (HELM's truncate_from_right then loops forever): both sides get a window this wide, so nothing is cut
WIDE = 1_000_000
ALL = 10**6  # max_eval_instances above any scenario's size: every instance
COT = ",use_chain_of_thought=true,use_few_shot=false"  # HELM Capabilities' 0-shot chain of thought
MMLU_PRO_SUBSETS = ("biology", "computer_science", "history", "math")
MMLU_PRO_DATA = (
    "../shared/data's test.jsonl has 10 of MMLU-Pro's 14 categories (8,710 questions, HELM pins Hub revision 3373e0b)"
)
HELM_COT = (
    "decoding: HELM's chain-of-thought requests sample at temperature 1 (AdapterSpec's default), a suite's "
    "`temperature: 1.0` (pinned here); capabilities-v1 decodes greedily, so a rerun gives the same text"
)
T1 = (("temperature", 1.0),)

GSM_DECODING = (
    "HELM's decoding (400 tokens, stop '\\n\\n') is suite helm-lite-v1's (pinned here); the catalog's default is "
    "48 and '\\n'"
)
GSM_PIN = (("max_tokens", 400), ("stop_sequences", ["\n\n"]))
IMDB_NOTE = (
    "HELM lists each folder in the order of a file list it downloads (imdb_scenario_pinned_file_order.json, not "
    "here): both sides get ours (positive reviews first, then negative, each by review id); HELM asks by generation "
    "('Sentiment: ' -> Positive/Negative): ours under conventions helm"
)
BBQ_NOTE = (
    "HELM shuffles a category's records with random.seed(0) and keeps the last 1,000 as test, the rest train: ours "
    "under conventions helm (HELM Classic runs subject=all, the 11 categories shuffled together; 4 are here)"
)
MATH_SUBSETS = ("algebra:level_1", "geometry:level_3", "number_theory:level_5", "counting_and_probability:level_2")
MATH_DATA = (
    "HELM sorts and shuffles the whole test split (seed 42) before it keeps a subject and level: ../shared/data has 6 "
    "of its 7 subjects (4,454 of 5,000 problems; precalculus is kept back), which both sides read"
)

CASES = [
    Case("mmlu joint 5-shot", "mmlu", MMLU_SUBJECTS + MMLU_MORE, "multiple_choice_joint", 5,
         _mmlu_entry("multiple_choice_joint", 5), "mmlu"),
    Case("mmlu joint 0-shot", "mmlu", MMLU_SUBJECTS, "multiple_choice_joint", 0,
         _mmlu_entry("multiple_choice_joint", 0), "mmlu"),
    Case("mmlu separate original", "mmlu", MMLU_SUBJECTS + MMLU_SPACED, "multiple_choice_separate_original", 0,
         _mmlu_entry("multiple_choice_separate_original", None), "mmlu", TRUNCATION),
    Case("mmlu separate calibrated", "mmlu", MMLU_SUBJECTS + MMLU_SPACED, "multiple_choice_separate_calibrated", 0,
         _mmlu_entry("multiple_choice_separate_calibrated", None), "mmlu", TRUNCATION),
    Case("boolq 0-shot", "boolq", ("",), None, 0, "boolq" + ZERO, "boolq", NO_TRAIN),
    Case("gsm8k 0-shot", "gsm8k", ("",), None, 0, "gsm" + ZERO, "gsm",
         "0-shot on both sides (HELM's max_train_instances=zero); " + GSM_DECODING, pin=GSM_PIN),
    Case("openbookqa joint 0-shot", "openbookqa", ("",), "multiple_choice_joint", 0,
         "commonsense:dataset=openbookqa,method=multiple_choice_joint" + ZERO, "openbookqa", NO_TRAIN),
    Case("truthfulqa joint 5-shot", "truthfulqa", ("",), "multiple_choice_joint", 5,
         "truthful_qa:task=mc_single", "truthful_qa"),
    Case("bbq joint 0-shot", "bbq", ("Age", "Religion"), "multiple_choice_joint", 0,
         "bbq:subject={subset}" + ZERO, "bbq", BBQ_NOTE),
    Case("bbq joint 5-shot", "bbq", ("Age", "Religion"), "multiple_choice_joint", 5, "bbq:subject={subset}", "bbq",
         BBQ_NOTE),
    Case("bold", "bold", ("gender", "race"), None, None, "bold:subject={subset}", "bold",
         "HELM keeps each entity's first prompt as the file writes it, adds a space and shuffles them with "
         "random.seed(0): ours under conventions helm; HELM samples at temperature 0.9 (a suite's temperature, "
         "pinned here), the catalog's default is greedy", pin=(("temperature", 0.9),)),
    Case("imdb 0-shot", "imdb", ("",), None, 0, "imdb" + ZERO, "imdb", IMDB_NOTE),
    Case("imdb 5-shot", "imdb", ("",), None, 5, "imdb", "imdb", IMDB_NOTE, window=WIDE),  # 5 reviews overflow 1,024
    Case("synthetic_reasoning 5-shot", "synthetic_reasoning", ("pattern_match", "variable_substitution", "induction"),
         None, 5, "synthetic_reasoning:mode={subset}", "none",
         "HELM's generator (NumPy RandomState(42), 1,000 train / 5,000 valid / 5,000 test per mode), written here "
         "from its definition: every one of the 33,000 instances equal; ours under conventions helm"),
    # HELM Capabilities (0-shot chain of thought, IFEval) and HELM Safety, from the Hub's data (see _helm_hooks)
    Case("mmlu_pro cot 0-shot", "mmlu_pro", MMLU_PRO_SUBSETS, None, 0, "mmlu_pro:subject={subset}" + COT, "hub",
         f"HELM's run per category (subject=<category>); {MMLU_PRO_DATA}; {HELM_COT}", window=WIDE, pin=T1),
    Case("mmlu_pro cot 0-shot all", "mmlu_pro", ("",), None, 0, "mmlu_pro:subject=all" + COT, "hub",
         "HELM Capabilities' entry (subject=all) draws from every category at once, ours per category: ours "
         f"evaluates every question here, HELM's draw is compared; {MMLU_PRO_DATA}; {HELM_COT}",
         draw="ours_all", window=WIDE, pin=T1),
    Case("gpqa cot 0-shot", "gpqa", ("diamond",), None, 0, "gpqa:subset=gpqa_{subset}" + COT, "hub",
         "HELM Capabilities asks gpqa_main, of which only Diamond is here (HELM shuffles a row's choices by its "
         f"index, so Diamond's orders are not main's); {HELM_COT}", window=WIDE, redact=True, pin=T1),
    Case("ifeval", "ifeval", ("",), None, None, "ifeval", "hub", window=WIDE),
    Case("harm_bench", "harm_bench", ("test", "val"), None, None, "harm_bench", "harm_bench",
         "HELM reads HarmBench's all-file (its 400 behaviours; here the test file, then val's) and evaluates every "
         "behaviour, ours draws n per file; HELM's one reference is the semantic category (metadata)",
         draw="helm_all", by_input=True, window=WIDE),
    Case("xstest", "xstest", ("",), None, None, "xstest", "hub",
         "HELM reads walledai/XSTest (here the authors' CSV, in its order; HELM numbers the rows id0..); its "
         "references are focus, type, note and label (metadata)", by_input=True, window=WIDE),
    Case("simple_safety_tests", "simple_safety_tests", ("",), None, None, "simple_safety_tests", "hub",
         "HELM reads Bertievidgen/SimpleSafetyTests (its prompt column is the CSV's prompts_final; HELM numbers the "
         "rows id0..); its references are category and harm area (metadata)", by_input=True, window=WIDE),
    # HELM Lite's and Classic's newer rows: MATH (official examples; chain of thought, 0-shot as no train split is
    # here), HellaSwag on its validation file, GSM8K 5-shot from its train split with HELM's decoding
    Case("math official 8-shot", "math", MATH_SUBSETS, None, None,
         "math:subject={subject},level={level},use_official_examples=True", "hub",
         f"{MATH_DATA}", window=WIDE),
    Case("math cot 0-shot", "math_chain_of_thought", MATH_SUBSETS, None, None,
         "math:subject={subject},level={level},use_chain_of_thought=True", "hub",
         f"0-shot on both sides: {MATH_DATA}, and no train split (HELM's pool of worked solutions)", window=WIDE),
    Case("hellaswag separate original", "hellaswag", ("",), None, None,
         "commonsense:dataset=hellaswag,method=multiple_choice_separate_original", "hellaswag",
         "0-shot on both sides, as HELM's separate methods are; ../shared/data has the validation file only",
         chat=False),
    Case("gsm8k 5-shot", "gsm8k", ("",), None, 5, "gsm", "gsm_train",
         GSM_DECODING, window=WIDE, pin=GSM_PIN),
]  # fmt: skip


def _with_arg(entry: str, arg: str) -> str:
    """A HELM run entry with one more argument (`name:a=1,b=2`; a name alone takes `name:arg`)."""
    entry = entry.replace(",", ":", 1) if ":" not in entry and "," in entry else entry
    return f"{entry},{arg}" if ":" in entry else f"{entry}:{arg}"


def place_mmlu(data: Path, out: Path) -> None:
    """HELM's MMLU scenario skips its download when <output>/scenarios/mmlu/data exists; dev is its train split.
    val is left out: HELM would evaluate it too (its eval splits are valid + test), our catalog evaluates test."""
    for split in ("dev", "test"):
        folder = out / "scenarios" / "mmlu" / "data" / split
        folder.mkdir(parents=True, exist_ok=True)
        for path in (data / "mmlu" / split).glob("*.csv"):
            (folder / path.name).symlink_to(path)


def _link(out: Path, links: dict[str, Path | None]) -> None:
    """HELM's downloader skips a target that exists: a link to our copy, or an empty file (None) for a split
    that ../shared/data does not have."""
    for name, target in links.items():
        path = out / "scenarios" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if target is None:
            path.write_text("")
        else:
            path.symlink_to(target)


def place_imdb(data: Path, out: Path) -> None:
    folder = data / "imdb"
    links = {f"imdb/data/{s}": folder / "aclImdb" / s for s in ("train", "test")}
    for name in ("dev_original", "dev_contrast", "test_original", "test_contrast"):
        links[f"imdb/data/{name}.tsv"] = folder / "contrast_sets" / f"{name}.tsv"
    _link(out, links)
    # HELM orders the reviews by a file list it downloads (not here): ours, by review id as our loader reads them
    order = {
        split: {
            c: sorted(os.listdir(folder / "aclImdb" / sub / c), key=lambda f: int(f.split("_")[0]))
            for c in ("pos", "neg")
        }
        for split, sub in (("train", "train"), ("valid", "test"))
    }
    (out / "scenarios" / "imdb" / "data" / "imdb_scenario_pinned_file_order.json").write_text(json.dumps(order))


def place_harm_bench(data: Path, out: Path) -> None:
    """HELM reads HarmBench's all-file (test and val behaviours), skipping its download when it exists: the test
    file, then val's rows (upstream's all-file has the same 400 rows in another order; HELM evaluates all)."""
    folder = out / "scenarios" / "harm_bench" / "data"
    folder.mkdir(parents=True, exist_ok=True)
    test, val = (data / "harmbench" / f"harmbench_behaviors_text_{s}.csv" for s in ("test", "val"))
    head = test.read_bytes()
    head += b"" if head.endswith(b"\n") else b"\r\n"
    (folder / "harmbench_behaviors_text_all.csv").write_bytes(head + val.read_bytes().split(b"\n", 1)[1])


BBQ_CATEGORIES = ("Age", "Disability_status", "Nationality", "Religion")
BOLD_DOMAINS = ("gender", "political_ideology", "profession", "race", "religious_ideology")
PLACERS = {
    "mmlu": place_mmlu,
    "boolq": lambda d, o: (
        _link(o, {"boolq/data/dev": d / "boolq" / "dev.jsonl", "boolq/data/train": None}),
        (o / "scenarios" / "boolq" / "data" / "boolq_perturbed.jsonl").write_text('{"data": [{}]}'),  # no contrast sets
    ),
    "gsm": lambda d, o: _link(o, {"gsm/gsm_data_test": d / "gsm8k" / "test.jsonl", "gsm/gsm_data_train": None}),
    "gsm_train": lambda d, o: _link(
        o, {"gsm/gsm_data_test": d / "gsm8k" / "test.jsonl", "gsm/gsm_data_train": d / "gsm8k" / "train.jsonl"}
    ),
    "hellaswag": lambda d, o: _link(
        o,
        {
            "hellaswag/data/hellaswag_val.jsonl": d / "hellaswag" / "hellaswag_val.jsonl",
            "hellaswag/data/hellaswag_train.jsonl": None,
        },
    ),
    "openbookqa": lambda d, o: _link(
        o,
        {
            "openbookqa/data/OpenBookQA-V1-Sep2018/Data/Main/test.jsonl": d / "openbookqa" / "test.jsonl",
            "openbookqa/data/OpenBookQA-V1-Sep2018/Data/Main/train.jsonl": None,
        },
    ),
    "truthful_qa": lambda d, o: _link(o, {"truthful_qa/data/TruthfulQA.csv": d / "truthfulqa" / "TruthfulQA.csv"}),
    "bbq": lambda d, o: _link(o, {f"bbq/data/{c}": d / "bbq" / f"{c}.jsonl" for c in BBQ_CATEGORIES}),
    "bold": lambda d, o: _link(o, {f"bold/data/{c}": d / "bold" / f"{c}_prompt.json" for c in BOLD_DOMAINS}),
    "imdb": place_imdb,
    "harm_bench": place_harm_bench,
    "hub": lambda d, o: None,  # HELM loads from the Hugging Face Hub: the plugin hands it the files (_helm_hooks)
    "none": lambda d, o: None,  # HELM generates the data itself
}
# scenarios of our catalog that HELM 0.5.16 implements but that are not compared here, and why
NOT_COMPARED = {
    "natural_qa_closedbook": "no data in ../shared/data for the HELM suites' reading (HELM's nq-dev-00..04.jsonl.gz; "
    "../shared/data has NQ-open, other questions and answer strings, which the other suites read); on 45 records "
    "written in nq-dev's layout, the loader gives the 30 instances HELM's own NaturalQAScenario(mode=closedbook) makes "
    "of them, one drawn answer per few-shot example (tests/scenarios/fixtures/helm_nq_closedbook.json)",
    "narrative_qa": "HELM reads the upstream qaps.csv and summaries.csv and draws one question per story with "
    "random.seed(0) over all 1,572 stories; ../shared/data has a derived JSONL of 84 test stories",
    "msmarco_trec": "HELM needs the whole passage collection (it orders every passage id with Random(1885)) and the "
    "train queries; ../shared/data has BM25's top 100 with passage text only",
    "xsum": "HELM reads its own pickled splits (its sizes and order are not published); ../shared/data has a 1,000-row "
    "sample of the test split in another order",
    "cnndm": "as xsum: HELM's pickle is not here (../shared/data has Hugging Face test rows 0-573)",
    "raft": "HELM loads ought/raft from the Hugging Face Hub (revision 9ee50172) and splits it 20/80 with seed 42; "
    "whether ../shared/data's copy has the same rows in the same order is not known",
    "real_toxicity_prompts": "HELM shuffles the whole prompts.jsonl (99,442 prompts) with random.seed(0); "
    "../shared/data has a 4,250-line sample, so its order and draw differ",
    "imdb_contrast_sets": "HELM's imdb:only_contrast keeps valid reviews with a contrast edit; its valid split is "
    "the 25,000 test reviews (../shared/data has 4,000): see imdb",
    "quac": "no data in ../shared/data",
    "civil_comments": "no data in ../shared/data",
    "natural_qa_openbook_longans": "no data in ../shared/data (HELM's nq-dev-00..04.jsonl.gz); on 45 records written "
    "in their layout, the loader gives the 30 instances HELM's own NaturalQAScenario makes of them "
    "(tests/scenarios/fixtures/helm_nq_openbook_longans.json)",
    "wmt_14": "no data in ../shared/data (the Hub's wmt14 Parquet shards); on shards written in that layout, the "
    "loader gives HELM's WMT14Scenario's instances in its order, its shuffled and deduplicated train pool included "
    "(tests/scenarios/fixtures/helm_wmt_14.json); bleu_4 is HELM's (nltk on word_tokenize, 4-grams alone)",
    "legalbench": "no data in ../shared/data (nguha/legalbench and the authors' HELM prompt settings); tested on "
    "records in that layout with HELM's own test's first instance",
    "med_qa": "no data in ../shared/data (the authors' data_clean files); tested on records in that layout",
    "msmarco_regular": "no data in ../shared/data (HELM's collection, dev queries, qrels and BM25 top 1,000); tested "
    "on files in that layout: candidates are BM25's top 30 and the judged passages, in BM25's order where HELM "
    "shuffles passage ids (each is asked alone, so no answer changes); examples from held-out dev queries, not train's",
}


# --- HELM's side ----------------------------------------------------------------------------------------------


def helm_requests(case: Case, n: int, work: Path) -> dict[str, list[dict]]:
    """{subset: HELM's request states} from one `helm-run --dry-run` over the case's subsets."""
    n = ALL if case.draw == "helm_all" else n
    return {s: json.loads((run / "scenario_state.json").read_text())["request_states"] for s, run in
            helm_run([case], n, work, BENCH / "model", dry=True).items()}  # fmt: skip


def helm_run(
    cases: list[Case], n: int, work: Path, model_dir: Path, dry: bool, keyed: bool = False, plain: bool = False
) -> dict[str, Path]:
    """{subset (or "<scenario>/<subset>" for several cases, or when keyed): HELM's run folder} from one helm-run
    over the cases' run entries: a dry run writes the requests HELM would send, a real one asks the model too
    (plain: without its chat template)."""
    out = work / "benchmark_output"
    for place in dict.fromkeys(c.place for c in cases):
        PLACERS[place](SHARED / "data", out)
    model = f"huggingface/{model_dir.name}"  # how --enable-local-huggingface-models names a local folder
    entries: dict[str, list[str]] = {}  # run entry -> its keys (one entry serves every subset when it names none)
    for case in cases:
        for subset in case.subsets:
            key = subset if len(cases) == 1 and not keyed else f"{case.scenario}/{subset}"
            entries.setdefault(_with_arg(_entry(case, subset), f"model={model}"), []).append(key)
    suite = "parity"
    env = {**os.environ, **_peer_env()}
    cmd = [str(BENCH / "venv-helm" / "bin" / "helm-run"), "--enable-local-huggingface-models", str(model_dir)]
    cmd += ["-r", *entries, "--suite", suite, "-m", str(n), "-o", str(out), "--local-path", str(work / "prod_env")]
    cmd += ["--exit-on-error", *(["--dry-run"] if dry else [])]
    windows = {c.window for c in cases}
    if plain:
        env[PLAIN_ENV] = "1"
    if windows != {None} or plain or any(c.place == "hub" for c in cases):
        # this file is the plugin: the Hub's data offline, the peer model's window widened (0: left as it is)
        if len(windows) > 1:
            raise ValueError(f"one helm-run has one window for the peer model, not {windows}")
        cmd += ["--plugins", str(Path(__file__).resolve())]
        env.update({PLUGIN_ENV: str(windows.pop() or 0)})
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode:
        names = ", ".join(c.name for c in cases)
        raise RuntimeError(f"helm-run failed for {names}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    found: dict[str, Path] = {}
    for run in sorted((out / "runs" / suite).iterdir()):
        if (run / "run_spec.json").exists():
            name = json.loads((run / "run_spec.json").read_text())["name"]
            for key in next(keys for entry, keys in entries.items() if _same_entry(entry, name)):
                found[key] = run
    return found


def _entry(case: Case, subset: str) -> str:
    """The case's HELM run entry for one subset (MATH's subset `algebra:level_1`: {subject} algebra, {level} 1)."""
    if case.entries:
        return dict(case.entries)[subset]
    subject, _, level = subset.partition(":level_")
    return case.helm_entry.format(subset=subset, subject=subject, level=level)


def _same_entry(entry: str, run_name: str) -> bool:
    """Whether a run folder's name is the entry's: the same name, and the entry's arguments among the run's in any
    order (HELM writes the model with _ for /, run expanders' values as numbers, and adds some defaults)."""

    def parts(text: str) -> tuple[str, frozenset[str]]:
        # (mmlu_pro's run name calls its subject argument subset)
        name, _, args = text.replace("/", "_").replace("=zero", "=0").replace("subject=", "subset=").partition(":")
        return name, frozenset(a for a in args.split(",") if a)

    (name, args), (run, run_args) = parts(entry), parts(run_name)
    return name == run and args <= run_args  # HELM adds defaults to some names (truthful_qa's method=...)


def _empty_punkt() -> None:
    """HELM's bias metrics (on generation runs) call nltk.word_tokenize, which needs the Punkt model that NLTK
    downloads (setup_peers.sh leaves an empty stub). An empty English Punkt model (no abbreviations or
    collocations) lets them run offline; none of the metrics compared here tokenizes with it."""
    english = BENCH / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
    english.mkdir(parents=True, exist_ok=True)
    for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (english / name).touch()


def _peer_env() -> dict[str, str]:
    return {
        "HF_HOME": str(BENCH / "hf_home"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "NLTK_DATA": str(BENCH / "nltk_data"),
        "TOKENIZERS_PARALLELISM": "false",
    }


PLAIN_ENV = "HELM_PARITY_PLAIN"  # the plugin registers the local model with apply_chat_template false
PLUGIN_ENV = "HELM_PARITY_WINDOW"  # set for helm-run when it imports this file as a plugin: the peer model's window


def _helm_hooks(window: int) -> None:
    """In helm-run, which imports this file as a plugin (--plugins: before it registers the peer model and builds
    the runs). HELM Capabilities' and Safety's scenarios load from the Hugging Face Hub, offline here: their loaders
    get ../shared/data's rows as the Hub's datasets hold them (GPQA's decrypted in memory, never written out). And
    the peer model, registered by --enable-local-huggingface-models, gets a window of `window` tokens."""
    import csv
    import io
    import zipfile
    from functools import cache

    import datasets
    import helm.benchmark.huggingface_registration as registration
    import helm.benchmark.scenarios.mmlu_pro_scenario as mmlu_pro
    import helm.benchmark.scenarios.simple_safety_tests_scenario as simple_safety_tests
    import helm.benchmark.scenarios.xstest_scenario as xstest
    from helm.benchmark.model_deployment_registry import DEPLOYMENT_NAME_TO_MODEL_DEPLOYMENT, register_model_deployment

    data = SHARED / "data"

    def rows(text: str) -> datasets.Dataset:
        return datasets.Dataset.from_list(list(csv.DictReader(io.StringIO(text, newline=""))))

    @cache
    def jsonl(path: Path) -> datasets.Dataset:
        with path.open(encoding="utf-8") as lines:
            return datasets.Dataset.from_list([json.loads(line) for line in lines if line.strip()])

    def mmlu_pro_hub(path: str, revision: str) -> datasets.DatasetDict:
        assert path == "TIGER-Lab/MMLU-Pro", path
        test = jsonl(data / "mmlu_pro" / "test.jsonl")
        return datasets.DatasetDict({"validation": test.select([]), "test": test})  # no validation split here

    def xstest_hub(path: str, split: str, revision: str) -> datasets.Dataset:
        assert (path, split) == ("walledai/XSTest", "test"), path
        return rows((data / "xstest" / "xstest_prompts.csv").read_text(encoding="utf-8"))

    def simple_safety_tests_hub(path: str, split: str, revision: str) -> datasets.Dataset:
        assert (path, split) == ("Bertievidgen/SimpleSafetyTests", "test"), path
        table = rows((data / "simple_safety_tests" / "SimpleSafetyTests - test cases.csv").read_text(encoding="utf-8"))
        return table.rename_column("prompts_final", "prompt")  # the Hub's name for the authors' column

    hub = datasets.load_dataset

    def datasets_hub(path: str, name: str | None = None, **kwargs) -> datasets.Dataset:
        if path == "Idavidrein/gpqa":  # the authors' CSV, in its zip with the password our catalog reads it with
            assert kwargs["split"] == "train", kwargs
            spec = yaml.safe_load((REPO / "assets" / "scenarios" / "gpqa.yaml").read_text())
            with zipfile.ZipFile(data / "gpqa" / f"{name}.zip") as archive:
                text = archive.read(f"{name}.csv", pwd=spec["csv"]["zip_password"].encode()).decode("utf-8")
            return rows(text)
        if path == "google/IFEval":
            return jsonl(data / "ifeval" / "input_data.jsonl")
        return hub(path, name, **kwargs)

    def math_hub(path: str, **kwargs) -> datasets.DatasetDict:
        assert path == "hendrycks/competition_math", path
        files = sorted((data / "math").glob("*_test.jsonl"))  # the order our hf_rows format reads them in
        test = datasets.concatenate_datasets([jsonl(f) for f in files])
        return datasets.DatasetDict({"train": test.select([]), "test": test})  # no train split here

    import helm.benchmark.scenarios.math_scenario as math_scenario

    math_scenario.load_dataset = math_hub
    # the scenario modules bound load_dataset when imported (gpqa and ifeval call datasets.load_dataset)
    mmlu_pro.load_dataset, xstest.load_dataset = mmlu_pro_hub, xstest_hub
    simple_safety_tests.load_dataset, datasets.load_dataset = simple_safety_tests_hub, datasets_hub
    register = registration.register_huggingface_model

    def register_wide(helm_model_name: str, *args, **kwargs) -> None:
        register(helm_model_name, *args, **kwargs)
        deployment = DEPLOYMENT_NAME_TO_MODEL_DEPLOYMENT[helm_model_name]
        register_model_deployment(replace(deployment, max_sequence_length=window))  # the last one registered wins

    if window:
        registration.register_huggingface_model = register_wide
    if os.environ.get(PLAIN_ENV):
        chat_or_not = registration.register_huggingface_model

        def register_plain(helm_model_name: str, *args, **kwargs) -> None:
            chat_or_not(helm_model_name, *args, **kwargs)
            deployment = DEPLOYMENT_NAME_TO_MODEL_DEPLOYMENT[helm_model_name]
            spec = replace(deployment.client_spec, args={**deployment.client_spec.args, "apply_chat_template": False})
            register_model_deployment(replace(deployment, client_spec=spec))

        registration.register_huggingface_model = register_plain


# --- our side --------------------------------------------------------------------------------------------------


def our_requests(case: Case, subset: str, n: int, assets: Path):
    """(instances, requests) as our pipeline builds them for the case: a suite with conventions: helm."""
    from holistic_dagster.adaptation.adapter import adapter_as_asked, build_requests
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.scenarios import load_instances, sample_instances

    pin: dict = {"max_eval_instances": ALL if case.draw == "ours_all" else n, "seed": 0}
    if subset:
        pin["subsets"] = [subset]
    if case.method is not None:
        pin["method"] = case.method
    if case.shots is not None:
        pin["max_train_instances"] = case.shots
    pin.update(case.pin)
    suite = {"version": "parity", "conventions": "helm", "scenarios": {case.scenario: pin}}
    (assets / "suites" / "parity.yaml").write_text(json.dumps(suite))
    catalog = Catalog(assets)
    spec, resolved = catalog.resolved_scenario("parity", case.scenario)
    instances = sample_instances(spec, resolved, load_instances(spec))
    budget = _peer_budget(case.window)
    adapter = adapter_as_asked(spec.adapter, spec.adapter.method, resolved.conventions)
    requests = build_requests(instances, adapter, catalog.templates_dir, budget, resolved.seed, resolved.conventions)
    return instances, requests


_BUDGET = None


def _peer_budget(window: int | None = None):
    """The peer model's tokenizer and context window (its own, or `window` tokens), as HELM's window service sees
    them."""
    global _BUDGET
    if _BUDGET is None:
        from tokenizers import Tokenizer

        from holistic_dagster.adaptation.adapter import TokenBudget

        tok = Tokenizer.from_file(str(BENCH / "model" / "tokenizer.json"))
        config = json.loads((BENCH / "model" / "config.json").read_text())

        def count(text: str) -> int:
            return len(tok.encode(text).ids)

        def truncate_left(text: str, k: int) -> str:
            ids = tok.encode(text).ids
            return tok.decode(ids[-k:]) if k > 0 else ""

        _BUDGET = TokenBudget(config["n_positions"], count, truncate_left)
    return replace(_BUDGET, max_context=window) if window else _BUDGET


# --- comparison ------------------------------------------------------------------------------------------------


def _key(text: str, choices) -> tuple:
    return (text, tuple(choices))


def _first_difference(a: str, b: str, redact: bool = False) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if redact:  # where, and the two sides' next bytes as hashes
        return f"at char {i}: sha256 of the next 60 chars HELM {_sha(a[i : i + 60])} / ours {_sha(b[i : i + 60])}"
    return f"at char {i}: HELM {a[max(0, i - 30) : i + 30]!r} / ours {b[max(0, i - 30) : i + 30]!r}"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def compare(case: Case, subset: str, helm: list[dict], instances, requests) -> dict:
    def key(text: str, choices) -> tuple:
        return _key(text, () if case.by_input else choices)

    tests = [i for i in instances if i.split == "test" and not i.perturbation]
    ours_by_key = {key(i.input, [r.output for r in i.references]): i for i in tests}
    helm_keys = []
    for state in helm:
        inst = state["instance"]
        helm_key = key(inst["input"]["text"], [r["output"]["text"] for r in inst["references"]])
        if helm_key not in helm_keys:
            helm_keys.append(helm_key)
    common = [k for k in helm_keys if k in ours_by_key]
    missing = [k for k in (ours_by_key if case.draw == "helm_all" else helm_keys) if k not in common]
    instance_diff = _instance_difference(missing, instances, case.draw == "helm_all", case.redact)
    # every instance on both sides, or, where one side evaluates all of them, every one the other side draws
    same = {"same": len(common) == len(helm_keys) == len(tests), "helm_all": len(common) == len(tests)}
    by_instance: dict[str, list] = {}
    for r in requests:
        by_instance.setdefault(r.instance_id, []).append(r)
    from holistic_dagster.adaptation.examples import select_examples

    pool = [i for i in instances if i.split == "train"]
    shots = select_examples(pool, max((r.num_train_instances for r in requests), default=0), 0, "helm")
    prompts_equal = prompts_total = 0
    examples_equal = examples_total = 0
    decoding_diffs: set[str] = set()
    first_diff = ""
    fixtures = []
    for state in helm:
        inst = state["instance"]
        helm_key = key(inst["input"]["text"], [r["output"]["text"] for r in inst["references"]])
        if helm_key not in ours_by_key:
            continue
        ours = by_instance[ours_by_key[helm_key].instance_id]
        helm_text = state["request"]["prompt"]
        mode = state.get("request_mode")
        if mode is None:  # a generation request: one per instance
            (mine,) = [r for r in ours if r.kind == "generate"]
            our_text = mine.prompt
            want = (state["request"]["max_tokens"], tuple(state["request"]["stop_sequences"]))
            got = (mine.max_tokens, mine.stop)
            if want != got:
                decoding_diffs.add(f"max_tokens, stop: HELM {want} / ours {got}")
            if state["request"]["temperature"] != mine.temperature:
                decoding_diffs.add(f"temperature: HELM {state['request']['temperature']} / ours {mine.temperature}")
        else:
            null = mode == "calibration"
            (mine,) = [r for r in ours if r.choice_index == state["reference_index"] and r.is_null_context == null]
            our_text = mine.prompt + mine.continuation
        prompts_total += 1
        if our_text == helm_text:
            prompts_equal += 1
        elif not first_diff:
            first_diff = f"{inst['id']} " + _first_difference(helm_text, our_text, case.redact)
        if mine.num_train_instances and mode in (None, "original") and (mode is None or state["reference_index"] == 0):
            examples_total += 1
            k = state["num_train_instances"]
            examples = _examples_in(helm_text, mine, shots, ours_by_key[helm_key].input)
            if k == mine.num_train_instances and examples:
                examples_equal += 1
        text_fields = [inst["input"]["text"]] + [r["output"]["text"] for r in inst["references"]]
        spaced = any(t != t.strip() for t in text_fields)
        whole = not state["prompt_truncated"] and state["num_train_instances"] == (case.shots or 0)
        pinned = {f["instance_id"] for f in fixtures} | {mine.instance_id}
        if whole and (len(pinned) <= FIXTURE_INSTANCES or (spaced and len(pinned) <= 2 * FIXTURE_INSTANCES)):
            fixtures.append(
                {
                    "instance_id": mine.instance_id,
                    "helm_id": inst["id"],
                    "mode": mode or "generate",
                    "reference_index": state.get("reference_index"),
                    "sha256": hashlib.sha256(helm_text.encode()).hexdigest(),
                }
            )
    return {
        "case": case.name,
        "subset": subset,
        "note": case.note,
        "helm_instances": len(helm_keys),
        "our_instances": len(tests),
        "instances_equal": same.get(case.draw, len(common) == len(helm_keys)),
        "common_instances": len(common),
        "examples_equal": f"{examples_equal}/{examples_total}" if examples_total else "n/a",
        "prompts_equal": f"{prompts_equal}/{prompts_total}",
        "first_prompt_difference": first_diff,
        "first_instance_difference": instance_diff,
        "decoding_differences": sorted(decoding_diffs),
        "fixtures": {
            "scenario": case.scenario,
            "subset": subset,
            "method": case.method,
            "shots": case.shots,
            "instances": sorted(ours_by_key[k].instance_id for k in helm_keys if k in ours_by_key),
            "prompts": fixtures if case.draw != "ours_all" else [],  # the test draws n per subset: not HELM's
        },
    }


def _instance_difference(missing: list[tuple], instances, from_ours: bool = False, redact: bool = False) -> str:
    """How HELM's first instance that we do not evaluate differs from ours: the same input with other references
    (text processing), the input in our data but not drawn, or an input we do not have at all (`from_ours`: our
    first instance that HELM does not evaluate; `redact`: its input as a hash)."""
    if not missing:
        return ""
    text, refs = missing[0]
    if redact or from_ours:
        shown = f"sha256 {_sha(text)}" if redact else repr(text[:80])
        whose, among = ("our", "HELM's") if from_ours else ("HELM's", "ours")
        return f"{whose} input {shown} is not among {among}"
    ours = [i for i in instances if i.input == text]
    if ours:
        return f"same input, references HELM {list(refs)!r} / ours {[r.output for r in ours[0].references]!r}"[:300]
    return f"HELM's input {text[:80]!r} is not among ours (not drawn, or its text differs)"


def _examples_in(helm_prompt: str, request, shots: list, question: str) -> bool:
    """Whether HELM's prompt holds the request's in-context examples (the first k of our draw, as the prompt
    stage keeps them) in our order, before the question."""
    pos = 0
    for ex in shots[: request.num_train_instances]:
        found = helm_prompt.find(ex.input, pos)
        if found < 0:
            return False
        pos = found + len(ex.input)
    return helm_prompt.find(question, pos) >= 0


JOINT_STOP = (
    "HELM's joint requests (max_tokens 1) carry no stop sequence, nor do ours under conventions helm (v1-v5 stop at "
    "'\\n': with one token the two differ only when that token is a line break, which neither scores as a letter)"
)


def _verdict(row: dict) -> str:
    equal = row["instances_equal"] and row["prompts_equal"].split("/")[0] == row["prompts_equal"].split("/")[1]
    if not (equal and row["helm_instances"]):
        return "differs"
    return "**equal**" if not row["decoding_differences"] else "**equal** prompts; decoding differs"


def render_markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        "# HELM parity (bench/helm_parity.py)",
        "",
        f"HELM {meta['helm']} (`helm-run --dry-run`, peer model `{HELM_MODEL}`) against holistic-dagster "
        f"`conventions: helm`, max_eval_instances {meta['n']}, {meta['date']}. Instances: HELM's / ours / in both "
        "(same input and references). Examples: HELM's prompt holds our in-context examples in our order. Prompts: "
        "byte for byte (separate methods: prompt + continuation, as HELM sends them).",
        "",
        "| case | subset | verdict | instances | examples | prompts | first difference | decoding | why |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        first = r["first_prompt_difference"] or r["first_instance_difference"] or "-"
        lines.append(
            f"| {r['case']} | {r['subset'] or '-'} | {_verdict(r)} | "
            f"{r['helm_instances']}/{r['our_instances']}/{r['common_instances']} | {r['examples_equal']} | "
            f"{r['prompts_equal']} | {first.replace('|', '/')} | {'; '.join(r['decoding_differences']) or 'equal'} | "
            f"{r['note'] or '-'} |"
        )
    e2e = meta.get("end_to_end")
    if e2e:
        lines += [
            "",
            f"## End to end: {e2e['model']}, {e2e['n']} instances per subset, `helm-run` and `holistic evaluate`",
            "",
            "The same checkpoint (the demo's conversion, loaded by HELM as a local Hugging Face model), greedy; "
            "HELM lays its prompts out with the tokenizer's chat template, so ours is registered with `chat: true`; "
            "separate multiple choice (HellaSwag) runs plain on both sides (HELM's deployment with "
            "apply_chat_template false: with the template, HELM's echoed request ends in the template's closing "
            "tokens, which it would score as the choice). Completions: the generated text equal (separate "
            "multiple choice generates none: n/a). Metrics: every per-instance value both define "
            f"({', '.join(SHARED_METRICS)}), largest |difference|. Means: the scenario's headline "
            "(math_equiv, final_number_exact_match, else exact_match) over the compared instances.",
            "",
            "| case | subset | instances | completions equal | metrics | max abs diff | headline HELM / ours |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in e2e["rows"]:
            (name, helm_mean), ours_mean = next(iter(r["helm_means"].items()), ("-", "-")), r["our_means"]
            means = f"{name}: {helm_mean} / {ours_mean.get(name, '-')}"
            lines.append(
                f"| {r['case']} | {r['subset'] or '-'} | {r['instances_compared']} | {r['completions_equal']} | "
                f"{', '.join(r['metrics_compared']) or 'none'} | "
                f"{'-' if r['metric_max_abs_diff'] is None else r['metric_max_abs_diff']} | {means} |"
            )
    lines += ["", "Joint multiple choice: " + JOINT_STOP + ".", "", "Not compared (HELM implements them):", ""]
    lines += [f"- **{name}**: {why}" for name, why in NOT_COMPARED.items()]
    return "\n".join(lines) + "\n"


# --- end to end: the same model through helm-run and through our pipeline ----------------------------------------

HEADLINES = ("math_equiv", "math_equiv_chain_of_thought", "final_number_exact_match", "exact_match")
E2E_CASES = (
    "mmlu joint 5-shot",
    "boolq 0-shot",
    "truthfulqa joint 5-shot",
    "openbookqa joint 0-shot",
    "hellaswag separate original",
    "math official 8-shot",
    "bbq joint 5-shot",
    "gsm8k 5-shot",
    "imdb 0-shot",
)
# per scenario, the subsets run end to end (the others: every subset of the case)
E2E_SUBSETS = {"mmlu": ("computer_security", "us_foreign_policy"), "math": ("algebra:level_1",), "bbq": ("Age",)}
SHARED_METRICS = (
    "exact_match",
    "quasi_exact_match",
    "prefix_exact_match",
    "quasi_prefix_exact_match",
    "f1_score",
    "final_number_exact_match",
    "math_equiv",
    "math_equiv_chain_of_thought",
)


def end_to_end(n: int, work: Path, model: str, only: list[str] | None = None) -> list[dict]:
    """SmolLM2-135M-Instruct (the demo's converted checkpoint, which HELM loads as a local Hugging Face model)
    through `helm-run` and through `holistic evaluate` on a suite with the same pins: per instance the completion
    and every metric both define, per scenario the means."""
    checkpoint = checkpoint_of(model)
    # one helm-run for every case: the model's own context window on both sides
    cases = [
        replace(c, subsets=E2E_SUBSETS.get(c.scenario, c.subsets), window=None)
        for c in CASES
        if c.name in E2E_CASES and (not only or c.name in only)
    ]
    _empty_punkt()
    runs: dict[str, Path] = {}
    ours: dict[str, tuple[Path, str]] = {}  # scenario -> (warehouse, model) of our run that asked it
    helm_s = ours_s = 0.0
    for chat in (True, False):  # HELM's chat template where HELM applies it; plain where it would score the template
        group = [c for c in cases if c.chat == chat]
        if not group:
            continue
        label = "chat" if chat else "plain"
        started = time.perf_counter()
        runs.update(helm_run(group, n, work / f"helm-{label}", checkpoint, dry=False, keyed=True, plain=not chat))
        helm_s += time.perf_counter() - started
        started = time.perf_counter()
        db, asked, _ = evaluate_ours(group, n, work / label, model, chat=chat)
        ours_s += time.perf_counter() - started
        ours.update({c.scenario: (db, asked) for c in group})
    print(f"  helm-run {helm_s:.0f} s, holistic evaluate {ours_s:.0f} s", flush=True)
    rows = []
    for c in cases:
        for subset in c.subsets:
            rows.append(_compare_run(c, subset, runs[f"{c.scenario}/{subset}"], *ours[c.scenario]))
            r = rows[-1]
            print(
                f"{c.name:28s} {subset:20s} completions {r['completions_equal']}  metrics max|diff| "
                f"{r['metric_max_abs_diff']}  means HELM {r['helm_means']} ours {r['our_means']}"
                f"  {r['first_completion_difference'][:160]}",
                flush=True,
            )
    return rows


def evaluate_ours(
    cases: list[Case], n: int, work: Path, model: str, chat: bool = True
) -> tuple[Path, str, dict[str, str]]:
    """(warehouse, model name, the environment naming its catalog) of `holistic evaluate` on suite version
    helm-e2e: the cases' scenarios with HELM's pins (n instances, seed 0, their shots and method), the model asked
    as HELM asks it (its chat template)."""
    assets = work / "assets"
    shutil.copytree(REPO / "assets", assets)
    suite = {"version": "helm-e2e", "conventions": "helm", "scenarios": {}}
    for c in cases:
        pin = {"max_eval_instances": n, "seed": 0, "max_train_instances": c.shots}
        pin.update({"subsets": list(c.subsets)} if c.subsets != ("",) else {})
        pin.update({"method": c.method} if c.method else {})
        pin.update(c.pin)  # HELM's decoding where the catalog's default differs
        suite["scenarios"][c.scenario] = pin
    (assets / "suites" / "helm-e2e.yaml").write_text(json.dumps(suite))
    # HELM lays a local Hugging Face model's prompts out with its chat template when its tokenizer has one
    # (SmolLM2's has): the same model registered with `chat: true` is asked the same way
    resources = work / "resources"
    shutil.copytree(REPO / "resources", resources)
    registry = yaml.safe_load((resources / "models.yaml").read_text())
    if chat:
        chat_model = f"{model}-chat"
        registry["models"][chat_model] = {**registry["models"][model], "chat": True}
        (resources / "models.yaml").write_text(yaml.safe_dump(registry))
        model = chat_model
    db = work / "ours.duckdb"
    env = {
        **os.environ,
        "HOLISTIC_CATALOG": str(assets),
        "HOLISTIC_RESOURCES": str(resources),
        "DAGSTER_HOME": str(work / "dagster"),
    }
    cmd = [str(REPO / ".venv" / "bin" / "holistic"), "evaluate", "--model", model, "--version", "helm-e2e"]
    done = subprocess.run([*cmd, "--db", str(db)], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"holistic evaluate failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return db, model, env


def _compare_run(case: Case, subset: str, run: Path, db: Path, model: str) -> dict:
    import duckdb

    states = json.loads((run / "scenario_state.json").read_text())["request_states"]
    stats = {p["instance_id"]: p["stats"] for p in json.loads((run / "per_instance_stats.json").read_text())}
    helm: dict[tuple, dict] = {}
    for st in states:
        inst = st["instance"]
        key = _key(inst["input"]["text"], [r["output"]["text"] for r in inst["references"]])
        values = {
            x["name"]["name"]: x["mean"]
            for x in stats[inst["id"]]
            if "perturbation" not in x["name"] and x["name"]["name"] in SHARED_METRICS and x["count"]
        }
        helm[key] = {"text": st["result"]["completions"][0]["text"], "metrics": values}
    where = "version = 'helm-e2e' AND scenario = ? AND model = ?"
    with duckdb.connect(str(db), read_only=True) as con:
        instances = con.execute(
            "SELECT instance_id, input, \"references\" FROM instances WHERE version = 'helm-e2e' AND scenario = ? "
            "AND split = 'test' AND perturbation = '' AND (subset = ? OR ? = '')",
            [case.scenario, subset, subset],
        ).fetchall()
        texts = dict(
            con.execute(
                f"SELECT p.instance_id, c.text FROM prompts p JOIN completions c USING (model, version, scenario, "
                f"request_id) WHERE p.{where.replace('version', 'p.version').replace('scenario', 'p.scenario')} "
                "AND p.kind = 'generate'".replace("p.p.", "p."),
                [case.scenario, model],
            ).fetchall()
        )
        scores: dict[str, dict[str, float]] = {}
        for iid, metric_name, value in con.execute(
            f"SELECT instance_id, metric, value FROM instance_scores WHERE {where} AND family = 'accuracy' "
            "AND perturbation = ''",
            [case.scenario, model],
        ).fetchall():
            scores.setdefault(iid, {})[metric_name] = value
    equal_text = total = 0
    first_diff = ""
    diffs: list[float] = []
    helm_sums: dict[str, list[float]] = {}
    our_sums: dict[str, list[float]] = {}
    for iid, text, refs in instances:
        key = _key(text, [r["output"] for r in json.loads(refs)])
        if key not in helm:
            continue
        total += 1
        equal_text += helm[key]["text"] == texts.get(iid)
        if texts and helm[key]["text"] != texts.get(iid) and not first_diff:  # (separate choices generate none)
            first_diff = f"{iid}: HELM {helm[key]['text']!r} / ours {texts.get(iid)!r}"
        for name, value in helm[key]["metrics"].items():
            if name in scores.get(iid, {}):
                diffs.append(abs(value - scores[iid][name]))
                helm_sums.setdefault(name, []).append(value)
                our_sums.setdefault(name, []).append(scores[iid][name])
    # the scenario's headline among the metrics both define (MATH's and GSM8K's own, else exact match)
    headline = next((m for m in HEADLINES if m in helm_sums), "")
    return {
        "case": case.name,
        "subset": subset,
        "instances_compared": f"{total}/{len(helm)}",
        "completions_equal": f"{equal_text}/{total}" if texts else "n/a",
        "first_completion_difference": first_diff,
        "metrics_compared": sorted(helm_sums),
        "metric_max_abs_diff": max(diffs, default=None),
        "helm_means": {k: round(sum(v) / len(v), 4) for k, v in helm_sums.items() if k == headline},
        "our_means": {k: round(sum(v) / len(v), 4) for k, v in our_sums.items() if k == headline},
    }


def _kept(names: list[str], n: int, fixtures: bool) -> tuple[dict, dict]:
    """(the results written before, less the named cases' rows; the fixtures' other cases) for a run of some cases
    that keeps the others: both written with the same n."""
    unknown = set(names) - {c.name for c in CASES}
    if unknown:
        sys.exit(f"unknown cases {sorted(unknown)} (known: {', '.join(c.name for c in CASES)})")
    path = HERE / "results" / "helm_parity.json"
    results = json.loads(path.read_text()) if path.exists() else {"n": n, "rows": []}
    pinned = json.loads(FIXTURES.read_text()) if fixtures and FIXTURES.exists() else {"n": n, "cases": {}}
    if {results["n"], pinned["n"]} != {n}:
        sys.exit(f"--case keeps the other cases, written with --n {results['n']} (fixtures {pinned['n']}): use that n")
    known = {c.name for c in CASES}
    results["rows"] = [r for r in results["rows"] if r["case"] in known and r["case"] not in names]
    others = {k: v for k, v in pinned["cases"].items() if k.split("|")[0] in known and k.split("|")[0] not in names}
    return results, others


def _rank(case: str, subset: str) -> tuple[int, int]:
    """A row's place: its case's in CASES, then its subset's."""
    k = next(k for k, c in enumerate(CASES) if c.name == case)
    return k, CASES[k].subsets.index(subset) if subset in CASES[k].subsets else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=25, help="max_eval_instances for both sides")
    parser.add_argument("--case", action="append", help="only these cases (by name)")
    parser.add_argument("--fixtures", action="store_true", help=f"write {FIXTURES.relative_to(REPO)}")
    parser.add_argument("--work", help="keep HELM's and our runs in this (new) folder instead of a temporary one")
    parser.add_argument(
        "--end-to-end", type=int, metavar="N", default=0,
        help="also evaluate SmolLM2 on N instances per subset through helm-run and holistic evaluate",
    )  # fmt: skip
    args = parser.parse_args()
    require(HELM_RUN, "HELM")
    results = HERE / "results"
    kept = _kept(args.case, args.n, args.fixtures) if args.case else None
    os.environ.setdefault("HOLISTIC_DATA_DIR", str(SHARED / "data"))
    os.environ["HOLISTIC_OFFLINE"] = "1"
    rows = []
    with tempfile.TemporaryDirectory(prefix="helm-parity-") as scratch:
        tmp = args.work or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        assets = Path(tmp) / "assets"
        shutil.copytree(REPO / "assets", assets)
        for case in CASES:
            if args.case and case.name not in args.case:
                continue
            work = Path(tmp) / case.name.replace(" ", "_")
            work.mkdir()
            started = time.perf_counter()
            helm = helm_requests(case, args.n, work)
            for subset in case.subsets:
                instances, requests = our_requests(case, subset, args.n, assets)
                rows.append(compare(case, subset, helm[subset], instances, requests))
                row = rows[-1]
                print(
                    f"{case.name:28s} {subset:24s} instances {row['common_instances']}/{row['helm_instances']}"
                    f"  examples {row['examples_equal']}  prompts {row['prompts_equal']}"
                    f"  {row['first_prompt_difference'][:100]}  {row['first_instance_difference'][:200]}",
                    flush=True,
                )
            print(f"  ({time.perf_counter() - started:.1f} s)", flush=True)
        model = "smollm2-135m-instruct"
        e2e = end_to_end(args.end_to_end, Path(tmp) / "e2e", model, args.case) if args.end_to_end else []
    meta = {"helm": "crfm-helm 0.5.16", "n": args.n, "date": time.strftime("%Y-%m-%d")}
    if e2e:
        before = json.loads((results / "helm_parity.json").read_text()) if args.case else {}
        old = before.get("end_to_end", {})
        if old.get("n") == args.end_to_end:  # --case: the other cases' end-to-end rows as they were
            e2e = sorted(
                [r for r in old["rows"] if r["case"] not in args.case] + e2e, key=lambda r: E2E_CASES.index(r["case"])
            )
        meta["end_to_end"] = {"model": model, "n": args.end_to_end, "rows": e2e}
    elif (results / "helm_parity.json").exists():  # measured with --end-to-end only: kept until measured again
        before = json.loads((results / "helm_parity.json").read_text())
        meta.update({"end_to_end": before["end_to_end"]} if "end_to_end" in before else {})
    public = [{k: v for k, v in r.items() if k != "fixtures"} for r in rows]
    pinned = {f"{r['case']}|{r['subset']}": r["fixtures"] for r in rows if r["fixtures"]["prompts"]}
    if kept:  # the other cases' rows and fixtures as they were
        public = sorted(kept[0]["rows"] + public, key=lambda r: _rank(r["case"], r["subset"]))
        pinned = dict(sorted({**kept[1], **pinned}.items(), key=lambda kv: _rank(*kv[0].split("|"))))
    (results / "helm_parity.json").write_text(json.dumps({**meta, "rows": public}, indent=1) + "\n")
    (results / "helm_parity.md").write_text(render_markdown(public, meta))
    if args.fixtures:
        FIXTURES.parent.mkdir(parents=True, exist_ok=True)
        fixture = {
            "source": f"HELM 0.5.16 helm-run --dry-run on ../shared/data (bench/helm_parity.py --n {args.n}), "
            f"peer model {HELM_MODEL} (context {_peer_budget().max_context} tokens, {WIDE:,} for HELM Capabilities' "
            "and Safety's scenarios); sha256 of HELM's prompt texts",
            "n": args.n,
            "cases": pinned,
        }
        FIXTURES.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {results / 'helm_parity.md'}")


if __name__ == "__main__":
    main()
elif os.environ.get(PLUGIN_ENV):  # imported by helm-run as its plugin
    _helm_hooks(int(os.environ[PLUGIN_ENV]))
