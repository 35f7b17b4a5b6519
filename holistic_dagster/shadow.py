"""Shadow evaluation on production traffic: a traffic log (JSONL, one request + response per line in the OpenAI
chat/completions or completions shape, as gateways and proxies log them) becomes prompts that candidate models
answer too; a judge compares each candidate's answer with production's.

PII is removed before anything is stored or sent: the fields the deployment file names are dropped from each
record, and the text patterns it names (emails, phone numbers, ...) are replaced in every message and response.
Configuration: resources/shadow.yaml."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from holistic_dagster.catalog import _read_yaml, _Strict, _validate
from holistic_dagster.errors import DataFormatError
from holistic_dagster.hashing import sha256_json

# text patterns a deployment can name in pii.redact, each replaced by [<name>]
PII_PATTERNS = {
    "email": re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"),
    # international (+country code, then groups) or North-American style ((415) 555-0100, 415-555-0100,
    # 555-0100); not dates (1969-07-20), decimals or lists of years
    "phone": re.compile(
        r"(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(?\d{1,4}\)?[ .-]?){1,3}\d{3,4}"
        r"|(?:\(\d{3}\)[ .-]?|\d{3}[ .-])?\d{3}[ .-]\d{4})(?!\w)"
    ),
    "ipv4": re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"),
    "credit_card": re.compile(r"\b(?:\d[ -]?){13,16}\b"),
}


class PiiSpec(_Strict):
    # dotted paths into a log record dropped before anything else (e.g. request.user, metadata.user_email)
    drop_fields: tuple[str, ...] = ("request.user", "metadata.user_id", "metadata.user_email")
    redact: tuple[str, ...] = ("email", "phone")  # names from PII_PATTERNS, replaced in all text

    @field_validator("redact")
    @classmethod
    def _known(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [n for n in names if n not in PII_PATTERNS]
        if unknown:
            raise ValueError(f"unknown PII pattern(s) {unknown}: known are {', '.join(PII_PATTERNS)}")
        return names


class ShadowSpec(_Strict):
    """resources/shadow.yaml: where traffic logs land, which models answer them in shadow, who judges."""

    traffic_dir: str = "traffic"  # relative to HOLISTIC_HOME (data/), or absolute
    production: str = "production"  # the name production's answers are stored under
    candidates: tuple[str, ...] = Field(min_length=1)  # registered models that answer the same prompts
    judge: str  # a registered model
    slice_by: str = "metadata.route"  # dotted path of the record field that slices traffic ("" for none)
    max_tokens: int = Field(256, gt=0)  # of a candidate's answer (greedy)
    max_records: int | None = Field(None, gt=0)  # per log file: the first this many
    template: str = "judge_pairwise.j2"  # the arena's judge template (no reference answer)
    judge_max_tokens: int = Field(256, gt=0)
    max_failure_rate: float = Field(0.1, ge=0.0, le=1.0)  # judgements without a verdict a check tolerates
    bootstrap_samples: int = Field(1000, gt=0)
    seed: int = 0
    pii: PiiSpec = PiiSpec()

    @model_validator(mode="after")
    def _slice_kept(self) -> ShadowSpec:
        if self.slice_by and self.slice_by in self.pii.drop_fields:
            raise ValueError(f"slice_by {self.slice_by!r} is one of pii.drop_fields: it would be dropped first")
        return self

    def traffic_path(self, home: Path) -> Path:
        path = Path(self.traffic_dir)
        return path if path.is_absolute() else home / path


def load_shadow_spec(path: Path) -> ShadowSpec:
    return _validate(ShadowSpec, _read_yaml(path), path)


def log_key(path: Path) -> str:
    """A log file's partition key: its name without .jsonl, as a slug (e.g. 2026-12-01)."""
    return re.sub(r"[^a-z0-9._-]+", "-", path.name.removesuffix(".jsonl").lower()).strip("-")


