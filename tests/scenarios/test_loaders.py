"""Each loader on the real upstream files in ../shared/data, and on malformed copies of them."""

from __future__ import annotations

import json

import pytest

from holistic_dagster.errors import DataFormatError, DataUnavailableError
from holistic_dagster.scenarios import load_instances, sample_instances
from holistic_dagster.scenarios.spec import SuiteScenario
from holistic_dagster.scenarios.synthetic import synthetic_reasoning
from tests.conftest import write


def _by_id(instances):
    return {i.instance_id: i for i in instances}


def test_mmlu_reads_every_subject_and_split(catalog):
    spec = catalog.scenario("mmlu")
    dev_only = load_instances(spec.model_copy(update={"splits": {"train": spec.splits["train"]}}))
    assert len(dev_only) == 285  # 57 subjects x 5 dev questions (SOURCES.md)
    instances = load_instances(spec.model_copy(update={"subsets": ("abstract_algebra", "anatomy")}))
    assert sum(i.split == "test" for i in instances) == 100 + 135
    first = _by_id(instances)["abstract_algebra/train/1"]
    assert first.input == "Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field."
    assert [r.output for r in first.references] == ["0", "1", "2", "3"]
    assert [r.correct for r in first.references] == [False, True, False, False]  # answer letter B
    # quoted fields with commas are single choices
    second = _by_id(instances)["abstract_algebra/train/2"]
    assert second.references[0].output == "True, True" and second.references[1].correct  # answer B
    assert first.source.sha256 and first.source.uri.endswith("mmlu/dev/abstract_algebra_dev.csv")
    assert first.is_multiple_choice


def test_mmlu_subject_without_test_file_names_the_file(catalog, shared_data):
    spec = catalog.scenario("mmlu")
    present = {p.name.removesuffix("_test.csv") for p in (shared_data / "mmlu" / "test").glob("*.csv")}
    missing = sorted(set(spec.subsets) - present)
    assert missing, "SOURCES.md says 10 subjects have no test file here"
    with pytest.raises(DataFormatError, match=rf"{missing[0]}_test.csv: file not found"):
        load_instances(spec.model_copy(update={"subsets": (missing[0],)}))


def test_boolq(catalog):
    instances = load_instances(catalog.scenario("boolq"))
    assert len(instances) == 3270
    first = instances[0]
    assert first.instance_id == "test/1" and first.record == "line 1"
    assert first.input.endswith("\nQuestion: Does ethanol take more energy make that produces?")
    assert first.input.startswith("All biomass goes through at least some of these steps")
    assert [(r.output, r.correct) for r in first.references] == [("No", True)]


def test_gsm8k_target_is_the_solution_as_helm_writes_it(catalog):
    instances = load_instances(catalog.scenario("gsm8k"))
    # the test split, then train (HELM's few-shot pool)
    assert [sum(i.split == s for i in instances) for s in ("test", "train")] == [1319, 7473]
    # HELM 0.5.16: answer.replace("####", "The answer is").replace("\n", " ") + "." (calculator notes kept)
    assert instances[0].correct_references[0].output == (
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day. She makes 9 * 2 = $<<9*2=18>>18 every day at the "
        "farmer’s market. The answer is 18."
    )


def test_openbookqa(catalog):
    instances = _by_id(load_instances(catalog.scenario("openbookqa")))
    assert len(instances) == 500
    inst = instances["8-343"]
    assert inst.correct_references[0].output == "quit eating lunch out"
    assert len(inst.references) == 4


def test_synthetic_reasoning_is_seeded_and_needs_no_file():
    a = synthetic_reasoning(seed=3, num_train=5, num_test=5)
    b = synthetic_reasoning(seed=3, num_train=5, num_test=5)
    c = synthetic_reasoning(seed=4, num_train=5, num_test=5)
    assert a == b and a != c
    assert {i.subset for i in a} == {"pattern_match", "variable_substitution", "induction"}
    sub = next(i for i in a if i.subset == "variable_substitution")
    rule = sub.input.split("\n")[0].removeprefix("Rule: ").split()
    mapping = dict(p.split(" = ") for p in sub.input.split("\n")[1].removeprefix("Substitute: ").split(", "))
    assert sub.references[0].output == " ".join(mapping.get(t, t) for t in rule)
    assert a[0].source.uri.startswith("generator://synthetic_reasoning?seed=3")


