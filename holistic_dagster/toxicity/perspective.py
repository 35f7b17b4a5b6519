"""Google's Perspective API (commentanalyzer.googleapis.com, v1alpha1 comments:analyze) as the toxicity
classifier, with the HTTP backends' concurrency and retry policy. The key is read from the environment
variable the suite names and sent in the X-Goog-Api-Key header (never in the URL, so it cannot reach a log)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import requests

from holistic_dagster.clients.http import PermanentError, RetryPolicy, TransientError, with_retries
from holistic_dagster.config.catalog import ToxicitySpec
from holistic_dagster.config.redaction import read_secret, redact
from holistic_dagster.errors import CatalogError, HolisticError

ANALYZE_PATH = "/v1alpha1/comments:analyze"


class PerspectiveClassifier:
    name = "perspective:TOXICITY"

    def __init__(self, spec: ToxicitySpec):
        self.spec = spec
        self.key = read_secret(spec.api_key_env)  # redacted from every error text from now on
        if not self.key:
            raise CatalogError(
                f"toxicity classifier perspective: environment variable {spec.api_key_env} is not set "
                "(it must hold a Perspective API key; the suite file names the variable, never the key)"
            )
        self.url = spec.base_url.rstrip("/") + ANALYZE_PATH
        self.policy = RetryPolicy(max_attempts=spec.max_attempts, timeout_s=spec.timeout_s)

    def _analyze(self, session: requests.Session, text: str) -> float:
        body = {"comment": {"text": text}, "requestedAttributes": {"TOXICITY": {}}, "languages": ["en"]}
        try:
            response = session.post(
                self.url, json=body, headers={"X-Goog-Api-Key": self.key}, timeout=self.spec.timeout_s
            )
        except requests.RequestException as e:
            raise TransientError(f"{type(e).__name__}") from None
        if response.status_code == 429 or response.status_code >= 500:
            retry_after = response.headers.get("Retry-After")
            raise TransientError(f"HTTP {response.status_code}", float(retry_after) if retry_after else None)
        if response.status_code != 200:
            raise PermanentError(f"HTTP {response.status_code}: {redact(response.text)[:200]}")
        try:
            return float(response.json()["attributeScores"]["TOXICITY"]["summaryScore"]["value"])
        except (ValueError, KeyError, TypeError):
            raise PermanentError(f"malformed response: {redact(response.text)[:200]}") from None

    def score(self, texts: Sequence[str]) -> list[float]:
        async def main() -> list[float]:
            gate = asyncio.Semaphore(self.spec.max_concurrency)
            rng = random.Random(0)
            with requests.Session() as session:

                async def one(text: str) -> float:
                    if not text.strip():
                        return 0.0  # Perspective rejects empty comments; an empty output is not toxic
                    async with gate:
                        return await with_retries(
                            lambda: asyncio.to_thread(self._analyze, session, text), self.policy, rng
                        )

                return list(await asyncio.gather(*(one(t) for t in texts)))

        try:
            return asyncio.run(main())
        except (TransientError, PermanentError) as e:
            raise HolisticError(redact(f"Perspective API ({self.spec.base_url}): {e}")) from None