@dataclass(frozen=True)
class TrafficRecord:
    record_id: str  # the logged id, else a hash of the line
    line: int
    slice: str
    messages: tuple[dict[str, str], ...]  # role/content after PII removal
    prompt: str  # what candidates are asked (the user's message, or the conversation as a transcript)
    response: str  # production's answer, after PII removal
    response_tokens: int
    latency_s: float | None
    logged_at: str


def redact_text(text: str, spec: PiiSpec) -> str:
    for name in spec.redact:
        text = PII_PATTERNS[name].sub(f"[{name}]", text)
    return text


def _drop(record: dict[str, Any], dotted: str) -> None:
    *parents, leaf = dotted.split(".")
    node: Any = record
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(leaf, None)


def _get(record: dict[str, Any], dotted: str) -> Any:
    node: Any = record
    for part in dotted.split(".") if dotted else ():
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _content(value: Any) -> str:
    """A message's content: a string, or the text parts of a list of content parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p.get("text", "") for p in value if isinstance(p, dict) and p.get("type") == "text")
    return ""


def parse_record(raw: dict[str, Any], line: int, spec: ShadowSpec) -> TrafficRecord:
    """One logged request + response, PII removed. Raises ValueError saying what is missing."""
    for dotted in spec.pii.drop_fields:
        _drop(raw, dotted)
    request, response = raw.get("request"), raw.get("response")
    if not isinstance(request, dict) or not isinstance(response, dict):
        raise ValueError("a record needs a `request` object and a `response` object (the API's request and response)")
    choices = response.get("choices") or []
    if not choices:
        raise ValueError("response.choices is empty: no production answer")
    if "messages" in request:  # chat/completions
        messages = [
            {"role": str(m.get("role", "")), "content": redact_text(_content(m.get("content")), spec.pii)}
            for m in request["messages"]
        ]
        answer = _content((choices[0].get("message") or {}).get("content"))
    elif "prompt" in request:  # completions
        messages = [{"role": "user", "content": redact_text(str(request["prompt"]), spec.pii)}]
        answer = choices[0].get("text") or ""
    else:
        raise ValueError("request has neither `messages` (chat/completions) nor `prompt` (completions)")
    turns = [m for m in messages if m["role"] != "system"]
    if not turns or turns[-1]["role"] != "user":
        raise ValueError("the conversation does not end with a user message")
    if len(messages) == 1:
        prompt = messages[0]["content"]
    else:  # several turns: the conversation as a transcript, ending where the assistant answers
        prompt = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
    usage = response.get("usage") or {}
    latency = raw.get("latency_s", _get(raw, "metadata.latency_s"))
    return TrafficRecord(
        record_id=redact_text(str(raw.get("id") or response.get("id") or sha256_json(raw)[:16]), spec.pii),
        line=line,
        slice=redact_text(str(_get(raw, spec.slice_by) or ""), spec.pii) if spec.slice_by else "",
        messages=tuple(messages),
        prompt=prompt,
        response=redact_text(answer, spec.pii),
        response_tokens=int(usage.get("completion_tokens") or len(answer.split())),
        latency_s=float(latency) if isinstance(latency, (int, float)) else None,
        logged_at=str(raw.get("timestamp") or raw.get("created_at") or response.get("created") or ""),
    )


def read_traffic(path: Path, spec: ShadowSpec) -> list[TrafficRecord]:
    """Every record of a traffic log (the first max_records), PII removed; a malformed line is a
    DataFormatError naming the file, the line and the problem (nothing is stored)."""
    records, seen = [], set()
    with path.open(encoding="utf-8") as f:
        for number, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
                if not isinstance(raw, dict):
                    raise ValueError("a line must be a JSON object")
                record = parse_record(raw, number, spec)
            except (ValueError, TypeError, AttributeError) as e:
                raise DataFormatError(path, f"line {number}", str(e)) from None
            if record.record_id in seen:
                raise DataFormatError(path, f"line {number}", f"record id {record.record_id!r} appears twice")
            seen.add(record.record_id)
            records.append(record)
            if spec.max_records and len(records) >= spec.max_records:
                break
    return records
