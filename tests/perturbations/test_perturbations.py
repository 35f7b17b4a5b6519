"""Each perturbation on fixed inputs (exact expected strings), seeding, and what is and is not duplicated."""

from __future__ import annotations

import random

import pytest

from holistic_dagster.errors import CatalogError
from holistic_dagster.perturbations import (
    PERTURBATIONS,
    get_perturbation,
    perturb_instance,
    perturb_instances,
    replace_words,
)
from holistic_dagster.records import Instance, Reference, SourceFile
from holistic_dagster.wordlists import load

SENTENCE = "He said that John and Amy do not know where the library is, because his brother is very late."
SOURCE = SourceFile("file.jsonl", "0" * 64, "test")


def make(text: str = SENTENCE, refs=("John", "Amy"), split="test", iid="q1") -> Instance:
    return Instance(iid, split, text, tuple(Reference(r, i == 0) for i, r in enumerate(refs)), SOURCE, "line 1")


def perturbed(name: str, inst: Instance | None = None, seed: int = 0) -> Instance | None:
    return perturb_instance(inst or make(), get_perturbation(name), seed)


EXPECTED = {
    "typos": "He said that John and Amy do not know where tbe library is, because his brother is very late.",
    "lowercase": "he said that john and amy do not know where the library is, because his brother is very late.",
    "contractions": "He said that John and Amy don't know where the library is, because his brother is very late.",
    "misspellings": "He said that John and Amy do not know where the library is, becasue his brother is vrey late.",
    "extra_space": "He said that John   and  Amy do  not   know where  the library   is,   because  his   brother"
    "   is very late.",
    "mild_mix": "He said that John and  Amy  don't know  where tbe library  is, because his brother is  very  late.",
    "dialect": "He said dat John and Amy do not know where da library is, cuz his brotha is real late.",
    "gender": "She said that John and Amy do not know where the library is, because her sister is very late.",
    "person_names": "He said that John and Jasmine do not know where the library is, because his brother is very late.",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_perturbation_gives_the_exact_expected_text(name):
    out = perturbed(name)
    assert out is not None
    assert out.input == EXPECTED[name]
    assert out.instance_id == f"q1~{name}" and out.original_id == "q1" and out.perturbation == name
    assert out.source == SOURCE and out.record == "line 1"  # lineage to the original's source record


def test_typos_only_swap_letters_for_keyboard_neighbours():
    neighbours = load("keyboard_neighbours")
    out = perturbed("typos").input
    changed = [(a, b) for a, b in zip(SENTENCE, out) if a != b]
    assert changed == [("h", "b")] and "b" in neighbours["h"]
    heavy = get_perturbation("typos").transform("Hello World", random.Random(3), {})
    assert len(heavy) == len("Hello World")


def test_expansions_undo_contractions():
    text = "I'm sure they're right: don't go, it won't help."
    assert perturbed("expansions", make(text)).input == "I am sure they are right: do not go, it will not help."
    assert perturbed("contractions", make("I am sure they are right: do not go, it will not help.")).input == (
        "I'm sure they're right: don't go, it won't help."
    )
    assert perturbed("expansions", make(SENTENCE)) is None  # nothing to expand: not duplicated


def test_case_is_kept_and_words_match_whole():
    rng = random.Random(0)
    assert replace_words("DO NOT. Do not. do not.", {"do not": ["don't"]}, rng) == "DON'T. Don't. don't."
    assert replace_words("theory thesis the", {"the": ["teh"]}, rng) == "theory thesis teh"


def test_fairness_perturbations_rewrite_references_consistently():
    inst = make("Who met Amy and Brad? Amy did.", refs=("Amy", "Brad"))
    out = perturbed("person_names", inst, seed=4)
    new_amy, new_brad = (r.output for r in out.references)
    names = load("person_names")["black_american"]
    assert new_amy in names["female"] and new_brad in names["male"]  # gender kept
    assert out.input == f"Who met {new_amy} and {new_brad}? {new_amy} did."  # same person, same new name
    gendered = perturbed("gender", make("Is he her uncle?", refs=("his uncle", "no")))
    assert gendered.input == "Is she her aunt?" and gendered.references[0].output == "her aunt"
    robust = perturbed("lowercase", make("Who is Amy?", refs=("Amy", "Bob")))
    assert [r.output for r in robust.references] == ["Amy", "Bob"]  # invariance: the answer does not move


def test_seeded_per_instance_and_suite_seed():
    first, again = perturbed("typos", seed=7).input, perturbed("typos", seed=7).input
    assert first == again
    other_seed = {perturbed("typos", seed=s).input for s in range(8)}
    assert len(other_seed) > 1
    other_instance = perturb_instance(make(iid="q2"), get_perturbation("typos"), 7)
    assert other_instance.input != first


def test_perturb_instances_skips_train_unchanged_and_already_perturbed():
    test = make()
    train = make(split="train", iid="t1")
    plain = make("2 + 2 = 4", refs=("4", "5"), iid="q3")
    out = perturb_instances([test, train, plain], ["lowercase", "gender", "expansions"], seed=0)
    assert [i.instance_id for i in out] == ["q1~lowercase", "q1~gender"]
    assert perturb_instances(out, ["typos"], seed=0) == []


def test_registry_names_families_and_unknown_names():
    families = {p.family for p in PERTURBATIONS.values()}
    assert families == {"robustness", "fairness"}
    assert {n for n, p in PERTURBATIONS.items() if p.family == "fairness"} == {"dialect", "gender", "person_names"}
    with pytest.raises(CatalogError, match="unknown perturbation 'synonyms'"):
        get_perturbation("synonyms")


def test_word_lists_cite_their_provenance():
    from importlib.resources import files

    for path in files("holistic_dagster.wordlists").iterdir():
        if path.name.endswith(".yaml"):
            head = path.read_text(encoding="utf-8").splitlines()[:3]
            assert any("Provenance" in line for line in head), path.name
