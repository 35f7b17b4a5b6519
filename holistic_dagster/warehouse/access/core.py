"""The core tables' accessors (tables/core.py declares them): each table's SQL in one class, which the stages, the
quality checks, the read model and the freshness records call instead of writing SQL on the table themselves.

Each accessor is bound to a store (either ResultStore) and answers in records (holistic_dagster.records, through
rows.py's mappers) where a caller wants records, or in a frame whose columns its docstring names where a caller
computes over many rows (a check, a statistic)."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Completion, Instance, Request
from holistic_dagster.warehouse.access.base import ORIGINAL_ID, Accessor, among
from holistic_dagster.warehouse.records.core import (
    ApplicabilityRow,
    CompletionCacheRow,
    CompletionsRow,
    InstancesRow,
    PromptsRow,
    SourceFilesRow,
)
from holistic_dagster.warehouse.rows import completion_from_row, instance_from_row, request_from_row
from holistic_dagster.warehouse.tables.core import (
    APPLICABILITY,
    COMPLETION_CACHE,
    COMPLETIONS,
    INSTANCES,
    PROMPTS,
    SOURCE_FILES,
)

Answers = dict[str, tuple[Completion, str]]  # request_id -> (its completion, the provenance_id it was made under)


class Instances(Accessor[InstancesRow]):
    """`instances`: a version's sample of each scenario (records: each with its source file's checksum)."""

    table = INSTANCES

    def records(self, version: str, scenario: str) -> list[Instance]:
        """A scenario's sample (few-shot pool first, then the evaluated instances), as the dataset stage stored it;
        HolisticError when it stored none."""
        frame = self._df(
            "SELECT i.*, f.sha256, f.revision, f.num_bytes FROM instances i JOIN source_files f "
            "ON f.version = i.version AND f.scenario = i.scenario AND f.uri = i.source_uri "
            "WHERE i.version = ? AND i.scenario = ? ORDER BY i.split DESC, i.instance_id",
            [version, scenario],
        )
        if frame.empty:
            raise HolisticError(
                f"no dataset for scenario {scenario!r}, version {version!r}: "
                f"materialize [{scenario}, dataset] for that version first"
            )
        return [instance_from_row(r) for r in frame.itertuples(index=False)]

    def outline(self, version: str, scenario: str) -> pd.DataFrame:
        """instance_id, split, num_correct_references, perturbation, original_instance_id, input: every instance."""
        return self._df(
            "SELECT instance_id, split, num_correct_references, perturbation, original_instance_id, input "
            "FROM instances WHERE version = ? AND scenario = ?",
            [version, scenario],
        )

    def evaluated(self, version: str, scenario: str) -> pd.DataFrame:
        """instance_id, original (its own id for an original): the evaluated instances (split 'test')."""
        return self._df(
            f"SELECT instance_id, {ORIGINAL_ID} AS original FROM instances "
            "WHERE version = ? AND scenario = ? AND split = 'test'",
            [version, scenario],
        )

    def originals(self, version: str, scenario: str) -> pd.DataFrame:
        """instance_id, input, references (JSON text): the evaluated instances that are not perturbed copies."""
        return self._df(
            'SELECT instance_id, input, "references" FROM instances WHERE version = ? AND scenario = ? '
            "AND split = 'test' AND perturbation = ''",
            [version, scenario],
        )

    def draw(self, version: str, scenario: str) -> list[str]:
        """The ids of the scenario's evaluated originals (its draw), sorted."""
        frame = self._df(
            "SELECT instance_id FROM instances WHERE version = ? AND scenario = ? AND split = 'test' "
            "AND perturbation = '' ORDER BY instance_id",
            [version, scenario],
        )
        return [str(i) for i in frame["instance_id"]]

    def draw_sizes(self, version: str) -> pd.Series:
        """{scenario: how many evaluated originals it has} for the version."""
        frame = self._df(
            "SELECT scenario, count(*) AS n FROM instances WHERE version = ? AND split = 'test' AND perturbation = '' "
            "GROUP BY scenario",
            [version],
        )
        return frame.set_index("scenario")["n"]

    def borrowed_pools(self, version: str) -> pd.DataFrame:
        """scenario, source_uri: the files whose held-out records were the few-shot pool of a scenario whose prompts
        took in-context examples, by scenario and file."""
        return self._df(
            "SELECT DISTINCT t.scenario, t.source_uri FROM instances t WHERE t.version = ? AND t.split = 'train' "
            "AND json_extract(t.metadata, '$.held_out') = 'true' AND EXISTS (SELECT 1 FROM prompts p "
            "WHERE p.version = t.version AND p.scenario = t.scenario AND p.num_train_instances > 0) ORDER BY 1, 2",
            [version],
        )

    def scored_originals(self, version: str, scenario: str, model: str) -> pd.DataFrame:
        """instance_id, split, subset, input, references, metadata: the unperturbed instances the model was scored
        on."""
        return self._df(
            'SELECT instance_id, split, subset, input, "references", metadata FROM instances WHERE version = ? AND '
            "scenario = ? AND perturbation = '' AND instance_id IN (SELECT instance_id FROM instance_scores "
            "WHERE version = ? AND scenario = ? AND model = ?)",
            [version, scenario, version, scenario, model],
        )

    def with_copies(self, version: str, originals: list[str]) -> list[InstancesRow]:
        """The originals named ("scenario<US>instance id" keys) and their perturbed copies."""
        sql = f"SELECT * FROM instances WHERE version = ? AND {among('scenario', ORIGINAL_ID)}"
        return self.table.records(self._df(sql, [version, originals]))

    def scenarios(self, version: str) -> set[str]:
        """The scenarios a version has instances of."""
        return set(self._df("SELECT DISTINCT scenario FROM instances WHERE version = ?", [version])["scenario"])


