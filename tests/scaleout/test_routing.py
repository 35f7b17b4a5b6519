"""Scale-out settings and the checks a run makes before it sends a step: which queue each step goes to, and the
clear errors for a missing or unreachable broker, a queue no worker consumes, and workers from other code."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
from dagster_celery.make_app import make_app
from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG
from typer.testing import CliRunner

from holistic_dagster import settings
from holistic_dagster.cli import app as cli
from holistic_dagster.config.models import load_models
from holistic_dagster.config.scaleout import CelerySettings, load_celery_settings
from holistic_dagster.defs.celery import ScaleOutError, StepRouter, app_args
from holistic_dagster.errors import CatalogError
from tests.conftest import write
from tests.helpers import free_port
from tests.services import CeleryWorker, RedisServer


def test_the_embedded_default_needs_no_broker(monkeypatch):
    monkeypatch.delenv("HOLISTIC_EXECUTOR", raising=False)
    monkeypatch.delenv("DAGSTER_PG_HOST", raising=False)
    assert settings.executor() == "in_process"
    assert settings.dagster_config_file().name == "dagster.yaml"


def test_celery_needs_postgres_and_a_known_executor_name(monkeypatch):
    monkeypatch.setenv("HOLISTIC_EXECUTOR", "celery")
    monkeypatch.delenv("DAGSTER_PG_HOST", raising=False)
    with pytest.raises(CatalogError, match="HOLISTIC_EXECUTOR=celery keeps Dagster's runs .* set DAGSTER_PG_HOST"):
        settings.dagster_config_file()
    monkeypatch.setenv("DAGSTER_PG_HOST", "127.0.0.1")
    assert settings.dagster_config_file().name == "dagster.celery.yaml"
    monkeypatch.setenv("HOLISTIC_EXECUTOR", "kubernetes")
    with pytest.raises(CatalogError, match="HOLISTIC_EXECUTOR='kubernetes': expected one of in_process, celery"):
        settings.executor()


def test_the_shipped_celery_settings_load_and_the_broker_comes_only_from_the_environment(monkeypatch):
    config = load_celery_settings(settings.REPO_ROOT / "resources" / "celery.yaml")
    assert (config.cpu_queue, config.requests_queue, config.max_sends) == ("cpu", "requests", 3)
    monkeypatch.delenv("HOLISTIC_CELERY_BROKER", raising=False)
    with pytest.raises(CatalogError, match="needs a broker: set HOLISTIC_CELERY_BROKER"):
        config.broker()
    password = "pw" + "x" * 10
    monkeypatch.setenv("HOLISTIC_CELERY_BROKER", f"redis://:{password}@broker.internal:6379/0")
    assert config.backend() == config.broker()  # the result backend defaults to the broker
    assert password not in config.shown_broker() and "broker.internal:6379" in config.shown_broker()


def test_a_typo_in_the_celery_settings_names_the_file(tmp_path):
    path = write(tmp_path / "celery.yaml", "cpu_queu: cpu\n")
    with pytest.raises(CatalogError, match=f"{tmp_path}.*cpu_queu"):
        load_celery_settings(path)


def test_a_registry_queue_must_be_a_queue_name(tmp_path):
    path = write(tmp_path / "models.yaml", "models:\n  m:\n    backend: openai\n    path: m\n    queue: gpu a\n")
    with pytest.raises(CatalogError, match="queue"):
        load_models(path)


def _step(pool: str | None = None, **tags) -> SimpleNamespace:
    return SimpleNamespace(pool=pool, tags=tags, key="s")


def _run(**tags) -> SimpleNamespace:
    return SimpleNamespace(dagster_run=SimpleNamespace(tags=tags))


def test_steps_that_send_model_requests_go_to_their_models_queue_the_rest_to_the_cpu_queue(tmp_path, monkeypatch):
    write(
        tmp_path / "models.yaml",
        "models:\n  a:\n    backend: openai\n    path: a\n    queue: gpu-a\n  b:\n    backend: openai\n    path: b\n",
    )
    monkeypatch.setenv("HOLISTIC_RESOURCES", str(tmp_path))
    config = CelerySettings(cpu_queue="cpu-pool", requests_queue="http")
    on_a = StepRouter(config, _run(**{"dagster/partition/model": "a"}))
    assert on_a.queue_for(_step("model_requests")) == ("gpu-a", f"`queue` of model 'a' in {tmp_path}/models.yaml")
    assert on_a.queue_for(_step()) == ("cpu-pool", "cpu_queue in resources/celery.yaml")
    on_b = StepRouter(config, _run(**{"dagster/partition/model": "b"}))
    assert on_b.queue_for(_step("model_requests"))[0] == "http"  # no queue of its own
    judges = StepRouter(config, _run())  # arena battles, shadow answers: no model partition
    assert judges.queue_for(_step("model_requests"))[0] == "http"
    assert on_a.queue_for(_step("model_requests", **{DAGSTER_CELERY_QUEUE_TAG: "special"}))[0] == "special"


def test_an_unreachable_broker_fails_at_once_naming_the_setting(monkeypatch):
    monkeypatch.setenv("HOLISTIC_CELERY_BROKER", f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    config = CelerySettings()
    with pytest.raises(ScaleOutError, match="cannot reach the Celery broker .HOLISTIC_CELERY_BROKER=redis://127"):
        StepRouter(config, _run()).check_queue(make_app(app_args(config)), "cpu", "cpu_queue")


def test_holistic_worker_without_a_broker_says_which_variable_to_set(monkeypatch):
    monkeypatch.delenv("HOLISTIC_CELERY_BROKER", raising=False)
    result = CliRunner().invoke(cli, ["worker"])
    assert result.exit_code != 0
    assert "set HOLISTIC_CELERY_BROKER" in result.output


@pytest.mark.slow  # a Redis server and a Celery worker
def test_a_queue_no_worker_consumes_and_a_worker_from_other_code_are_refused(tmp_path, monkeypatch):
    with RedisServer(tmp_path / "redis") as redis:
        monkeypatch.setenv("HOLISTIC_CELERY_BROKER", redis.url)
        config = CelerySettings(worker_wait_s=1)
        app = make_app(app_args(config))
        router = StepRouter(config, _run())
        same = CeleryWorker("same", "cpu", {"HOLISTIC_CELERY_BROKER": redis.url}, tmp_path / "same.log")
        other_catalog = tmp_path / "assets"
        shutil.copytree(settings.catalog_dir(), other_catalog)
        write(other_catalog / "suites" / "v99.yaml", "version: v99\nscenarios: {}\n")  # another checkout's catalog
        env = {"HOLISTIC_CELERY_BROKER": redis.url, "HOLISTIC_CATALOG": str(other_catalog)}
        other = CeleryWorker("other", "gpu-old", env, tmp_path / "other.log")
        try:
            same.wait_ready()
            other.wait_ready()
            router.check_queue(app, "cpu", "cpu_queue")  # a worker of this code: no error
            with pytest.raises(ScaleOutError) as missing:
                router.check_queue(app, "gpu-z", "`queue` of model 'm'")
            assert "no Celery worker consumes queue 'gpu-z' (chosen by `queue` of model 'm')" in str(missing.value)
            assert "same@" in str(missing.value) and "holistic worker --queues gpu-z" in str(missing.value)
            with pytest.raises(ScaleOutError, match="the workers on queue 'gpu-old' run other code than this run"):
                router.check_queue(app, "gpu-old", "`queue` of model 'old'")
        finally:
            same.stop()
            other.stop()