def test_sampling_is_seeded_per_subset_and_holds_out_the_few_shot_pool(catalog):
    spec = catalog.scenario("boolq")
    instances = load_instances(spec)
    pin = SuiteScenario(max_eval_instances=7, seed=5)
    first, again = sample_instances(spec, pin, instances), sample_instances(spec, pin, instances)
    assert first == again
    test = [i for i in first if i.split == "test"]
    train = [i for i in first if i.split == "train"]
    assert len(test) == 7 and len(train) == spec.train_holdout
    assert not {i.instance_id for i in test} & {i.instance_id for i in train}
    other = sample_instances(spec, SuiteScenario(max_eval_instances=7, seed=6), instances)
    assert [i.instance_id for i in other if i.split == "test"] != [i.instance_id for i in test]


# --- malformed input: a clear error naming file, record and problem ------------------------------------
def _with_data(catalog, name, tmp_path, monkeypatch, files: dict[str, str]):
    for rel, text in files.items():
        write(tmp_path / rel, text)
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path))
    return catalog.scenario(name)


def test_csv_row_with_missing_field(catalog, tmp_path, monkeypatch):
    spec = _with_data(
        catalog,
        "mmlu",
        tmp_path,
        monkeypatch,
        {
            "mmlu/dev/anatomy_dev.csv": "q1,a,b,c,d,A\n",
            "mmlu/test/anatomy_test.csv": 'q1,a,b,c,d,A\n"q2, with comma",a,b,c,B\n',
        },
    )
    with pytest.raises(DataFormatError) as e:
        load_instances(spec.model_copy(update={"subsets": ("anatomy",)}))
    assert str(e.value) == (
        f"{tmp_path}/mmlu/test/anatomy_test.csv, record row 2: expected 6 fields "
        "(question, A, B, C, D, answer), found 5"
    )


def test_csv_answer_that_is_not_a_choice_letter(catalog, tmp_path, monkeypatch):
    spec = _with_data(
        catalog,
        "mmlu",
        tmp_path,
        monkeypatch,
        {"mmlu/dev/anatomy_dev.csv": "q1,a,b,c,d,A\n", "mmlu/test/anatomy_test.csv": "q1,a,b,c,d,E\n"},
    )
    with pytest.raises(
        DataFormatError,
        match=r"anatomy_test.csv, record row 1: answer_index .* failed: "
        r"ValueError: substring not found",
    ):
        load_instances(spec.model_copy(update={"subsets": ("anatomy",)}))


def test_jsonl_line_that_is_not_json(catalog, tmp_path, monkeypatch):
    good = json.dumps({"question": "is it", "title": "t", "answer": True, "passage": "p"})
    spec = _with_data(catalog, "boolq", tmp_path, monkeypatch, {"boolq/dev.jsonl": f"{good}\n{good}\n{{broken\n"})
    with pytest.raises(DataFormatError, match=r"boolq/dev.jsonl, record line 3: not valid JSON"):
        load_instances(spec)


def test_jsonl_record_missing_a_field(catalog, tmp_path, monkeypatch):
    record = json.dumps({"question": "is it", "title": "t", "answer": True})  # no passage
    spec = _with_data(catalog, "boolq", tmp_path, monkeypatch, {"boolq/dev.jsonl": record + "\n"})
    with pytest.raises(DataFormatError) as e:
        load_instances(spec)
    assert "boolq/dev.jsonl, record line 1: input" in str(e.value)
    assert "'passage' is undefined" in str(e.value) and "record fields: question, title, answer" in str(e.value)