class SourceFiles(Accessor[SourceFilesRow]):
    """`source_files`: the upstream files (or generators) a version's instances were read from, with checksums."""

    table = SOURCE_FILES

    def source_uris(self, version: str) -> list[str]:
        """The upstream files (not generators) a version's instances were read from."""
        frame = self._df("SELECT uri FROM source_files WHERE version = ? AND uri NOT LIKE 'generator:%'", [version])
        return [str(u) for u in frame["uri"]]


class Applicability(Accessor[ApplicabilityRow]):
    """`applicability`: which metric families apply to a scenario."""

    table = APPLICABILITY

    def families(self, version: str, scenario: str) -> set[str]:
        frame = self._df(
            "SELECT family FROM applicability WHERE version = ? AND scenario = ? AND applies", [version, scenario]
        )
        return set(frame["family"])


class Prompts(Accessor[PromptsRow]):
    """`prompts`: the rendered requests of a model on a scenario."""

    table = PROMPTS

    def requests(self, version: str, scenario: str, model: str) -> list[Request]:
        """In instance and request order; HolisticError when the prompts stage stored none."""
        frame = self._df(
            "SELECT * FROM prompts WHERE model = ? AND version = ? AND scenario = ? ORDER BY instance_id, request_id",
            [model, version, scenario],
        )
        if frame.empty:
            raise no_prompts(version, scenario, model)
        return [request_from_row(r) for r in frame.itertuples(index=False)]

    def method(self, version: str, scenario: str, model: str) -> str:
        """The adapter method the prompts were built with (the scenario's, or a fallback)."""
        frame = self._df(
            "SELECT DISTINCT adapter_method FROM prompts WHERE model = ? AND version = ? AND scenario = ?",
            [model, version, scenario],
        )
        if frame.empty:
            raise no_prompts(version, scenario, model)
        return str(frame["adapter_method"].iat[0])

    def texts(self, version: str, scenario: str, model: str) -> pd.DataFrame:
        """instance_id, request_id, prompt: what each request asks about (its prompt, or, for language modeling's
        first window, scored after the model's start token, its continuation alone)."""
        return self._df(
            "SELECT instance_id, request_id, prompt || continuation AS prompt FROM prompts "
            "WHERE model = ? AND version = ? AND scenario = ?",
            [model, version, scenario],
        )

    def request_ids(self, version: str, scenario: str, model: str) -> list[str]:
        frame = self._df(
            "SELECT DISTINCT request_id FROM prompts WHERE model = ? AND version = ? AND scenario = ?",
            [model, version, scenario],
        )
        return [str(r) for r in frame["request_id"]]

    def of_partition(self, version: str, scenario: str, model: str) -> pd.DataFrame:
        """Every column of a model's prompts on a scenario, by instance, the unscored choice (no index) first."""
        return self._df(
            "SELECT * FROM prompts WHERE version = ? AND scenario = ? AND model = ? "
            "ORDER BY instance_id, choice_index NULLS FIRST",
            [version, scenario, model],
        )

    def request_ids_of_version(self, version: str, model: str) -> list[str]:
        """Every request of the model on the version, each once (none where the store was never written)."""
        if not self.store.path.exists():
            return []
        frame = self._df("SELECT DISTINCT request_id FROM prompts WHERE model = ? AND version = ?", [model, version])
        return [str(r) for r in frame["request_id"]]

    def still_to_send(self, version: str, model: str, scenarios: list[str], model_key: str) -> pd.DataFrame:
        """scenario, num_requests, num_cached, prompt_tokens, max_output_tokens: per scenario, the model's distinct
        requests the completion cache does not answer for `model_key` (these weights), their prompt tokens and
        max_tokens, and how many it does answer."""
        return self._df(
            "WITH distinct_requests AS (SELECT scenario, request_id, any_value(num_prompt_tokens) AS prompt_tokens, "
            "any_value(max_tokens) AS max_tokens FROM prompts WHERE model = ? AND version = ? "
            "AND scenario IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL) "
            "SELECT d.scenario, count(*) FILTER (WHERE c.request_id IS NULL) AS num_requests, "
            "count(c.request_id) AS num_cached, "
            "coalesce(sum(d.prompt_tokens) FILTER (WHERE c.request_id IS NULL), 0) AS prompt_tokens, "
            "coalesce(sum(d.max_tokens) FILTER (WHERE c.request_id IS NULL), 0) AS max_output_tokens "
            "FROM distinct_requests d LEFT JOIN "
            "(SELECT DISTINCT request_id FROM completion_cache WHERE model_key = ?) c "
            "USING (request_id) GROUP BY d.scenario ORDER BY d.scenario",
            [model, version, scenarios, model_key],
        )


