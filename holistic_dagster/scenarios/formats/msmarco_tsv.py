"""msmarco_tsv: MS MARCO passage ranking in the tab-separated files HELM's MSMARCOScenario downloads (the queries, their
qrels, a first-stage run's top k, the passage collection): one record per query, its candidates the instance's
references, as trec_run's (adapter method ranking_binary)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Strict
from holistic_dagster.scenarios.formats.base import Records, open_text
from holistic_dagster.scenarios.formats.trec_run import TrecRun, beside, read_qrels


class MsmarcoTsvSpec(Strict):
    """The files beside a split's queries file (`qid<TAB>text`): qrels (`qid 0 docid grade`), the first stage's
    top k (`qid<TAB>docid<TAB>rank`) and the collection (`docid<TAB>text`)."""

    # the relevance judgements file
    qrels: str
    # BM25's top-k run file
    topk: str
    # the passages file
    collection: str
    # HELM's valid_topk: a query is evaluated when the first stage ranked at least this many passages for it, and its
    # candidates are those and every judged passage
    valid_topk: int = Field(30, gt=0)
    relevant_from: int = Field(1, ge=1)  # the lowest grade that counts as relevant (MS MARCO's dev qrels: 1)


class MsmarcoTsv(TrecRun):
    name = "msmarco_tsv"
    options = MsmarcoTsvSpec
    section_hint = "`msmarco_tsv: {qrels: <file>, topk: <file>, collection: <file>}`"

    def relevant_from(self, spec) -> int:
        return spec.msmarco_tsv.relevant_from

    def records(self, path, spec, root, split, subset) -> Records:
        o: MsmarcoTsvSpec = spec.msmarco_tsv
        qrels = read_qrels(beside(path, o.qrels, spec, split))
        topk = _read_topk(beside(path, o.topk, spec, split))
        queries = [
            (where, qid, text)
            for where, (qid, text) in _rows(path, 2)
            if any(g >= o.relevant_from for g in qrels.get(qid, {}).values()) and len(topk.get(qid, ())) >= o.valid_topk
        ]
        candidates = {qid: _candidates(topk[qid], qrels[qid], o.valid_topk) for _, qid, _ in queries}
        texts = _passages(beside(path, o.collection, spec, split), {d for c in candidates.values() for d in c})
        for where, qid, text in queries:
            hits = []
            for k, docid in enumerate(candidates[qid], start=1):  # a judged passage past the top k: after them
                if docid not in texts:
                    raise DataFormatError(path, where, f"passage {docid} of query {qid} is not in {o.collection}")
                hits.append({"docid": docid, "rank": k, "content": texts[docid], "relevance": qrels[qid].get(docid, 0)})
            yield where, {"qid": qid, "query": text, "hits": hits}


def _candidates(ranked: list[tuple[str, int]], judged: dict[str, int], k: int) -> list[str]:
    """HELM's candidates of a query: the first stage's top k, then the judged passages it did not rank there."""
    top = [docid for docid, rank in ranked if rank <= k]
    return top + [docid for docid in judged if docid not in set(top)]


def _rows(path: Path, width: int) -> Iterator[tuple[str, list[str]]]:
    """The file's rows, each named by its line. A field over the csv module's limit, or a quote opened and never
    closed (which swallows the lines after it), is a DataFormatError naming this file and the line it starts on."""
    with open_text(path) as f:
        reader = csv.reader(f, delimiter="\t")
        line = 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise DataFormatError(path, f"line {line}", f"{e} (a quote opened and never closed?)") from None
            where = f"line {line}"
            if reader.line_num > line or any("\n" in field for field in row):
                raise DataFormatError(
                    path,
                    where,
                    f"a quote opened on this line is not closed on it (the row runs to line {reader.line_num})",
                )
            line = reader.line_num + 1
            if not row:
                continue
            if len(row) < width:
                raise DataFormatError(path, where, f"expected {width} tab-separated fields, found {len(row)}")
            yield where, row[:width]


def _read_topk(path: Path) -> dict[str, list[tuple[str, int]]]:
    topk: dict[str, list[tuple[str, int]]] = {}
    for where, (qid, docid, rank) in _rows(path, 3):
        if not rank.isdigit():
            raise DataFormatError(path, where, f"rank {rank!r} is not a number")
        topk.setdefault(qid, []).append((docid, int(rank)))
    return {qid: sorted(ranked, key=lambda dr: dr[1]) for qid, ranked in topk.items()}


def _passages(path: Path, wanted: set[str]) -> dict[str, Any]:
    """The wanted passages' text, the collection read once (8.8 million lines upstream)."""
    return {docid: text for _, (docid, text) in _rows(path, 2) if docid in wanted}
