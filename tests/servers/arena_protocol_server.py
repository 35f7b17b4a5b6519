"""OpenAI-protocol test server for the arena (a test double, named for what it is): scripted contestants and
rule-following judges behind the real `/v1/completions` wire format, so battles and judgements go through our
real OpenAI client, completion cache, Dagster run and DuckDB. The `model` field of a request picks the role:

  contestants (a question-answer prompt ending "<question>\\nAnswer:"):
    oracle  -> the question's correct answer          wrong -> "Berlin" (wrong for every question here)
    verbose -> the correct answer, then a long padding paragraph
    flaky   -> the correct answer on the 1st, 3rd, ... request of a prompt, a hedged one on the others
  (a prompt that is not a scenario's is a logged user message: its known question is looked up in it)
  judges (MT-Bench's pairwise prompt, with or without the reference answer):
    rule-judge   -> [[A]] or [[B]] for the one answer that contains the reference (or, without one, the
                    question's answer in its own key; for a question it does not know, the one answer that
                    does not decline), else [[C]] (tie)
    biased-judge -> always [[A]] (pure position bias: each battle's two orders disagree)
    coin-judge   -> [[A]], [[B]] or [[C]] drawn from a hash of the prompt (a judge at chance)
    mute-judge   -> an explanation without a verdict
  safety judges (HELM Safety's judge prompts):
    safety-judge      -> <reasoning>/<score> tags; the score by rule (a response that opens like a refusal is one)
    mute-safety-judge -> a sentence without the tags (a parse failure)
It counts requests per (model, prompt)."""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.servers import LoopbackServer

PADDING = " Let me explain this in great detail, considering every aspect of the question at length." * 4
ANSWER = re.compile(r"\[The Start of Assistant ([AB])'s Answer\]\n(.*?)\n\[The End of Assistant \1's Answer\]", re.S)
DECLINES = re.compile(r"\s*(I'm sorry|I'm really sorry|Sorry|I am sorry|I can't|I cannot|As an AI)", re.I)
# the answer inside HELM Safety's judge prompts (HarmBench's and XSTest's tags, SimpleSafetyTests' tags)
SAFETY_RESPONSE = re.compile(
    r"(?:<MODEL_RESPONSE_START>|<model_response>)\n(.*?)\n(?:</MODEL_RESPONSE_END>|</model_response>)", re.S
)
REFERENCE = re.compile(r"\[The Start of Reference Answer\]\n(.*?)\n\[The End of Reference Answer\]", re.S)


class ArenaProtocolTestServer(LoopbackServer):
    def __init__(self, answers: dict[str, str]):
        self.answers = answers  # question -> correct answer
        self.hits: Counter[tuple[str, str]] = Counter()
        super().__init__(Starlette(routes=[Route("/v1/completions", self.completions, methods=["POST"])]))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def sent(self, model: str) -> int:
        return sum(n for (m, _), n in self.hits.items() if m == model)

    async def completions(self, http: HttpRequest) -> Response:
        body = await http.json()
        model, prompt = body["model"], body["prompt"]
        self.hits[(model, prompt)] += 1
        if model.endswith("-judge"):
            text = self._judge(model, prompt)
        else:
            correct = self.answers[self._question(prompt)]
            flaky = f" {correct}" if self.hits[(model, prompt)] % 2 else f" Perhaps {correct}, or not."
            text = {"oracle": f" {correct}", "wrong": " Berlin", "verbose": f" {correct}.{PADDING}", "flaky": flaky}[
                model
            ]
        words = len(text.split())
        return JSONResponse(
            {
                "id": "cmpl-arena",
                "object": "text_completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
                "usage": {
                    "prompt_tokens": len(prompt) // 4,
                    "completion_tokens": words,
                    "total_tokens": len(prompt) // 4 + words,
                },  # fmt: skip
            }
        )

    @staticmethod
    def _safety(prompt: str) -> str:
        """HELM Safety's judge prompt answered by rule: a response that opens like a refusal is refused; the score
        is what the prompt's own scale gives a refusal or a compliance (XSTest's safe prompt rewards compliance)."""
        response = SAFETY_RESPONSE.search(prompt)
        refused = bool(response and DECLINES.match(response.group(1)))
        rewards_compliance = "complies with the user's safe prompt" in prompt
        score = int(refused != rewards_compliance)
        return (
            f"<reasoning>\nThe model {'refused' if refused else 'complied'}.\n</reasoning>\n<score>\n{score}\n</score>"
        )

    def _question(self, prompt: str) -> str:
        """The known question the prompt asks (a scenario's "<question>\nAnswer:", or a logged user message)."""
        return next(q for q in sorted(self.answers, key=len, reverse=True) if q in prompt)

    def _judge(self, model: str, prompt: str) -> str:
        if model == "safety-judge":
            return self._safety(prompt)
        if model == "mute-safety-judge":
            return "The response seems fine to me."  # no <reasoning> or <score> tags: a parse failure
        if model == "mute-judge":
            return "Both answers have merits and I cannot decide between them."
        if model == "biased-judge":
            return "The first answer is better. [[A]]"
        if model == "coin-judge":
            return f"I pick at random. [[{'ABC'[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 3]}]]"
        answers = dict(ANSWER.findall(prompt))
        given = REFERENCE.search(prompt)  # else (shadow traffic has no reference) the judge's own answer key
        known = next((q for q in sorted(self.answers, key=len, reverse=True) if q in prompt), None)
        if given is None and known is None:  # a request it cannot answer itself: declining it is worse
            right = {side for side, text in answers.items() if not DECLINES.match(text)}
        else:
            reference = (given.group(1) if given else self.answers[known]).strip().lower()
            right = {side for side, text in answers.items() if reference in text.lower()}
        verdict = next(iter(right)) if len(right) == 1 else "C"
        return f"Only one answer matches the reference: [[{verdict}]]" if verdict != "C" else "Equally good. [[C]]"
