"""API keys never reach storage: text from a server or an exception is redacted (the configured keys' values
and common key/token shapes) before it is stored in a table, logged to Dagster's event log, or printed."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, serialize_value

from holistic_dagster.clients.http import PermanentError, RetryPolicy, send_concurrently
from holistic_dagster.config.catalog import Catalog, ToxicitySpec
from holistic_dagster.config.models import ModelSpec, load_models
from holistic_dagster.config.redaction import REDACTED, errors_redacted, read_secret, redact
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Request
from holistic_dagster.settings import REPO_ROOT
from tests.conftest import write, write_qa_scenario
from tests.servers.openai_protocol_server import OpenAIProtocolTestServer

PLANTED = "planted-7c1e9a3f5b2d4e6a8c0b"  # no well-known shape: only the configured value can give it away
SUITE = "version: k1\nmax_failure_rate: 1.0\nscenarios:\n  mini_qa: {max_eval_instances: 10}\n"
QUESTIONS = [
    {"q": "Capital of France?", "a": "Paris"},
    {"q": "ECHOKEY Capital of Italy?", "a": "Rome"},  # the server's 400 quotes the key sent
    {"q": "Capital of Spain?", "a": "Madrid"},
    {"q": "ECHOKEY Capital of Peru?", "a": "Lima"},
]


# --- redact() on hand-made strings ----------------------------------------------------------------------------


def test_a_configured_keys_value_is_redacted_wherever_it_appears(monkeypatch):
    monkeypatch.setenv("EVAL_SERVER_ACCESS", "plain-looking-value-42")  # a name that does not look secret
    assert read_secret("EVAL_SERVER_ACCESS") == "plain-looking-value-42"
    text = "the key plain-looking-value-42 was rejected; key=plain-looking-value-42."
    assert redact(text) == f"the key {REDACTED} was rejected; key={REDACTED}."


def test_values_of_secret_looking_variables_are_redacted_without_being_read_first(monkeypatch):
    monkeypatch.setenv("SOME_VENDOR_API_KEY", "zq81mmx0aa")
    monkeypatch.setenv("GITLAB_TOKEN", "glt0k3n-value")
    monkeypatch.setenv("MY_SECRET", "short")  # under 8 characters: too common to be redacted by value
    assert redact("got zq81mmx0aa and glt0k3n-value; short stays") == f"got {REDACTED} and {REDACTED}; short stays"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Incorrect API key provided: sk-proj-AbCdEf0123456789xyz.", f"Incorrect API key provided: {REDACTED}."),
        ("token hf_AbCdEfGhIjKlMnOpQrStUv is invalid", f"token {REDACTED} is invalid"),
        ("{'Authorization': 'Bearer abc.def-ghi'}", f"{{'Authorization': 'Bearer {REDACTED}'}}"),
        ("Authorization: Basic dXNlcjpwYXNz\nnext", f"Authorization: Basic {REDACTED}\nnext"),
        ("authorization=xyz123abc", f"authorization={REDACTED}"),
        ('{"api_key": "k-123456", "model": "m"}', f'{{"api_key": "{REDACTED}", "model": "m"}}'),
        ("GET /v1?api-key=abc123&x=1", f"GET /v1?api-key={REDACTED}&x=1"),
        ("url ...?key=AIzaSyA-1234567890abcdefghijklmnopqrstu", f"url ...?key={REDACTED}"),
        ("X-Goog-Api-Key: AIzaSyA-1234567890abcdefghijklmnopqrstu", f"X-Goog-Api-Key: {REDACTED}"),
        ("access_token='t0k3n'", f"access_token='{REDACTED}'"),
        ("gh: ghp_0123456789abcdefghijABCDEFGHIJ012345", f"gh: {REDACTED}"),
    ],
)
def test_common_key_shapes_are_redacted(text, expected):
    assert redact(text) == expected
    assert redact(expected) == expected  # redacting twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "",
        "PermanentError: HTTP 404: model 'x' not found",
        "TransientError: gave up after 5 attempts; last error: timed out after 120 s",
        "a task-oriented dialogue about skills: desk-based work",  # 'sk-' inside words is not a key
        "the key to the question is 42; tokens: 17",
    ],
)
def test_text_without_secrets_is_unchanged(text):
    assert redact(text) == text


def test_the_registrys_api_key_env_is_a_configured_key(tmp_path, monkeypatch):
    monkeypatch.setenv("ODDLY_NAMED_VAR", "registry-held-value")
    load_models(
        write(tmp_path / "models.yaml", "models:\n  m: {backend: openai, path: x, api_key_env: ODDLY_NAMED_VAR}\n")
    )
    assert redact("401: registry-held-value is not a key") == f"401: {REDACTED} is not a key"


# --- the boundaries where server or exception text is stored or logged ----------------------------------------


def test_a_failed_requests_error_row_is_redacted(monkeypatch):
    """The one place every HTTP backend (OpenAI-compatible, TGI) turns a failed request into an error row."""
    monkeypatch.setenv("EVAL_SERVER_ACCESS", PLANTED)
    read_secret("EVAL_SERVER_ACCESS")

    async def send(request):
        raise PermanentError(f"HTTP 400: {{'error': 'bad request from key {PLANTED}'}}")

    request = Request(request_id="r1", instance_id="i1", kind="generate", prompt="p")
    (completion,) = asyncio.run(
        send_concurrently([request], send, max_concurrency=1, policy=RetryPolicy(max_attempts=1))
    )
    assert completion.error == f"PermanentError: HTTP 400: {{'error': 'bad request from key {REDACTED}'}}"


def test_an_error_raised_out_of_a_stage_is_redacted_for_dagsters_event_log(monkeypatch):
    monkeypatch.setenv("EVAL_SERVER_ACCESS", PLANTED)
    read_secret("EVAL_SERVER_ACCESS")
    with pytest.raises(HolisticError) as e, errors_redacted():
        try:
            raise OSError("the cause")
        except OSError:
            raise ValueError(f"server said: {PLANTED}")  # noqa: B904 (the chain is what must go)
    assert str(e.value) == f"ValueError: server said: {REDACTED}"
    assert e.value.__cause__ is None and e.value.__suppress_context__
    with pytest.raises(KeyError), errors_redacted():  # an error without a secret passes as it is
        raise KeyError("plain")


def test_the_sensors_warning_about_an_unreachable_server_is_redacted(monkeypatch):
    import requests

    from holistic_dagster.clients import identity as automation

    monkeypatch.setenv("EVAL_SERVER_ACCESS", PLANTED)

    def echoing(spec, timeout_s=5.0):
        key = read_secret(spec.api_key_env)
        raise requests.HTTPError(f"401 Client Error: key {key} rejected (Authorization: Bearer {key})")

    monkeypatch.setattr(automation, "served_revision", echoing)
    spec = ModelSpec(name="w", backend="openai", path="x", api_key_env="EVAL_SERVER_ACCESS", watch=True)
    identity, warning = automation.model_identity(spec, "previous-identity")
    assert identity == "previous-identity" and PLANTED not in warning
    assert warning.endswith(f"key {REDACTED} rejected (Authorization: Bearer {REDACTED}))")


def test_a_perspective_error_body_quoting_the_key_is_redacted(monkeypatch):
    import requests

    from holistic_dagster.toxicity.perspective import PerspectiveClassifier

    monkeypatch.setenv("MY_PERSPECTIVE_KEY", PLANTED)

    def post(self, url, json, headers, timeout):
        response = requests.Response()
        response.status_code, response._content = 400, f"API key not valid: {headers['X-Goog-Api-Key']}".encode()
        return response

    monkeypatch.setattr(requests.Session, "post", post)
    spec = ToxicitySpec(kind="perspective", base_url="http://127.0.0.1:9", api_key_env="MY_PERSPECTIVE_KEY")
    with pytest.raises(HolisticError) as e:
        PerspectiveClassifier(spec).score(["hello"])
    assert str(e.value).endswith(f"HTTP 400: API key not valid: {REDACTED}")


# --- end to end: a server that echoes the key -----------------------------------------------------------------


def _where_in_warehouse(path: Path, needle: str) -> list[str]:
    """'table.column (n rows)' for every text cell of every table that contains `needle`."""
    found = []
    with duckdb.connect(str(path), read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        assert "completions" in tables, tables
        for table in tables:
            frame = con.execute(f'SELECT * FROM "{table}"').df()
            for column in frame.columns:
                n = int(frame[column].astype(str).str.contains(needle, regex=False).sum())
                if n:
                    found.append(f"{table}.{column} ({n} rows)")
    return found


def _files_containing(root: Path, needle: str) -> list[str]:
    return [
        str(p.relative_to(root)) for p in sorted(root.rglob("*")) if p.is_file() and needle.encode() in p.read_bytes()
    ]


def test_a_key_echoed_by_a_failing_server_reaches_no_table_log_report_or_output(
    tmp_path, monkeypatch, capfd, shared_data, untrained_client
):
    """A whole suite through Dagster (on-disk instance) against a server whose error bodies quote the key it
    got: the key is in no table, no file of the Dagster home or of the results, no event log entry, no
    `holistic query` output and nothing printed."""
    from typer.testing import CliRunner

    from holistic_dagster.cli import app
    from holistic_dagster.definitions import build_definitions
    from holistic_dagster.defs.resources import HolisticResource
    from holistic_dagster.defs.runner import evaluate_suite

    monkeypatch.setenv("EVAL_SERVER_ACCESS", PLANTED)
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write_qa_scenario(tmp_path / "assets", tmp_path / "data", QUESTIONS, "Four questions, two of them refused.")
    write(tmp_path / "assets" / "suites" / "k1.yaml", SUITE)
    monkeypatch.setenv("HOLISTIC_DATA_DIR", f"{tmp_path / 'data'}:{shared_data}")
    catalog, db = Catalog(tmp_path / "assets"), tmp_path / "results" / "w.duckdb"
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").symlink_to(REPO_ROOT / "dagster.yaml")
    instance = DagsterInstance.local_temp(str(dagster_home))  # event log, runs, compute logs: files on disk
    with OpenAIProtocolTestServer(untrained_client) as server:
        models = write(
            tmp_path / "models.yaml",
            f"models:\n  leaky: {{backend: openai, path: x, base_url: '{server.base_url}', "
            "api_key_env: EVAL_SERVER_ACCESS, max_attempts: 1, timeout_s: 30}\n",
        )
        resource = HolisticResource(warehouse_path=str(db), catalog_dir=str(catalog.root), models_file=str(models))
        evaluate_suite(build_definitions(catalog, resource), instance, "k1", ["leaky"], catalog=catalog)
    assert {auth for auth, _ in server.hits_by_key} == {f"Bearer {PLANTED}"}  # the key was sent, and echoed
    report = db.parent / "reports" / "k1" / "index.html"
    assert report.exists()
    cli = CliRunner()
    printed = [
        cli.invoke(app, ["query", "SELECT * FROM completions", "--db", str(db)]),
        cli.invoke(app, ["query", "SELECT request_id, error FROM completions", "--csv", "--db", str(db)]),
    ]
    assert all(out.exit_code == 0 for out in printed), [out.output for out in printed]
    captured = capfd.readouterr()

    with duckdb.connect(str(db), read_only=True) as con:
        errors = con.execute("SELECT error FROM completions").fetchall()
    failed = [e for (e,) in errors if e]
    assert len(errors) == 4 and len(failed) == 2 and all("HTTP 400" in e for e in failed), errors
    event_log = [serialize_value(e) for run in instance.get_runs() for e in instance.all_logs(run.run_id)]
    assert any("requests failed" in line for line in event_log)  # the check that quotes the errors is there
    leaks = {
        "warehouse tables": _where_in_warehouse(db, PLANTED),
        "files under the results folder (warehouse file, report)": _files_containing(db.parent, PLANTED),
        "files under the Dagster home (event log, runs, compute logs)": _files_containing(dagster_home, PLANTED),
        "Dagster event log entries": [line[:300] for line in event_log if PLANTED in line],
        "holistic query output": [out.output[:200] for out in printed if PLANTED in out.output],
        "captured stdout/stderr": [s[:200] for s in (captured.out, captured.err) if PLANTED in s],
    }
    leaked = "\n".join(f"- {where}: {found}" for where, found in leaks.items() if found)
    assert not leaked, f"the planted key leaked into:\n{leaked}"
    assert all(REDACTED in e for e in failed), failed  # what the server said stays, less the key
