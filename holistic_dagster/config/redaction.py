"""Secrets never reach storage or logs: `redact` is applied wherever text from a server or an exception becomes
stored text (completions.error), logged text (check descriptions in Dagster's event log, sensor log lines) or
the message of an error raised out of a client or a stage.

It removes
  (a) the values of the configured keys: every variable a key is read from (`read_secret`; the registry's and
      the backends' `api_key_env`, the Perspective classifier's) and every environment variable whose name looks
      secret (..._API_KEY, ..._TOKEN, ..._SECRET, ..._PASSWORD, ...) with a value of at least 8 characters;
  (b) common key shapes: OpenAI-style sk-..., Hugging Face hf_..., GitHub, Google, AWS and Slack tokens, JWTs,
      `Bearer <token>`, Authorization headers, and api_key / token / secret / password fields in JSON, Python
      reprs, headers and query strings (`?key=...` too).
`visible` is the other half of showing stored text safely: control characters as their Unicode pictures, so that
dataset text or model output cannot drive a terminal (an escape sequence) or vanish from a page.
Hand-written regexes: the secret scanners on PyPI (detect-secrets, ggshield) report findings in files; none
rewrites a string, and their entropy heuristics would also blank out ordinary model output.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

REDACTED = "[REDACTED]"
# C0 control characters (but tab and newline) and DEL as their Unicode control pictures, C1 controls (which some
# terminals also obey: 0x9b starts a sequence) as the replacement character: model output may hold them (an
# untrained model's tokens), a terminal would act on them, and an HTML page would drop or mangle them
CONTROL_PICTURES = (
    {c: 0x2400 + c for c in range(32) if c not in (9, 10)} | {127: 0x2421} | dict.fromkeys(range(0x80, 0xA0), 0xFFFD)
)


def visible(text: str) -> str:
    """Text as a page or a terminal shows it: control characters made visible (everything else as it is)."""
    return text.translate(CONTROL_PICTURES)


MIN_VALUE_LENGTH = 8  # shorter values of secret-looking variables are too common to replace everywhere

# environment variable names whose values are secrets (OPENAI_API_KEY, HF_TOKEN, AWS_SECRET_ACCESS_KEY, ...)
SECRET_NAME = re.compile(r"(?:^|[_-]|API)(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)

_VALUE = r"[^\s\"',;&(){}<>\[\]]+"  # a field's value: up to a quote, separator, bracket or space
_FIELDS = [
    # Authorization / Proxy-Authorization headers, in HTTP, JSON, Python reprs and key=value text
    r"\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+|(?!(?:bearer|basic|token|digest)\s))",
    r"\bbearer\s+",
    # api_key, x-api-key, X-Goog-Api-Key, OPENAI_API_KEY, access_token, client_secret, ... fields
    r"(?<![A-Za-z0-9])[\w-]*?(?:api[_-]?key|access[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|"
    r"refresh[_-]?token|id[_-]?token|client[_-]?secret)[\"']?\s*[:=]\s*[\"']?",
    r"(?<![\w-])(?:token|secret|password|passwd)[\"']?\s*[:=]\s*[\"']?",
    r"[?&]key=",  # Google APIs take the key in the query string
]
_FIELD = re.compile(rf"((?:{'|'.join(_FIELDS)})){_VALUE}", re.IGNORECASE)
_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-[A-Za-z0-9_-]{16,}"  # OpenAI (sk-..., sk-proj-...), Anthropic (sk-ant-...)
    r"|hf_[A-Za-z0-9]{16,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWTs
    r")"
)

_configured_names: set[str] = set()  # variables a key is read from (their values are read when redacting)


def register_secret_env(name: str | None) -> None:
    """Marks an environment variable as holding a key (e.g. a registry entry's `api_key_env`): its value is
    redacted whatever the variable's name."""
    if name:
        _configured_names.add(name)


def read_secret(name: str) -> str:
    """The value of the environment variable `name` ('' if unset); from now on the variable's value is redacted
    everywhere. Every key the project sends is read through this."""
    register_secret_env(name)
    return os.environ.get(name, "")


def secret_values() -> list[str]:
    """The values to redact, longest first (so a key that contains another is replaced whole)."""
    values = {
        value
        for name, value in os.environ.items()
        if value.strip()
        and (name in _configured_names or (SECRET_NAME.search(name) and len(value) >= MIN_VALUE_LENGTH))
    }
    return sorted(values, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every configured key's value and every common key/token shape replaced by [REDACTED]."""
    if not text:
        return text
    for value in secret_values():
        text = text.replace(value, REDACTED)
    text = _FIELD.sub(lambda m: m.group(1) + REDACTED, text)
    return _SHAPES.sub(REDACTED, text)


@contextmanager
def errors_redacted() -> Iterator[None]:
    """Re-raises an exception whose message holds a secret as a HolisticError with the secret redacted (naming
    the original type, its chain dropped: Dagster stores a step's error with its causes); others pass as they are."""
    try:
        yield
    except Exception as e:
        message = str(e)
        clean = redact(message)
        if clean == message:
            raise
        from holistic_dagster.errors import HolisticError

        raise HolisticError(f"{type(e).__name__}: {clean}") from None