def no_prompts(version: str, scenario: str, model: str) -> HolisticError:
    return HolisticError(
        f"no prompts for {scenario!r}, model {model!r}, version {version!r}: materialize [{scenario}, prompts] first"
    )


class Completions(Accessor[CompletionsRow]):
    """`completions`: a model's answers to its requests."""

    table = COMPLETIONS

    def answers(self, version: str, scenario: str, model: str) -> Answers:
        frame = self.where(model=model, version=version, scenario=scenario)
        return {r.request_id: (completion_from_row(r), r.provenance_id) for r in frame.itertuples(index=False)}

    def answered_texts(self, version: str, model: str) -> dict[tuple[str, str], str]:
        """(scenario, request_id) -> text of every request of the model that was answered."""
        frame = self._df(
            "SELECT scenario, request_id, text FROM completions WHERE model = ? AND version = ? AND error = ''",
            [model, version],
        )
        return {(r.scenario, r.request_id): r.text for r in frame.itertuples(index=False)}

    def outcomes(self, version: str, scenario: str, model: str) -> pd.DataFrame:
        """request_id, logprob, error, failed (a non-empty error): every completion."""
        return self._df(
            "SELECT request_id, logprob, error, error <> '' AS failed FROM completions WHERE model = ? "
            "AND version = ? AND scenario = ?",
            [model, version, scenario],
        )

    def generated_on_originals(self, version: str, scenarios: list[str]) -> pd.DataFrame:
        """scenario, instance_id, model, request_id, text, num_completion_tokens, input, refs (the instance's
        references, JSON text): every model's answered generation requests on the scenarios' evaluated originals,
        by scenario, instance and model."""
        return self._df(
            "SELECT p.scenario, p.instance_id, p.model, p.request_id, c.text, c.num_completion_tokens, i.input, "
            'i."references"::VARCHAR AS refs '
            "FROM prompts p JOIN completions c USING (model, version, scenario, request_id) "
            "JOIN instances i USING (version, scenario, instance_id) "
            "WHERE p.version = ? AND p.scenario IN (SELECT unnest(?::VARCHAR[])) AND p.kind = 'generate' "
            "AND i.split = 'test' AND i.perturbation = '' AND c.error = '' "
            "ORDER BY p.scenario, p.instance_id, p.model",
            [version, scenarios],
        )

    def with_prompts(self, version: str, instances: list[str]) -> list[tuple[PromptsRow, CompletionsRow]]:
        """Every model's requests of the instances named ("scenario<US>instance id" keys), each with its completion,
        by model, instance and choice."""
        frame = self._df(
            "SELECT p AS prompt, c AS completion "
            "FROM prompts p JOIN completions c USING (model, version, scenario, request_id) "
            f"WHERE p.version = ? AND {among('p.scenario', 'p.instance_id')} "
            "ORDER BY p.model, p.instance_id, p.choice_index NULLS FIRST, p.request_id",
            [version, instances],
        )  # each side a struct of its row (the two tables share column names), its values Python's own
        return [(PromptsRow(**p), CompletionsRow(**c)) for p, c in zip(frame["prompt"], frame["completion"])]

    def latencies(self, version: str, models: list[str]) -> pd.DataFrame:
        """model, scenario, request_id, latency_s of every request of the models that was answered."""
        return self._df(
            "SELECT model, scenario, request_id, latency_s FROM completions "
            "WHERE version = ? AND error = '' AND model IN (SELECT unnest(?::VARCHAR[]))",
            [version, models],
        )