def test_csv_with_header_missing_a_column(catalog, tmp_path):
    from holistic_dagster.scenarios.formats.delimited import CsvSpec, read_csv

    path = write(tmp_path / "t.csv", "Type,Question\nx,y\n")
    with pytest.raises(DataFormatError, match=r"t.csv, record header: missing column\(s\) \['Best Answer'\]"):
        list(read_csv(path, CsvSpec(header=True, columns=("Question", "Best Answer"))))


def test_duplicate_instance_ids_are_refused(catalog, tmp_path, monkeypatch):
    record = {
        "id": "same",
        "question": {"stem": "s", "choices": [{"text": "a", "label": "A"}, {"text": "b", "label": "B"}]},
        "answerKey": "A",
    }
    spec = _with_data(
        catalog,
        "openbookqa",
        tmp_path,
        monkeypatch,
        {"openbookqa/test.jsonl": json.dumps(record) + "\n" + json.dumps(record) + "\n"},
    )
    with pytest.raises(
        DataFormatError, match=r"test.jsonl, record line 2: duplicate instance id 'same' \(also line 1\)"
    ):
        sample_instances(spec, SuiteScenario(max_eval_instances=5), load_instances(spec))


def test_no_local_copy_and_offline_names_what_to_set(catalog, tmp_path, monkeypatch):
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path))
    with pytest.raises(
        DataUnavailableError,
        match=r"scenario 'gsm8k': no local copy and downloads are off; "
        r"set HOLISTIC_DATA_DIR to a folder that contains `gsm8k/`",
    ):
        load_instances(catalog.scenario("gsm8k"))


RUNAWAY = {
    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}{{ q }}": "loops over more than",
    "{{ q * 100000000 }}": "a repetition of",
    "{% for a in range(99999) %}{% for b in range(99) %}{{ q }}{% endfor %}{% endfor %}": "more than",
}


@pytest.mark.parametrize("template", list(RUNAWAY))
def test_a_runaway_instance_template_stops_naming_the_file_and_the_template(tmp_path, monkeypatch, template):
    """A scenario template with nested loops hung the datasets step with no limit."""
    from holistic_dagster.config.catalog import Catalog
    from tests.conftest import write_qa_scenario

    assets = tmp_path / "assets"
    write_qa_scenario(assets, tmp_path / "data", [{"q": "What is 2 + 2?", "a": "4"}], "Arithmetic.")
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path / "data"))
    path = assets / "scenarios" / "mini_qa.yaml"
    path.write_text(path.read_text().replace('input: "{{ q }}"', f"input: {json.dumps(template)}"))
    write(assets / "templates" / "generation.j2", "{{ input }}")  # the catalog checks that the scenario's exists
    spec = Catalog(assets).scenario("mini_qa")
    with pytest.raises(DataFormatError, match=RUNAWAY[template]) as e:
        load_instances(spec)
    assert "qa.jsonl, record line 1: input" in str(e.value) and "stopped, the template" in str(e.value)


def test_a_lone_surrogate_in_a_record_is_named_with_its_file_and_line(tmp_path, monkeypatch):
    """JSON may spell an unpaired surrogate ("\\ud800"); it is no character, and the warehouse refused the whole
    dataset at its write with an error naming no file."""
    from holistic_dagster.config.catalog import Catalog
    from tests.conftest import write_qa_scenario

    assets, data = tmp_path / "assets", tmp_path / "data"
    write_qa_scenario(assets, data, [{"q": "fine", "a": "x"}], "Surrogates.")
    (data / "mini" / "qa.jsonl").write_text('{"q": "fine", "a": "x"}\n{"q": "bad \\ud800 here", "a": "y"}\n')
    write(assets / "templates" / "generation.j2", "{{ input }}")
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(data))
    with pytest.raises(DataFormatError, match=r"qa\.jsonl, record line 2: input holds \\ud800 at position 4"):
        load_instances(Catalog(assets).scenario("mini_qa"))
