"""A local transformers model loaded in a process of its own, behind the ModelClient interface.

Loading a local model costs seconds of CPU before its first token: importing torch and transformers and the
model's classes (about 6 s on a 2-core machine) and reading the weights. In one process that time adds to
everything else a command does first (Dagster, the datasets, the checks). `holistic evaluate` therefore starts
each local model in a spawned process as it begins, and the stages talk to it through `ModelProcessClient`: the
same TransformersClient runs there, so completions, log-probabilities and the recorded description are those
of the in-process client; finished batches stream back as they finish (the completion cache still saves each
at once). A model's process is ready as soon as its tokenizer is: the prompts stage needs only that, and the
weights (the model's classes: seconds of imports) load meanwhile. Models start one after another: the next
model's process is started when the previous one has its weights (its first batch is answered).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

from holistic_dagster.clients import background
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Completion, Request


class ModelProcessError(HolisticError):
    pass


def _serve(connection, spec: ModelSpec) -> None:
    """The model's process: load the model, say what the client needs to know, then answer calls until the pipe
    closes. generate and score send each finished batch as it finishes, then the result."""
    try:
        from holistic_dagster.clients.transformers_client import TransformersClient

        client = TransformersClient(spec, load_model=False)
        connection.send(("ready", {"max_context": client.max_context, "describe": client.describe()}))
    except BaseException as e:
        connection.send(("error", background.sendable(e)))
        return
    # the weights load while the evaluation builds its prompts, which need only the tokenizer; a load that
    # fails here fails again, with its message, at the first call that needs the model
    threading.Thread(target=_load_quietly, args=(client,), name="load-model", daemon=True).start()
    while True:
        try:
            method, args = connection.recv()
        except (EOFError, OSError):  # the client closed the pipe or its process ended
            return
        try:
            if method in ("generate", "score"):
                result = getattr(client, method)(args[0], lambda done: connection.send(("done", done)))
            elif method == "chat_prompt":
                result = client.chat_prompt(*args)
            else:
                result = getattr(client, method)(*args)
            connection.send(("result", result))
        except Exception as e:
            connection.send(("error", background.sendable(e)))


def _load_quietly(client) -> None:
    with contextlib.suppress(Exception):
        client.load_model()


class ModelProcessClient:
    """A TransformersClient in a spawned process (see the module's docstring)."""

    backend = "transformers"
    supports_prompt_logprobs = True

    def __init__(self, spec: ModelSpec, then: ModelProcessClient | None = None):
        self.spec = spec
        self._then = then  # started once this one is ready
        self._process = None
        self._info: dict[str, Any] | None = None
        self._lock = threading.RLock()
        self._tokens: dict[str, int] = {}
        self._loaded = False  # the process has answered a generate or score call (its limits may have changed)
        self.chat_prompt = self._chat_prompt if spec.chat else None

    def start(self) -> None:
        with self._lock:
            if self._process is None:
                name = f"holistic-model-{self.spec.name}"
                self._process, self._connection = background.spawn(_serve, name, self.spec)

    def _receive(self) -> tuple[str, Any]:
        try:
            return self._connection.recv()
        except (EOFError, OSError):
            self._process.join(timeout=5)
            raise ModelProcessError(
                f"the process of model {self.spec.name!r} ended unexpectedly (exit code {self._process.exitcode}): "
                "out of memory, or killed"
            ) from None

    def _ready(self) -> dict[str, Any]:
        with self._lock:
            if self._info is None:
                self.start()
                status, value = self._receive()
                if status == "error":
                    raise value
                self._info = value
            return self._info

    def _call(self, method: str, *args, on_done=None) -> Any:
        with self._lock:
            self._ready()
            self._connection.send((method, args))
            try:
                status, value = self._receive()
                if method in ("generate", "score") and status != "error":
                    self._loaded = True
                    if self._then:
                        self._then.start()  # this model has its weights: the next one loads while this one works
                while status == "done":
                    if on_done:
                        on_done(value)
                    status, value = self._receive()
            except BaseException:
                # interrupted mid-answer (on_done failed, Ctrl-C, the process died): what is still in the pipe
                # belongs to this call, so the next use starts a new process
                self.close()
                self._info, self._loaded = None, False
                raise
            if status == "error":
                raise value
            return value

    @property
    def max_context(self) -> int:
        return self._ready()["max_context"]

    def describe(self) -> dict[str, Any]:
        """As the process says it now (its batch rows change when the device runs out of memory); before the
        process has loaded the weights, what it said when it was ready."""
        with self._lock:
            info = self._ready()
            return dict(self._call("describe") if self._loaded else info["describe"])

    def count_tokens(self, text: str) -> int:
        if text not in self._tokens:  # prompts count the same few-shot block once per question
            if len(self._tokens) > 100_000:
                self._tokens.clear()
            self._tokens[text] = self._call("count_tokens", text)
        return self._tokens[text]

    def count_tokens_many(self, texts: list[str]) -> list[int]:
        """One round trip for all the texts not counted yet (a prompts stage asks for hundreds)."""
        counts = {text: self._tokens[text] for text in texts if text in self._tokens}
        missing = [text for text in dict.fromkeys(texts) if text not in counts]
        if missing:
            counts.update(zip(missing, self._call("count_tokens_many", missing)))
            if len(self._tokens) + len(missing) > 100_000:
                self._tokens.clear()
            self._tokens.update((text, counts[text]) for text in missing)
        return [counts[text] for text in texts]

    def truncate_left(self, text: str, max_tokens: int) -> str:
        return self._call("truncate_left", text, max_tokens)

    def _chat_prompt(self, prompt: str) -> str:
        return self._call("chat_prompt", prompt)

    def generate(self, requests: Sequence[Request], on_done=None) -> list[Completion]:
        return self._call("generate", list(requests), on_done=on_done) if requests else []

    def score(self, requests: Sequence[Request], on_done=None) -> list[Completion]:
        return self._call("score", list(requests), on_done=on_done) if requests else []

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                background.stop(self._process, self._connection)
                self._process = None
