"""trec_run: a first-stage retrieval run with passage text joined with TREC qrels (MS MARCO, TREC DL): one record per
query, whose candidates are the instance's references (adapter method ranking_binary)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Reference, Strict
from holistic_dagster.scenarios.formats.base import FileFormat, Records, open_text

if TYPE_CHECKING:
    from holistic_dagster.scenarios.spec import ScenarioSpec


class TrecRunSpec(Strict):
    """A first-stage retrieval run with passage text (a JSON array of {query, hits: [{qid, docid, rank, score,
    content}]}, as pyserini and rank_llm write it) joined with TREC qrels (`qid Q0 docid grade` lines)."""

    qrels: str  # file pattern, beside the run
    relevant_from: int = Field(1, ge=1)  # the lowest grade that counts as relevant (TREC DL: 2)


class TrecRun(FileFormat):
    name = "trec_run"
    options = TrecRunSpec
    section_hint = "`trec_run: {qrels: <file>}`"
    method = "ranking_binary"

    def records(self, path, spec, root, split, subset) -> Records:
        return read_trec_run(path, read_qrels(beside(path, spec.trec_run.qrels, spec, split)))

    def relevant_from(self, spec) -> int:
        return spec.trec_run.relevant_from

    def references(self, record, spec, references, metadata):
        # the candidates, in first-stage order, are the references
        hits = record["hits"]
        relevant_from = self.relevant_from(spec)
        references = tuple(Reference(str(h["content"]).strip(), h["relevance"] >= relevant_from) for h in hits)
        return references, {
            **metadata,
            "docids": [h["docid"] for h in hits],
            "relevance": [h["relevance"] for h in hits],
            "first_stage_rank": [int(h["rank"]) for h in hits],
            "relevant_from": relevant_from,  # the grade from which RR counts a passage relevant
        }


def beside(path: Path, name: str, spec: ScenarioSpec, split: str) -> Path:
    found = path.parent / name
    if not found.exists():
        raise DataFormatError(found, None, f"file not found (scenario {spec.name!r}, split {split!r})")
    return found


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """TREC relevance judgments, `qid iteration docid grade` per line: {qid: {docid: grade}}."""
    qrels: dict[str, dict[str, int]] = {}
    with open_text(path) as f:
        for n, line in enumerate(f, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 4 or not fields[3].lstrip("-").isdigit():
                raise DataFormatError(
                    path, f"line {n}", f"expected `qid iteration docid grade`, found {line.strip()!r}"
                )
            qrels.setdefault(fields[0], {})[fields[2]] = int(fields[3])
    return qrels


def read_trec_run(path: Path, qrels: dict[str, dict[str, int]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A first-stage run with passage text, as pyserini / rank_llm write it: one JSON array of {query, hits:
    [{qid, docid, rank, score, content}]}. Records {qid, query, hits} with hits in rank order, each with its
    `relevance` from the qrels (0 where unjudged), yielded as ("query N", record)."""
    try:
        with open_text(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise DataFormatError(path, f"line {e.lineno}", f"not valid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(data, list):
        raise DataFormatError(path, None, f"expected a JSON array of queries, found {type(data).__name__}")
    for n, entry in enumerate(data, start=1):
        where = f"query {n}"
        hits = entry.get("hits") if isinstance(entry, dict) else None
        if not isinstance(hits, list) or not hits or not isinstance(entry.get("query"), str):
            raise DataFormatError(path, where, "expected {query: str, hits: [non-empty list]}")
        for k, hit in enumerate(hits, start=1):
            missing = [
                key for key in ("qid", "docid", "rank", "content") if not isinstance(hit, dict) or key not in hit
            ]
            if missing:
                raise DataFormatError(path, f"{where}, hit {k}", f"missing {missing}")
        qids = {str(hit["qid"]) for hit in hits}
        if len(qids) != 1:
            raise DataFormatError(path, where, f"hits of one query carry several qids {sorted(qids)}")
        qid = qids.pop()
        judged = qrels.get(qid, {})
        ranked = sorted(hits, key=lambda hit: int(hit["rank"]))
        yield (
            where,
            {
                "qid": qid,
                "query": entry["query"],
                "hits": [
                    {**hit, "docid": str(hit["docid"]), "relevance": judged.get(str(hit["docid"]), 0)} for hit in ranked
                ],
            },
        )
