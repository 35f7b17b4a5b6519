"""The TGI backend: recorded responses from real TGI servers parse, a TGI-protocol emulator's responses are
valid under TGI's OpenAPI specification, and the client through it equals the local model."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from holistic_dagster.clients.tgi_client import TGIClient, completion_from_tgi, continuation_from_prefill
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.records import Request
from tests.servers.tgi_protocol_server import TGIProtocolEmulator


def _openapi_validator(shared_data, schema_name: str):
    """TGI's OpenAPI 3.0 schema as JSON Schema (`nullable: true` becomes a null type)."""
    spec = json.loads((shared_data / "tgi" / "openapi.json").read_text())

    def convert(node):
        if isinstance(node, dict):
            node = {k: convert(v) for k, v in node.items()}
            if node.pop("nullable", False):
                if "type" in node:
                    node["type"] = [node["type"], "null"]
                else:
                    node = {"anyOf": [node, {"type": "null"}]}
            node.pop("example", None)
            return node
        return [convert(v) for v in node] if isinstance(node, list) else node

    schemas = convert(copy.deepcopy(spec["components"]["schemas"]))
    root = {"$ref": f"#/components/schemas/{schema_name}", "components": {"schemas": schemas}}
    return jsonschema.Draft7Validator(root)


def _recorded(shared_data):
    for path in sorted((shared_data / "tgi" / "responses").glob("*.json")):
        data = json.loads(path.read_text())
        for body in data if isinstance(data, list) else [data]:
            if isinstance(body, dict) and "generated_text" in body and body.get("details"):
                yield path.name, body


def test_recorded_tgi_responses_parse_into_completions(shared_data):
    parsed = with_prefill = 0
    for name, body in _recorded(shared_data):
        request = Request(request_id="r", instance_id="i", kind="generate", prompt="p")
        c = completion_from_tgi(body, request, 0.1)
        expected = [t for t in body["details"]["tokens"] if not t["special"]]
        assert c.tokens == tuple(t["text"] for t in expected), name
        assert c.logprobs == pytest.approx([t["logprob"] for t in expected]), name
        assert c.text == body["generated_text"] and c.num_completion_tokens == body["details"]["generated_tokens"]
        parsed += 1
        prefill = body["details"]["prefill"]
        if prefill and prefill[-1]["logprob"] is not None and prefill[-1]["text"].strip():
            score = Request(request_id="s", instance_id="i", kind="score", prompt="p", continuation=prefill[-1]["text"])
            scored = continuation_from_prefill(body, score, 0.1)
            assert scored.logprob == pytest.approx(prefill[-1]["logprob"]), name
            assert scored.num_prompt_tokens == len(prefill) - 1
            with_prefill += 1
    assert parsed >= 30 and with_prefill >= 5


@pytest.fixture(scope="module")
def tgi(tuned_client):
    with TGIProtocolEmulator(tuned_client) as server:
        yield server


def test_the_emulator_speaks_tgis_documented_schemas(tgi, shared_data, tuned_client):
    client = TGIClient(ModelSpec(name="tgi-demo", backend="tgi", path="demo", base_url=tgi.base_url))
    client.generate([Request(request_id="g", instance_id="i", kind="generate", prompt="Answer:", max_tokens=3)])
    client.score([Request(request_id="s", instance_id="i", kind="score", prompt="Answer:", continuation=" green")])
    generate = _openapi_validator(shared_data, "GenerateResponse")
    assert len(tgi.responses) == 2
    for body in tgi.responses:
        generate.validate(body)
    _openapi_validator(shared_data, "Info").validate(tgi.info_body())
    # and the validator does reject what TGI would not send
    with pytest.raises(jsonschema.ValidationError):
        generate.validate({"details": {"tokens": []}})


def test_tgi_client_equals_the_local_model_and_records_server_info(tgi, tuned_client):
    client = TGIClient(
        ModelSpec(
            name="tgi-demo",
            backend="tgi",
            path="demo",
            base_url=tgi.base_url,
            max_concurrency=4,
            timeout_s=30,
            max_attempts=2,
        )
    )
    prompts = [
        f"Apply the rules.\n\nRule: A + B\nSubstitute: A = {w}, B = dog\nAnswer:" for w in ("cat", "moon", "sun")
    ]
    gen = [
        Request(request_id=f"g{i}", instance_id="i", kind="generate", prompt=p, max_tokens=8, stop=("\n",))
        for i, p in enumerate(prompts)
    ]
    remote, local = client.generate(gen), tuned_client.generate(gen)
    assert [c.text for c in remote] == [c.text for c in local]
    assert remote[0].logprobs == pytest.approx(local[0].logprobs, abs=1e-3)
    assert all(len(alts) == 5 for alts in remote[0].top_logprobs)
    score = [
        Request(
            request_id=f"s{i}", instance_id="i", kind="score", prompt="Question: Grass colour?\nAnswer:", continuation=c
        )
        for i, c in enumerate((" green", " a pale pink"))
    ]
    for got, want in zip(client.score(score), tuned_client.score(score)):
        assert got.error == "" and got.logprob == pytest.approx(want.logprob, abs=1e-4)
    info = client.describe()
    assert info["model_revision"] == "0123456789abcdef0123456789abcdef01234567"
    assert info["library_versions"]["text-generation-inference"] == "3.3.6-dev0"
    assert client.max_context == tuned_client.max_context - 64  # max_input_tokens from /info
    (failed,) = client.generate(
        [Request(request_id="x", instance_id="i", kind="generate", prompt="ALWAYS500", max_tokens=2)]
    )
    assert failed.error.startswith("TransientError: gave up after 2 attempts; last error: HTTP 500")
    assert tgi.hits["ALWAYS500"] == 2
