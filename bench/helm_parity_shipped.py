"""HELM parity of the suites as shipped: every entry of helm-lite-v1 and helm-classic-v1 whose data is here and
that HELM reads from the same files, against the run entry HELM's leaderboard runs it with.

bench/helm_parity.py compares chosen methods and shot counts of each scenario (its CASES); this table's rows are
generated from the suite files themselves: our side is the suite's entry exactly as shipped (its method, shots,
decoding, sample size and seed, conventions helm; `catalog.resolved_scenario(suite, scenario)`), HELM's side the
leaderboard's run entry for it (bench/helm_run_specs.py's ENTRIES, from HELM's conf files), asked of the peer model
by `helm-run --dry-run` with the same sample size, compared request by request as helm_parity.py compares (the
evaluated instances, the in-context examples, each prompt byte for byte, the decoding). What the entries leave to
a run is set on HELM's side as ours runs it, and listed: the peer model in place of the conf's model group, no
data augmentation (HELM Classic's perturbations are not ours: the originals are compared), and the peer model's
context widened so that neither side cuts a prompt. Entries without data here, or whose files HELM reads
elsewhere (helm_parity.NOT_COMPARED), are listed with why.

usage: .venv/bin/python bench/helm_parity_shipped.py [--suite helm-lite-v1 ...] [--work DIR]
Writes bench/results/helm_parity_shipped.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from helm_parity import (
    CASES,
    HERE,
    NOT_COMPARED,
    WIDE,
    Case,
    _verdict,
    compare,
    helm_requests,
)
from helm_run_specs import ENTRIES
from peers import HELM_RUN, REPO, SHARED, require

SUITES = ("helm-lite-v1", "helm-classic-v1")
# how HELM's data folder is filled for a scenario: the hand-picked cases' placers (GSM8K's train split, its pool)
PLACE = {c.scenario: c.place for c in CASES} | {"gsm8k": "gsm_train", "math_chain_of_thought": "hub"}
# what a leaderboard's conf entry leaves to the run, set on HELM's side as ours runs it (listed in the table)
RUN_ARGS = re.compile(r",?(model=[a-z_]+|follow_the_format_instructions=[a-z]+|data_augmentation=canonical|"
                      r"max_eval_instances=\d+)")  # fmt: skip


def shipped_cases(suite: str) -> tuple[list[Case], dict[str, str]]:
    """(a case per scenario of the suite that can be compared here, {scenario: why not} for the others)."""
    from holistic_dagster.config.deployment import Deployment

    runnable, skipped = Deployment().runnable(suite)
    cases, left = [], {name: "no data here: " + "; ".join(why.split("; ")[:2]) for name, why in skipped.items()}
    for scenario in runnable:
        if scenario in NOT_COMPARED:
            left[scenario] = NOT_COMPARED[scenario]
            continue
        if scenario not in PLACE:
            left[scenario] = "no placer for HELM's data folder in bench/helm_parity.py"
            continue
        entries = tuple((subset, RUN_ARGS.sub("", entry).replace(":,", ":").rstrip(":"))
                        for (s, name, subset), entry in ENTRIES.items() if s == suite and name == scenario)  # fmt: skip
        subsets = tuple(s for s, _ in entries if _has_data(suite, scenario, s))
        cases.append(Case(f"{suite} {scenario}", scenario, subsets, None, None, "", PLACE[scenario],
                          window=WIDE, entries=entries))  # fmt: skip
    return cases, left


def _has_data(suite: str, scenario: str, subset: str) -> bool:
    """Whether the suite asks the subset (MATH's precalculus is kept back here)."""
    from holistic_dagster.config.catalog import Catalog

    _, pin = Catalog().resolved_scenario(suite, scenario)
    return not subset or subset in (pin.subsets or ())


def our_shipped_requests(case: Case, suite: str):
    """(instances, requests) per subset, as the shipped suite asks them (the peer model's tokenizer, its context
    widened as HELM's side is)."""
    from helm_parity import _peer_budget

    from holistic_dagster.adaptation.adapter import adapter_as_asked, build_requests
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.scenarios import load_instances, sample_instances

    catalog = Catalog()
    spec, pin = catalog.resolved_scenario(suite, case.scenario)
    instances = [i for i in sample_instances(spec, pin, load_instances(spec)) if not i.perturbation]
    adapter = adapter_as_asked(spec.adapter, spec.adapter.method, pin.conventions)
    requests = build_requests(instances, adapter, catalog.templates_dir, _peer_budget(case.window), pin.seed,
                              pin.conventions)  # fmt: skip
    subset_of = {i.instance_id: i.subset for i in instances}
    return (
        pin.max_eval_instances,
        _known_difference(spec),
        {
            subset: (
                [i for i in instances if i.subset == subset],
                [r for r in requests if subset_of[r.instance_id] == subset],
            )
            for subset in case.subsets
        },
    )


def _known_difference(spec) -> str:
    """Why the entry's prompts are known to differ from HELM's here, if they do: a few-shot pool held out of the
    evaluated file, where HELM draws from a train split that is not here (the leaderboard, the report and the
    scores' provenance name it: results.leaderboard.borrowed_pools)."""
    from holistic_dagster.scenarios.spec import read_splits

    # (a first share of the file as the pool, TruthfulQA's train_head, is HELM's own split: not borrowed)
    borrowed = "train" not in read_splits(spec) and spec.train_holdout and spec.train_head is None
    if borrowed and spec.adapter.max_train_instances:
        return (
            "labelled deviation: no train file here, so the in-context examples are held out of the test file (HELM "
            "draws them from train); the leaderboard's note, the report and the scores' provenance say so"
        )
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", choices=SUITES, help="only these suites")
    parser.add_argument("--work", help="keep HELM's runs in this (new) folder instead of a temporary one")
    args = parser.parse_args()
    require(HELM_RUN, "HELM")
    os.environ.setdefault("HOLISTIC_DATA_DIR", str(SHARED / "data"))
    os.environ["HOLISTIC_OFFLINE"] = "1"
    rows, left = [], {}
    with tempfile.TemporaryDirectory(prefix="helm-parity-shipped-") as scratch:
        tmp = Path(args.work or scratch)
        for suite in args.suite or SUITES:
            cases, left[suite] = shipped_cases(suite)
            for case in cases:
                work = tmp / case.name.replace(" ", "_")
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir(parents=True)
                started = time.perf_counter()
                n, why, ours = our_shipped_requests(case, suite)
                helm = helm_requests(case, n, work)
                for subset, (instances, requests) in ours.items():
                    row = compare(case, subset, helm[subset], instances, requests)
                    rows.append({**{k: v for k, v in row.items() if k != "fixtures"}, "suite": suite, "n": n,
                                 "helm_entry": dict(case.entries)[subset], "note": why})  # fmt: skip
                    print(f"{case.name:40s} {subset:28s} {_verdict(row)}  instances {row['common_instances']}/"
                          f"{row['helm_instances']}  prompts {row['prompts_equal']}", flush=True)  # fmt: skip
                print(f"  ({time.perf_counter() - started:.1f} s)", flush=True)
    meta = {"helm": "crfm-helm 0.5.16", "date": time.strftime("%Y-%m-%d")}
    out = HERE / "results"
    (out / "helm_parity_shipped.json").write_text(json.dumps({**meta, "rows": rows, "left": left}, indent=1) + "\n")
    (out / "helm_parity_shipped.md").write_text(render(rows, left, meta))
    print(f"wrote {out / 'helm_parity_shipped.md'}")


def render(rows: list[dict], left: dict[str, dict[str, str]], meta: dict) -> str:
    lines = [
        "# HELM parity of the shipped suites (bench/helm_parity_shipped.py)",
        "",
        f"Every entry of the suites as shipped against HELM {meta['helm']}'s run entry for it (`helm-run --dry-run`, "
        f"the same sample size), {meta['date']}: instances HELM's / ours / in both, in-context examples, prompts byte "
        "for byte, decoding. HELM's side: the peer model in place of the conf's model group, no data augmentation "
        "(the originals are compared), the context wide enough that neither side cuts a prompt.",
        "",
        "| suite | entry | subset | n | verdict | instances | examples | prompts | first difference | decoding | why |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        first = (r["first_prompt_difference"] or r["first_instance_difference"] or "-").replace("|", "/")
        lines.append(
            f"| {r['suite']} | `{r['helm_entry']}` | {r['subset'] or '-'} | {r['n']} | {_verdict(r)} | "
            f"{r['helm_instances']}/{r['our_instances']}/{r['common_instances']} | {r['examples_equal']} | "
            f"{r['prompts_equal']} | {first[:160]} | {'; '.join(r['decoding_differences']) or 'equal'} | "
            f"{r['note'] or '-'} |"
        )
    lines += ["", "Not compared here:", ""]
    for suite, why in left.items():
        lines += [f"- **{suite} {name}**: {reason}" for name, reason in why.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
