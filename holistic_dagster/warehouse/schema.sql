-- holistic-dagster results warehouse (DuckDB). One row per thing; every row carries the keys of the rows it
-- came from, so any score joins back to its completion, prompt, instance and source file (view `lineage`).
-- Partition keys: version (suite version), scenario, model. Each stage replaces its partition atomically.

CREATE TABLE IF NOT EXISTS schema_info (key VARCHAR PRIMARY KEY, value VARCHAR);

-- Upstream files (or generators) that instances were read from, with their checksum.
CREATE TABLE IF NOT EXISTS source_files (
    version VARCHAR NOT NULL, scenario VARCHAR NOT NULL,
    uri VARCHAR NOT NULL,            -- local path, or generator://name?params
    sha256 VARCHAR NOT NULL, revision VARCHAR NOT NULL, num_bytes BIGINT,
    PRIMARY KEY (version, scenario, uri)
);

-- The suite version's sample: evaluated (split = 'test') and few-shot pool (split = 'train') instances.
CREATE TABLE IF NOT EXISTS instances (
    version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, instance_id VARCHAR NOT NULL,
    split VARCHAR NOT NULL, subset VARCHAR NOT NULL, input VARCHAR NOT NULL,
    "references" JSON NOT NULL,      -- [{"output": str, "correct": bool}, ...]
    num_correct_references INTEGER NOT NULL, is_multiple_choice BOOLEAN NOT NULL,
    source_uri VARCHAR NOT NULL, record VARCHAR NOT NULL,   -- file and record (line/row) it came from
    PRIMARY KEY (version, scenario, instance_id)
);

-- Rendered requests. request_id hashes the prompt, continuation and decoding parameters.
CREATE TABLE IF NOT EXISTS prompts (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL,
    instance_id VARCHAR NOT NULL, request_id VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,           -- generate | score
    adapter_method VARCHAR NOT NULL, template VARCHAR NOT NULL,
    prompt VARCHAR NOT NULL, continuation VARCHAR NOT NULL,
    choice_index INTEGER, is_null_context BOOLEAN NOT NULL,
    max_tokens INTEGER NOT NULL, temperature DOUBLE NOT NULL, stop JSON NOT NULL,
    num_train_instances INTEGER NOT NULL, truncated BOOLEAN NOT NULL, num_prompt_tokens INTEGER NOT NULL,
    PRIMARY KEY (model, version, scenario, instance_id, request_id)
);

-- How results were produced: backend, model revision, batch size, decoding, hardware, libraries, run.
CREATE TABLE IF NOT EXISTS provenance (
    provenance_id VARCHAR PRIMARY KEY, model VARCHAR NOT NULL, backend VARCHAR NOT NULL,
    model_path VARCHAR, model_revision VARCHAR NOT NULL, batch_size INTEGER, max_context INTEGER,
    decoding JSON NOT NULL, hardware VARCHAR, library_versions JSON NOT NULL,
    dagster_run_id VARCHAR, created_at TIMESTAMP NOT NULL
);

-- Raw model output: one row per distinct request.
CREATE TABLE IF NOT EXISTS completions (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, request_id VARCHAR NOT NULL,
    text VARCHAR NOT NULL, tokens JSON NOT NULL, logprobs JSON NOT NULL, logprob DOUBLE NOT NULL,
    num_prompt_tokens INTEGER NOT NULL, num_completion_tokens INTEGER NOT NULL, latency_s DOUBLE NOT NULL,
    finish_reason VARCHAR NOT NULL, error VARCHAR NOT NULL, provenance_id VARCHAR NOT NULL,
    PRIMARY KEY (model, version, scenario, request_id)
);

-- Completions cached by model identity (backend, path, revision) and request id, written as each batch
-- finishes: a deterministic request is never sent twice, and a run killed part-way resumes where it stopped.
-- Failed requests are not cached. sample_index tells apart samples of one sampled (temperature > 0) request.
CREATE TABLE IF NOT EXISTS completion_cache (
    model_key VARCHAR NOT NULL, request_id VARCHAR NOT NULL, sample_index INTEGER NOT NULL,
    text VARCHAR NOT NULL, tokens JSON NOT NULL, logprobs JSON NOT NULL, logprob DOUBLE NOT NULL,
    num_prompt_tokens INTEGER NOT NULL, num_completion_tokens INTEGER NOT NULL, latency_s DOUBLE NOT NULL,
    finish_reason VARCHAR NOT NULL, provenance_id VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (model_key, request_id, sample_index)
);

-- top-k alternatives per generated token (where the backend gives them); added after schema version 1
ALTER TABLE completions ADD COLUMN IF NOT EXISTS top_logprobs JSON DEFAULT '[]';
ALTER TABLE completion_cache ADD COLUMN IF NOT EXISTS top_logprobs JSON DEFAULT '[]';

-- One row per model x version x scenario x instance x metric.
CREATE TABLE IF NOT EXISTS instance_scores (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, instance_id VARCHAR NOT NULL,
    metric VARCHAR NOT NULL, family VARCHAR NOT NULL, value DOUBLE NOT NULL,
    request_id VARCHAR NOT NULL,     -- the request whose completion carries the prediction
    prediction VARCHAR NOT NULL, provenance_id VARCHAR NOT NULL,
    PRIMARY KEY (model, version, scenario, instance_id, metric)
);

-- Scenario-level values (means, calibration, throughput) with the number of instances behind them.
CREATE TABLE IF NOT EXISTS scenario_metrics (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL,
    metric VARCHAR NOT NULL, family VARCHAR NOT NULL, value DOUBLE, count INTEGER NOT NULL,
    provenance_id VARCHAR NOT NULL,
    PRIMARY KEY (model, version, scenario, metric)
);

CREATE OR REPLACE VIEW scores AS
SELECT s.model, s.version, s.scenario, s.instance_id, s.metric, s.family, s.value, s.prediction, s.request_id,
       p.backend, p.model_revision, p.batch_size, p.decoding, p.hardware, p.library_versions, p.dagster_run_id
FROM instance_scores s JOIN provenance p USING (provenance_id);

CREATE OR REPLACE VIEW leaderboard AS
SELECT m.version, m.scenario, m.family, m.metric, m.model, m.value, m.count, p.model_revision, p.backend
FROM scenario_metrics m JOIN provenance p USING (provenance_id);

CREATE OR REPLACE VIEW lineage AS
SELECT s.model, s.version, s.scenario, s.instance_id, s.metric, s.family, s.value, s.prediction,
       s.request_id, c.text AS completion_text, c.logprob AS completion_logprob, c.finish_reason,
       pr.prompt, pr.continuation, pr.adapter_method, pr.num_train_instances, pr.truncated,
       i.input AS instance_input, i."references", i.split, i.record AS source_record,
       f.uri AS source_uri, f.sha256 AS source_sha256, f.revision AS source_revision,
       pv.backend, pv.model_revision, pv.dagster_run_id
FROM instance_scores s
JOIN completions c ON c.model = s.model AND c.version = s.version AND c.scenario = s.scenario
                  AND c.request_id = s.request_id
JOIN prompts pr ON pr.model = s.model AND pr.version = s.version AND pr.scenario = s.scenario
               AND pr.instance_id = s.instance_id AND pr.request_id = s.request_id
JOIN instances i ON i.version = s.version AND i.scenario = s.scenario AND i.instance_id = s.instance_id
JOIN source_files f ON f.version = i.version AND f.scenario = i.scenario AND f.uri = i.source_uri
JOIN provenance pv ON pv.provenance_id = s.provenance_id;
