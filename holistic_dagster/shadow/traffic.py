"""Shadow evaluation on production traffic: a traffic log (JSONL, one request + response per line in the OpenAI
chat/completions or completions shape, as gateways and proxies log them) becomes prompts that candidate models
answer too; a judge compares each candidate's answer with production's.

PII is removed before anything is stored, sent or logged: the fields the deployment file names are dropped from each
record, and personal data (shadow.pii: names, addresses, e-mail addresses, phone numbers, identifiers, keys and
passwords, ...) is replaced in every message, answer, slice value and record id; timestamps are stored only as
times. A malformed record is quarantined (its line and the reason, none of its text) and the rest is evaluated.
Configuration: resources/shadow.yaml."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from holistic_dagster.config.shadow import ShadowSpec
from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import sha256_json
from holistic_dagster.shadow import pii_check
from holistic_dagster.shadow.masking import Masker


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
    """A message's content: a string, or the text parts of a list of content parts (text, input_text, ...)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = (p if isinstance(p, str) else p.get("text") if isinstance(p, dict) else None for p in value)
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _timestamp(value: Any) -> str:
    """A logged time as ISO 8601 in UTC (seconds), '' when there is none or it is no time: free text from a
    timestamp field is never stored."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(float(value), tz=timezone.utc)
        elif isinstance(value, str) and value.strip():
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            moment = moment.replace(tzinfo=moment.tzinfo or timezone.utc).astimezone(timezone.utc)
        else:
            return ""
    except (ValueError, OverflowError, OSError):
        return ""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _count(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{field} is not a count of tokens")  # the value itself is not quoted: it may be text
    return value


def parse_record(raw: dict[str, Any], line: int, spec: ShadowSpec, masker: Masker) -> TrafficRecord:
    """One logged request + response, PII removed from every text kept. Raises ValueError saying what is wrong,
    naming fields, never quoting the record's text."""
    for dotted in spec.pii.drop_fields:
        _drop(raw, dotted)
    request, response = raw.get("request"), raw.get("response")
    if not isinstance(request, dict) or not isinstance(response, dict):
        raise ValueError("a record needs a `request` object and a `response` object (the API's request and response)")
    choices = response.get("choices") or []
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("response.choices is empty: no production answer")
    if "messages" in request:  # chat/completions: every role's text (system, user, assistant, tool)
        if not isinstance(request["messages"], list) or not all(isinstance(m, dict) for m in request["messages"]):
            raise ValueError("request.messages is not a list of message objects")
        messages = [
            {"role": masker.mask(str(m.get("role", ""))), "content": masker.mask(_content(m.get("content")))}
            for m in request["messages"]
        ]
        message = choices[0].get("message")
        answer = _content(message.get("content") if isinstance(message, dict) else None)
    elif "prompt" in request:  # completions
        prompt = request["prompt"]
        text = prompt if isinstance(prompt, str) else _content(prompt) if isinstance(prompt, list) else None
        if text is None:
            raise ValueError("request.prompt is neither text nor a list of texts")
        messages = [{"role": "user", "content": masker.mask(text)}]
        answer = choices[0].get("text") if isinstance(choices[0].get("text"), str) else ""
    else:
        raise ValueError("request has neither `messages` (chat/completions) nor `prompt` (completions)")
    turns = [m for m in messages if m["role"] != "system"]
    if not turns or turns[-1]["role"] != "user":
        raise ValueError("the conversation does not end with a user message")
    if len(messages) == 1:
        prompt = messages[0]["content"]
    else:  # several turns: the conversation as a transcript, ending where the assistant answers
        prompt = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
    usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
    tokens = _count(usage.get("completion_tokens"), "response.usage.completion_tokens")
    latency = raw.get("latency_s", _get(raw, "metadata.latency_s"))
    logged = next((v for v in (raw.get("timestamp"), raw.get("created_at"), response.get("created")) if v), None)
    return TrafficRecord(
        record_id=masker.mask(str(raw.get("id") or response.get("id") or sha256_json(raw)[:16])),
        line=line,
        slice=masker.mask(str(_get(raw, spec.slice_by) or "")) if spec.slice_by else "",
        messages=tuple(messages),
        prompt=prompt,
        response=masker.mask(answer),
        response_tokens=tokens if tokens is not None else len(answer.split()),
        latency_s=float(latency) if isinstance(latency, (int, float)) and not isinstance(latency, bool) else None,
        logged_at=_timestamp(logged),
    )


@dataclass(frozen=True)
class Quarantined:
    """A malformed record: its line number and what is wrong with it; none of its text."""

    line: int
    reason: str


def read_traffic(path: Path, spec: ShadowSpec) -> tuple[list[TrafficRecord], list[Quarantined]]:
    """Every well-formed record of a traffic log (the first max_records), PII removed, and the malformed ones
    quarantined (line and reason only). A file that cannot be read is a DataFormatError naming it."""
    masker = Masker(spec.pii.policy, spec.pii.redact, spec.pii.phone_regions)
    records: list[TrafficRecord] = []
    quarantined: list[Quarantined] = []
    seen: set[str] = set()
    try:
        lines = path.read_bytes().splitlines()
    except OSError as e:
        raise DataFormatError(path, "the file", f"cannot be read ({e.strerror})") from None
    for number, data in enumerate(lines, start=1):
        if not data.strip():
            continue
        try:
            raw = json.loads(data.decode("utf-8"))
            if not isinstance(raw, dict):
                raise ValueError("a line must be a JSON object")
            record = parse_record(raw, number, spec, masker)
            if record.record_id in seen:
                raise ValueError("its record id appears on an earlier line")
        except UnicodeDecodeError:
            quarantined.append(Quarantined(number, "not UTF-8"))
            continue
        except json.JSONDecodeError as e:
            quarantined.append(Quarantined(number, f"not JSON ({e.msg} at column {e.colno})"))
            continue
        except RecursionError:  # JSON nested thousands deep: this record alone, not the whole log
            quarantined.append(Quarantined(number, "nested too deeply to read"))
            continue
        except (ValueError, TypeError, AttributeError) as e:
            # our own messages name fields only; anything else is reduced to its type, and redacted regardless
            reason = str(e) if isinstance(e, ValueError) else f"malformed ({type(e).__name__})"
            quarantined.append(Quarantined(number, masker.mask(reason)))
            continue
        seen.add(record.record_id)
        records.append(record)
        if spec.max_records and len(records) >= spec.max_records:
            break
    return [_swept(r, masker, spec.pii.policy) for r in records], quarantined


def _swept(record: TrafficRecord, masker: Masker, policy: str) -> TrafficRecord:
    """The record with every name found anywhere in the log masked in all its texts (a name the NER model tagged
    in the user's message and missed in production's answer, or in another record, goes from both); then what
    the independent detector (shadow.pii_check: Presidio, and the policy's complement) still finds in a text is
    masked too: a miss of the masker is a catch of the detector, and the record is kept."""

    def clean(text: str, free_text: bool = True) -> str:
        text = masker.sweep(text)
        try:
            found = pii_check.find_pii(text, free_text, policy)
        except Exception as e:  # fail closed: the caller stores nothing
            raise pii_check.DetectorError(str(e)) from e
        spans = [(f.start, f.end, pii_check.placeholder_type(f.entity)) for f in found]
        return masker.replace(text, spans) if spans else text

    return replace(
        record,
        record_id=clean(record.record_id, False),
        slice=clean(record.slice, False),
        messages=tuple({**m, "content": clean(m["content"])} for m in record.messages),
        prompt=clean(record.prompt),
        response=clean(record.response),
    )