class CompletionCache(Accessor[CompletionCacheRow]):
    """`completion_cache`: answers kept by the weights that gave them (model_key), across versions and runs."""

    table = COMPLETION_CACHE

    def answers(self, model_key: str, request_ids: list[str]) -> Answers:
        """The first sample of each of the requests the cache holds (none where the store was never written)."""
        if not self.store.path.exists():
            return {}
        frame = self._df(
            "SELECT * FROM completion_cache WHERE model_key = ? AND sample_index = 0 AND request_id IN "
            "(SELECT unnest(?::VARCHAR[]))",
            [model_key, request_ids],
        )
        return {r.request_id: (completion_from_row(r), r.provenance_id) for r in frame.itertuples(index=False)}

    def billed(self, model_key: str, request_ids: list[str]) -> pd.DataFrame:
        """request_id, usd: each of the requests the cache answers for `model_key` once, with what its answers cost
        at the price recorded with them in their provenance (0 where none was recorded)."""
        if not self.store.path.exists():
            return pd.DataFrame({"request_id": [], "usd": []})
        return self._df(
            f"SELECT c.request_id, sum(CASE WHEN json_extract(p.decoding, '$.price') IS NULL THEN 0 ELSE {_COST} END) "
            "AS usd FROM completion_cache c JOIN provenance p USING (provenance_id) "
            "WHERE c.model_key = ? AND c.request_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY c.request_id",
            [model_key, request_ids],
        )


# what a completion_cache row `c` cost at the price in its provenance `p`
_COST = (
    "(c.num_prompt_tokens * CAST(json_extract(p.decoding, '$.price.input_per_million') AS DOUBLE) + "
    "c.num_completion_tokens * CAST(json_extract(p.decoding, '$.price.output_per_million') AS DOUBLE)) / 1e6"
)
