-- holistic-dagster results warehouse (DuckDB). One row per thing; every row carries the keys of the rows it
-- came from, so any score joins back to its completion, prompt, instance and source file (view `lineage`).
-- Partition keys: version (suite version), scenario, model. Each stage replaces its partition atomically.

-- The warehouse's own settings: its schema version (schema_version), which readers check.
CREATE TABLE IF NOT EXISTS schema_info (
    key VARCHAR PRIMARY KEY,   -- the setting's name (schema_version)
    value VARCHAR              -- the setting's value (the schema version: a number as text)
);

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
-- added in schema version 2: perturbed instances (robustness/fairness) point at the original they came from
ALTER TABLE instances ADD COLUMN IF NOT EXISTS perturbation VARCHAR DEFAULT '';
ALTER TABLE instances ADD COLUMN IF NOT EXISTS original_instance_id VARCHAR DEFAULT '';
ALTER TABLE instances ADD COLUMN IF NOT EXISTS metadata JSON DEFAULT '{}';

-- Which metric families apply to each scenario of a suite version (the others are "not applicable").
CREATE TABLE IF NOT EXISTS applicability (
    version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, family VARCHAR NOT NULL,
    applies BOOLEAN NOT NULL, detail VARCHAR NOT NULL,   -- e.g. the perturbations, or why it does not apply
    PRIMARY KEY (version, scenario, family)
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

-- One row per model x version x scenario x instance x family x metric. Robustness and fairness rows: on a
-- perturbed instance, its value (perturbation = the perturbation's name); on an original, the worst value
-- over it and its perturbations of that family (perturbation = 'worst').
CREATE TABLE IF NOT EXISTS instance_scores (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, instance_id VARCHAR NOT NULL,
    metric VARCHAR NOT NULL, family VARCHAR NOT NULL,
    value DOUBLE NOT NULL,           -- the instance's value of the metric (never NULL: an undefined one has no row)
    request_id VARCHAR NOT NULL,     -- the request whose completion carries the prediction
    prediction VARCHAR NOT NULL, provenance_id VARCHAR NOT NULL,
    perturbation VARCHAR NOT NULL DEFAULT '',
    scorer VARCHAR NOT NULL DEFAULT '',   -- what produced the value beyond a formula (a toxicity classifier)
    PRIMARY KEY (model, version, scenario, instance_id, family, metric)
);

-- Scenario-level values (means, calibration, throughput, bias, toxicity) with the number of instances behind
-- them. value is NULL only when the metric is undefined on these outputs; `note` then says why.
CREATE TABLE IF NOT EXISTS scenario_metrics (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL,
    metric VARCHAR NOT NULL, family VARCHAR NOT NULL, value DOUBLE, count INTEGER NOT NULL,
    provenance_id VARCHAR NOT NULL,
    perturbation VARCHAR NOT NULL DEFAULT '',   -- robustness/fairness: 'worst' or one perturbation's name
    scorer VARCHAR NOT NULL DEFAULT '', note VARCHAR NOT NULL DEFAULT '',
    PRIMARY KEY (model, version, scenario, family, metric, perturbation)
);
ALTER TABLE scenario_metrics ADD COLUMN IF NOT EXISTS estimated BOOLEAN DEFAULT false; -- the value is estimated from the anchors the model answered, not measured (efficient evaluation); count is the instances answered
ALTER TABLE scenario_metrics ADD COLUMN IF NOT EXISTS n_full INTEGER; -- estimated: the original test instances of the full draw (NULL: measured on all of them)

-- Evaluation sized to the decision (efficient/). Per suite version and scenario, what the anchors were fitted on:
-- the models with results on the scenario's whole draw (an item response model when there are at least 10 of them,
-- else a random sample), with the fit's own leave-one-model-out validation.
CREATE TABLE IF NOT EXISTS anchor_fits (
    version VARCHAR NOT NULL, scenario VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,          -- the metric estimated: the scenario's main accuracy metric
    method VARCHAR NOT NULL,          -- irt | random sample
    anchors INTEGER NOT NULL,         -- instances a model evaluated efficiently answers
    n_full INTEGER NOT NULL, seed INTEGER NOT NULL,
    level DOUBLE NOT NULL,            -- the estimates' interval level
    models JSON NOT NULL,             -- the models fitted on (each with results on every instance)
    population_hash VARCHAR NOT NULL, -- a hash of the scores fitted on: new full results make the fit stale
    interval_scale DOUBLE,            -- irt: the conformal quantile of |error| / standard error
    ability_weight DOUBLE,            -- irt: how much of the item response model's ability difference is kept
    validation JSON NOT NULL,         -- leave-one-model-out on the population: mae, mae_random, coverage, n
    fitted_at TIMESTAMP NOT NULL,
    PRIMARY KEY (version, scenario)
);
-- The anchor instances of anchor_fits, each with the share of the full draw it stands for.
CREATE TABLE IF NOT EXISTS anchor_instances (
    version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, instance_id VARCHAR NOT NULL,
    position INTEGER NOT NULL,        -- its place among the anchors (the order estimates read them in)
    weight DOUBLE NOT NULL,           -- the share of the full draw it stands for (1 / (its chance x draw size))
    PRIMARY KEY (version, scenario, instance_id)
);
-- A model evaluated on part of a scenario's draw: only the anchors (an efficient evaluation), or the first n
-- instances of a seeded order (the sequential gate's batches). Written by the prompts stage; a full evaluation
-- removes the row.
CREATE TABLE IF NOT EXISTS partial_evaluations (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL,
    n_evaluated INTEGER NOT NULL,     -- original test instances answered (the anchors)
    n_full INTEGER NOT NULL,          -- original test instances in the full draw
    fit_models JSON NOT NULL,         -- the models the anchors were fitted on ([] for a sample)
    how VARCHAR NOT NULL DEFAULT 'anchors', -- anchors (an efficient evaluation) | sample (a sequential gate's batch: the first n of a seeded order)
    PRIMARY KEY (model, version, scenario)
);
-- Full-draw values estimated from the anchors a model answered, with their interval (the estimated cells of
-- scenario_metrics; never used by paired tests, the gate or regressions).
CREATE TABLE IF NOT EXISTS estimates (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, family VARCHAR NOT NULL,
    metric VARCHAR NOT NULL, value DOUBLE NOT NULL,
    ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, -- the interval at `level`, as validated on the population
    level DOUBLE NOT NULL, n_evaluated INTEGER NOT NULL, n_full INTEGER NOT NULL,
    method VARCHAR NOT NULL,          -- irt | random sample | stratified sample (a model beyond the population, or a metric other than the main one)
    fit_models JSON NOT NULL,         -- the models the estimate was fitted on
    PRIMARY KEY (model, version, scenario, family, metric)
);

-- Cross-model summaries of a suite version (written by the leaderboard and regressions assets).
-- Every leaderboard cell with n and a seeded percentile-bootstrap 95% CI over its instances.
CREATE TABLE IF NOT EXISTS leaderboard_stats (
    version VARCHAR NOT NULL, family VARCHAR NOT NULL, scenario VARCHAR NOT NULL, metric VARCHAR NOT NULL,
    perturbation VARCHAR NOT NULL, model VARCHAR NOT NULL, value DOUBLE, n INTEGER NOT NULL,
    ci_low DOUBLE, ci_high DOUBLE, ci_note VARCHAR NOT NULL,   -- ci_note: why a cell has no CI
    bootstrap_seed INTEGER NOT NULL, bootstrap_samples INTEGER NOT NULL,
    PRIMARY KEY (version, family, scenario, metric, perturbation, model)
);
ALTER TABLE leaderboard_stats ADD COLUMN IF NOT EXISTS estimated BOOLEAN DEFAULT false; -- an estimated cell: value and CI from the anchors (table estimates), n the instances answered
ALTER TABLE leaderboard_stats ADD COLUMN IF NOT EXISTS n_full INTEGER; -- estimated: the full draw's instances
-- HELM's mean win rate per family (never across families): one headline column per scenario.
CREATE TABLE IF NOT EXISTS win_rates (
    version VARCHAR NOT NULL, family VARCHAR NOT NULL, model VARCHAR NOT NULL,
    mean_win_rate DOUBLE NOT NULL, num_columns INTEGER NOT NULL,
    PRIMARY KEY (version, family, model)
);
-- Model B against model A (e.g. a new revision against its predecessor) on the same instances: paired
-- difference of means (b - a), bootstrap CI, permutation-test p-value, verdict at alpha.
CREATE TABLE IF NOT EXISTS comparisons (
    version VARCHAR NOT NULL, model_a VARCHAR NOT NULL, model_b VARCHAR NOT NULL, scenario VARCHAR NOT NULL,
    family VARCHAR NOT NULL, metric VARCHAR NOT NULL, perturbation VARCHAR NOT NULL, n INTEGER NOT NULL,
    mean_a DOUBLE NOT NULL, mean_b DOUBLE NOT NULL, diff DOUBLE NOT NULL, ci_low DOUBLE, ci_high DOUBLE,
    p_value DOUBLE NOT NULL, verdict VARCHAR NOT NULL, alpha DOUBLE NOT NULL, seed INTEGER NOT NULL,
    PRIMARY KEY (version, model_a, model_b, scenario, family, metric, perturbation)
);

-- Output stability (asset `stability`): a seeded sample of a model's generation requests asked again past the
-- completion cache, `repeats` times; agrees: the answer equals the stored completion's text.
CREATE TABLE IF NOT EXISTS stability (
    version VARCHAR NOT NULL, model VARCHAR NOT NULL, scenario VARCHAR NOT NULL, instance_id VARCHAR NOT NULL,
    request_id VARCHAR NOT NULL, repeat INTEGER NOT NULL, text VARCHAR NOT NULL, agrees BOOLEAN NOT NULL,
    error VARCHAR NOT NULL, temperature DOUBLE NOT NULL,
    PRIMARY KEY (version, model, request_id, repeat)
);

-- Graded regression alerts (resources/alerts.yaml, asset `alerts`): each rule's grade of each model against its
-- baseline per scenario: critical | warning | ok, with the paired test behind it.
CREATE TABLE IF NOT EXISTS alerts (
    version VARCHAR NOT NULL, level VARCHAR NOT NULL, rule VARCHAR NOT NULL, model VARCHAR NOT NULL,
    baseline VARCHAR NOT NULL, scenario VARCHAR NOT NULL, family VARCHAR NOT NULL, metric VARCHAR NOT NULL,
    value DOUBLE, baseline_value DOUBLE, diff DOUBLE, ratio DOUBLE, ci_low DOUBLE, ci_high DOUBLE, p_value DOUBLE,
    n INTEGER NOT NULL, threshold VARCHAR NOT NULL, message VARCHAR NOT NULL,
    PRIMARY KEY (version, rule, model, scenario, metric)
);

-- The inputs of each step's last successful run (holistic_dagster/automation/freshness.py): an evaluation skips a step
-- whose inputs are unchanged. files: JSON [[path, size, mtime_ns], ...] of the files it read.
CREATE TABLE IF NOT EXISTS step_inputs (
    step VARCHAR NOT NULL, partition VARCHAR NOT NULL, fingerprint VARCHAR NOT NULL, files JSON NOT NULL,
    run_id VARCHAR NOT NULL, recorded_at TIMESTAMP NOT NULL,
    PRIMARY KEY (step, partition)
);

-- Alerts the alert_webhook sensor gave up posting (the receiver refused them, or failed every retry): kept here
-- so that someone can still read them, every one (two give-ups of one check with different texts are two rows);
-- error: why (never the webhook URL).
CREATE TABLE IF NOT EXISTS undelivered_alerts (
    recorded_at TIMESTAMP NOT NULL, level VARCHAR NOT NULL, title VARCHAR NOT NULL, text VARCHAR NOT NULL,
    error VARCHAR NOT NULL,
    PRIMARY KEY (recorded_at, level, title, text)
);

-- Runs imported from HELM (`holistic import-helm`): the run folder each imported (version, scenario, model)
-- partition came from, with every file's checksum (lineage, as source_files is for datasets), its run spec as
-- written (an export writes it back) and the metric its scenario is ranked by (a version of its own has no suite).
CREATE TABLE IF NOT EXISTS imported_runs (
    version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, model VARCHAR NOT NULL, run_name VARCHAR NOT NULL,
    subset VARCHAR NOT NULL, folder VARCHAR NOT NULL, files JSON NOT NULL,   -- [{name, sha256, num_bytes}]
    adapter_method VARCHAR NOT NULL, description VARCHAR NOT NULL, run_spec JSON NOT NULL,
    main_metric VARCHAR NOT NULL, provenance_id VARCHAR NOT NULL, imported_at TIMESTAMP NOT NULL,
    PRIMARY KEY (version, scenario, model, run_name)
);

-- Arena: pairwise battles between two models' stored answers to one instance, judged in both position orders.
-- judge: a registered model's name (LLM as judge), or 'human' (votes cast on `holistic vote`'s page).
-- winner: a | b | tie, or '' when a judgement gave no verdict (error says why: such a row is never a vote).
-- request_a / request_b: the judged completions (lineage to prompts and instances); judge_request_*: the
-- judge's own requests, keys of the completion cache.
CREATE TABLE IF NOT EXISTS battles (
    version VARCHAR NOT NULL, judge VARCHAR NOT NULL, battle_id VARCHAR NOT NULL,
    scenario VARCHAR NOT NULL, instance_id VARCHAR NOT NULL,
    model_a VARCHAR NOT NULL, model_b VARCHAR NOT NULL, request_a VARCHAR NOT NULL, request_b VARCHAR NOT NULL,
    tokens_a INTEGER NOT NULL, tokens_b INTEGER NOT NULL,
    a_first BOOLEAN NOT NULL,        -- the first judgement showed a's answer as "Assistant A"
    verdict_first VARCHAR NOT NULL, verdict_second VARCHAR NOT NULL,   -- a | b | tie | '' per order
    winner VARCHAR NOT NULL, consistent BOOLEAN NOT NULL, error VARCHAR NOT NULL,
    judge_request_first VARCHAR NOT NULL, judge_request_second VARCHAR NOT NULL,
    reason_first VARCHAR NOT NULL, reason_second VARCHAR NOT NULL,      -- the judge's outputs
    provenance_id VARCHAR NOT NULL,
    PRIMARY KEY (version, judge, battle_id)
);
-- People's votes on `holistic vote`'s page: a battle of the suite's schedule, shown with its two answers in an
-- order drawn per voter (shown_first: the model whose answer was "Answer 1"); model names shown only after the
-- vote. The ratings count them as the judge 'human'.
CREATE TABLE IF NOT EXISTS votes (
    version VARCHAR NOT NULL, battle_id VARCHAR NOT NULL, voter VARCHAR NOT NULL,
    scenario VARCHAR NOT NULL, instance_id VARCHAR NOT NULL,
    model_a VARCHAR NOT NULL, model_b VARCHAR NOT NULL, request_a VARCHAR NOT NULL, request_b VARCHAR NOT NULL,
    tokens_a INTEGER NOT NULL, tokens_b INTEGER NOT NULL,
    shown_first VARCHAR NOT NULL, winner VARCHAR NOT NULL,   -- a | b | tie
    voted_at TIMESTAMP NOT NULL,
    PRIMARY KEY (version, battle_id, voter)
);
-- Ratings per judge: Bradley-Terry (maximum likelihood, ties half) on the Elo scale with the suite's baseline
-- at 1000 and a bootstrap 95% CI over prompts; the same with style control (answer length); online Elo.
CREATE TABLE IF NOT EXISTS arena_ratings (
    version VARCHAR NOT NULL, judge VARCHAR NOT NULL,
    method VARCHAR NOT NULL,         -- bradley_terry | bradley_terry_style | online_elo
    model VARCHAR NOT NULL, rating DOUBLE NOT NULL, ci_low DOUBLE, ci_high DOUBLE,
    num_battles INTEGER NOT NULL, wins DOUBLE NOT NULL,   -- ties count half
    mean_answer_tokens DOUBLE NOT NULL, baseline VARCHAR NOT NULL,
    bootstrap_seed INTEGER NOT NULL, bootstrap_samples INTEGER NOT NULL, note VARCHAR NOT NULL,
    PRIMARY KEY (version, judge, method, model)
);
-- The suite's judge models as its ratings used them: each one's qualification (judge_qualifications, over all
-- sets, for the arena's template and max_tokens); an unqualified judge has battles but no ratings.
CREATE TABLE IF NOT EXISTS arena_judges (
    version VARCHAR NOT NULL, judge VARCHAR NOT NULL, qualified BOOLEAN NOT NULL,
    agreement DOUBLE, position_consistency DOUBLE, reason VARCHAR NOT NULL,
    PRIMARY KEY (version, judge)
);
-- Row model's share of wins against the column model (ties half) over their battles.
CREATE TABLE IF NOT EXISTS arena_win_rates (
    version VARCHAR NOT NULL, judge VARCHAR NOT NULL, model VARCHAR NOT NULL, opponent VARCHAR NOT NULL,
    win_rate DOUBLE NOT NULL, num_battles INTEGER NOT NULL,
    PRIMARY KEY (version, judge, model, opponent)
);

-- Shadow evaluation on production traffic (resources/shadow.yaml). One partition per traffic log file (log).
-- traffic: each logged request with production's answer, PII removed before it was stored.
CREATE TABLE IF NOT EXISTS traffic (
    log VARCHAR NOT NULL, record_id VARCHAR NOT NULL, line INTEGER NOT NULL, slice VARCHAR NOT NULL,
    messages JSON NOT NULL, prompt VARCHAR NOT NULL,
    production VARCHAR NOT NULL, production_text VARCHAR NOT NULL, production_tokens INTEGER NOT NULL,
    production_latency_s DOUBLE, logged_at VARCHAR NOT NULL, source_uri VARCHAR NOT NULL, source_sha256 VARCHAR NOT NULL,
    PRIMARY KEY (log, record_id)
);
-- a malformed record of a traffic log, kept out of the evaluation: its line and what is wrong, none of its text
CREATE TABLE IF NOT EXISTS traffic_quarantine (
    log VARCHAR NOT NULL, line INTEGER NOT NULL, reason VARCHAR NOT NULL,
    PRIMARY KEY (log, line)
);
-- a candidate model's answer to the same prompt (request_id keys the completion cache)
CREATE TABLE IF NOT EXISTS shadow_completions (
    log VARCHAR NOT NULL, record_id VARCHAR NOT NULL, model VARCHAR NOT NULL, request_id VARCHAR NOT NULL,
    prompt VARCHAR NOT NULL, text VARCHAR NOT NULL, num_completion_tokens INTEGER NOT NULL, latency_s DOUBLE NOT NULL,
    error VARCHAR NOT NULL, provenance_id VARCHAR NOT NULL,
    PRIMARY KEY (log, record_id, model)
);
-- the judge's comparison of a candidate's answer with production's, in both position orders
-- (winner: candidate | production | tie, or '' when a judgement gave no verdict: then error says why)
CREATE TABLE IF NOT EXISTS shadow_verdicts (
    log VARCHAR NOT NULL, record_id VARCHAR NOT NULL, candidate VARCHAR NOT NULL, judge VARCHAR NOT NULL,
    slice VARCHAR NOT NULL, candidate_first BOOLEAN NOT NULL,
    verdict_first VARCHAR NOT NULL, verdict_second VARCHAR NOT NULL, winner VARCHAR NOT NULL,
    consistent BOOLEAN NOT NULL, error VARCHAR NOT NULL,
    judge_request_first VARCHAR NOT NULL, judge_request_second VARCHAR NOT NULL,
    reason_first VARCHAR NOT NULL, reason_second VARCHAR NOT NULL, provenance_id VARCHAR NOT NULL,
    PRIMARY KEY (log, record_id, candidate, judge)
);
-- the candidate's win rate against production (ties half) per traffic slice ('' = all traffic), with a 95%
-- bootstrap CI over records
CREATE TABLE IF NOT EXISTS shadow_win_rates (
    log VARCHAR NOT NULL, candidate VARCHAR NOT NULL, judge VARCHAR NOT NULL, slice VARCHAR NOT NULL,
    n INTEGER NOT NULL, wins INTEGER NOT NULL, ties INTEGER NOT NULL, losses INTEGER NOT NULL,
    win_rate DOUBLE NOT NULL, ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL,
    PRIMARY KEY (log, candidate, judge, slice)
);

-- A judge model's qualification (judging/qualification.py): battles with a known answer judged in both orders with
-- the template and max_tokens it is used with; per qualification set and over all of them (source 'all', which
-- decides). judge_identity: the weights that answered (the completion cache's key). A judge that is not qualified
-- gives no ratings or win rates; its verdicts are kept.
CREATE TABLE IF NOT EXISTS judge_qualifications (
    judge VARCHAR NOT NULL, template VARCHAR NOT NULL, max_tokens INTEGER NOT NULL, source VARCHAR NOT NULL,
    judge_identity VARCHAR NOT NULL,
    battles INTEGER NOT NULL, judgements INTEGER NOT NULL, agreeing INTEGER NOT NULL, agreement DOUBLE NOT NULL,
    agreement_ci_low DOUBLE NOT NULL, agreement_ci_high DOUBLE NOT NULL,
    consistent INTEGER NOT NULL, position_consistency DOUBLE NOT NULL, no_verdict INTEGER NOT NULL,
    min_agreement DOUBLE NOT NULL, min_consistency DOUBLE NOT NULL, qualified BOOLEAN NOT NULL, reason VARCHAR NOT NULL,
    provenance_id VARCHAR NOT NULL, measured_at TIMESTAMP NOT NULL,
    PRIMARY KEY (judge, template, max_tokens, source)
);
-- each qualification battle: what the judge was shown (answer_better is the known-better one) and said
CREATE TABLE IF NOT EXISTS qualification_verdicts (
    judge VARCHAR NOT NULL, template VARCHAR NOT NULL, max_tokens INTEGER NOT NULL, battle_id VARCHAR NOT NULL,
    source VARCHAR NOT NULL, instance_id VARCHAR NOT NULL, question VARCHAR NOT NULL, reference VARCHAR NOT NULL,
    answer_better VARCHAR NOT NULL, answer_worse VARCHAR NOT NULL, better_first BOOLEAN NOT NULL,
    verdict_first VARCHAR NOT NULL, verdict_second VARCHAR NOT NULL,  -- better | worse | tie | '' per order
    consistent BOOLEAN NOT NULL, error VARCHAR NOT NULL,
    judge_request_first VARCHAR NOT NULL, judge_request_second VARCHAR NOT NULL,
    reason_first VARCHAR NOT NULL, reason_second VARCHAR NOT NULL, provenance_id VARCHAR NOT NULL,
    PRIMARY KEY (judge, template, max_tokens, battle_id)
);

-- Every per-instance score with how it was produced (instance_scores joined with provenance).
CREATE OR REPLACE VIEW scores AS
SELECT s.model, s.version, s.scenario, s.instance_id, s.family, s.metric, s.perturbation, s.value, s.prediction,
       s.scorer, s.request_id,
       p.backend, p.model_revision, p.batch_size, p.decoding, p.hardware, p.library_versions, p.dagster_run_id
FROM instance_scores s JOIN provenance p USING (provenance_id);

-- Scenario metrics per family, plus one row per (model, scenario, family) that does not apply, saying so:
-- the leaderboard has no silent holes.
CREATE OR REPLACE VIEW leaderboard AS
SELECT m.version, m.scenario, m.family, m.metric, m.perturbation, m.model, m.value, m.count,
       CASE WHEN m.value IS NULL THEN m.note ELSE '' END AS note, m.scorer, p.model_revision, p.backend,
       coalesce(m.estimated, false) AS estimated, m.n_full
FROM scenario_metrics m JOIN provenance p USING (provenance_id)
UNION ALL
SELECT a.version, a.scenario, a.family, '' AS metric, '' AS perturbation, e.model, NULL AS value, 0 AS count,
       'not applicable: ' || a.detail AS note, '' AS scorer, e.model_revision, e.backend, false AS estimated,
       NULL AS n_full
FROM applicability a
JOIN (SELECT DISTINCT m.version, m.scenario, m.model, p.model_revision, p.backend
      FROM scenario_metrics m JOIN provenance p USING (provenance_id)) e
  ON e.version = a.version AND e.scenario = a.scenario
WHERE NOT a.applies
UNION ALL
-- a metric that this release computes for other models of the scenario but that this model's scores lack: they
-- were computed before the metric existed (rows imported from HELM, which has other metrics, are left out)
SELECT s.version, s.scenario, s.family, s.metric, s.perturbation, e.model, NULL AS value, 0 AS count,
       'not computed: this metric is newer than the model''s scores on the scenario (evaluate it again)' AS note,
       '' AS scorer, e.model_revision, e.backend, false AS estimated, NULL AS n_full
FROM (SELECT DISTINCT m.version, m.scenario, m.family, m.metric, m.perturbation
      FROM scenario_metrics m JOIN provenance p USING (provenance_id) WHERE p.backend <> 'helm') s
JOIN (SELECT DISTINCT m.version, m.scenario, m.model, p.model_revision, p.backend
      FROM scenario_metrics m JOIN provenance p USING (provenance_id) WHERE p.backend <> 'helm') e
  ON e.version = s.version AND e.scenario = s.scenario
WHERE NOT EXISTS (
    SELECT 1 FROM scenario_metrics x WHERE x.version = s.version AND x.scenario = s.scenario AND x.model = e.model
      AND x.family = s.family AND x.metric = s.metric AND x.perturbation = s.perturbation);

-- One score traced to its source: score -> completion -> prompt -> instance (-> original instance) -> source file.
CREATE OR REPLACE VIEW lineage AS
SELECT s.model, s.version, s.scenario, s.instance_id, s.metric, s.family, s.perturbation, s.value, s.prediction,
       s.scorer, i.original_instance_id, s.request_id, c.text AS completion_text, c.logprob AS completion_logprob, c.finish_reason,
       pr.prompt, pr.continuation, pr.adapter_method, pr.num_train_instances, pr.truncated,
       i.input AS instance_input, i."references", i.split, i.record AS source_record,
       f.uri AS source_uri, f.sha256 AS source_sha256, f.revision AS source_revision,
       pv.backend, pv.model_revision, pv.dagster_run_id
FROM instance_scores s
JOIN completions c ON c.model = s.model AND c.version = s.version AND c.scenario = s.scenario
                  AND c.request_id = s.request_id
-- a request id names one prompt text; a worst-case row points at its perturbed instance's request
JOIN (SELECT DISTINCT ON (model, version, scenario, request_id) * FROM prompts) pr
     ON pr.model = s.model AND pr.version = s.version AND pr.scenario = s.scenario AND pr.request_id = s.request_id
JOIN instances i ON i.version = s.version AND i.scenario = s.scenario AND i.instance_id = s.instance_id
JOIN source_files f ON f.version = i.version AND f.scenario = i.scenario AND f.uri = i.source_uri
JOIN provenance pv ON pv.provenance_id = s.provenance_id;

-- Each request a priced model was billed for, once, whatever used its answer (an evaluation, a judge, shadow
-- traffic) and whichever run got it: the completion cache's answers, with the tokens the server reported, at the
-- price recorded in the provenance (the registry's `price` when it was answered); method: what asked it (the
-- decoding method, e.g. multiple_choice_joint, shadow, arena_judge); version and scenario: an evaluation that
-- used it (the first, where several did; none for a judge's or shadow request). A run's spending:
-- SELECT dagster_run_id, sum(cost_usd) FROM request_costs GROUP BY ALL
CREATE OR REPLACE VIEW request_costs AS
SELECT p.model, u.version, u.scenario, c.request_id, c.sample_index,
       json_extract_string(p.decoding, '$.method') AS method, c.num_prompt_tokens, c.num_completion_tokens,
       (c.num_prompt_tokens * CAST(json_extract(p.decoding, '$.price.input_per_million') AS DOUBLE)
        + c.num_completion_tokens * CAST(json_extract(p.decoding, '$.price.output_per_million') AS DOUBLE)) / 1e6
         AS cost_usd,
       p.dagster_run_id, c.created_at
FROM completion_cache c JOIN provenance p USING (provenance_id)
LEFT JOIN (SELECT request_id, provenance_id, min(struct_pack(v := version, s := scenario)).v AS version,
                  min(struct_pack(v := version, s := scenario)).s AS scenario
           FROM completions GROUP BY ALL) u USING (request_id, provenance_id)
WHERE json_extract(p.decoding, '$.price') IS NOT NULL;

-- HELM Safety's judgements (judging/safety.py): each judgement of a safety scenario's answer by each judge that
-- qualified (column rater: XSTest's string match, or a judge model) with the judge's request and raw output; a
-- failed judgement has no score and says why.
CREATE TABLE IF NOT EXISTS safety_ratings (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, instance_id VARCHAR NOT NULL,
    rater VARCHAR NOT NULL, rater_identity VARCHAR NOT NULL, score DOUBLE, label VARCHAR NOT NULL,
    judge_request_id VARCHAR NOT NULL, raw_output VARCHAR NOT NULL, error VARCHAR NOT NULL,
    PRIMARY KEY (model, version, scenario, instance_id, rater)
);
-- each safety judge against people on human-labelled answers of the scenario's own kind (XSTest's labels for
-- xstest), before it judged: agreement per human label (all: every answer) with its 95% Wilson interval, and Cohen's
-- kappa over the labels, on each answering model's answers (answers_of) and over all of them ('all'); a judge
-- without these rows for the scenario's kind, or below min_kappa on any model's answers of it, scores nothing
CREATE TABLE IF NOT EXISTS safety_agreement (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, rater VARCHAR NOT NULL,
    rater_identity VARCHAR NOT NULL, human_label VARCHAR NOT NULL, n INTEGER NOT NULL, agreeing INTEGER NOT NULL,
    agreement DOUBLE, kappa DOUBLE,
    scores BOOLEAN NOT NULL,   -- its kappa reached the suite's safety.min_kappa on every model's answers of the kind
    measured_at TIMESTAMP NOT NULL,
    answers_of VARCHAR NOT NULL DEFAULT 'gpt4',   -- measured before schema version 3: on GPT-4's answers alone
    measured_on VARCHAR NOT NULL DEFAULT 'xstest',   -- the kind of answers people labelled (before version 6: XSTest's)
    agreement_low DOUBLE, agreement_high DOUBLE,   -- the agreement's 95% Wilson interval (NULL before version 6)
    PRIMARY KEY (model, version, scenario, rater, measured_on, answers_of, human_label)
);

-- Columns: what a column name means in every table and view that has it, unless its own line's comment says
-- otherwise (the reference docs/reference/warehouse.md is generated from this file; a test fails on a column
-- that has no meaning here or on its line).
-- column version: the suite version (assets/suites/<version>.yaml), or the version HELM runs were imported into
-- column scenario: the scenario's name (assets/scenarios/<scenario>.yaml)
-- column model: the registered model's name (resources/models.yaml), or HELM's name for an imported one
-- column provenance_id: the provenance row: how the row was produced (backend, revision, decoding, run)
-- column family: the metric family: accuracy, calibration, robustness, fairness, bias, toxicity, efficiency, safety
-- column instance_id: the instance within the scenario and version (its subset, split and record in instances)
-- column metric: the metric's name (its family, direction and bounds are declared in holistic_dagster/metrics)
-- column value: the metric's value (NULL where it is undefined: note says why)
-- column judge: the judging model's registered name, or 'human' for people's votes
-- column error: why the request or judgement failed ('' when it did not)
-- column request_id: the request: a hash of the prompt, continuation and decoding parameters
-- column perturbation: '' for the original instance; a perturbation's name; 'worst' for the worst case over them
-- column n: the number of instances (or records) behind the value
-- column text: the model's output text
-- column log: the traffic log file (one partition per file)
-- column ci_low: the lower end of the 95% confidence interval
-- column ci_high: the upper end of the 95% confidence interval
-- column consistent: both position orders gave the same verdict
-- column num_prompt_tokens: tokens in the prompt, by the model's tokenizer (or as the server reports them)
-- column num_completion_tokens: tokens the model generated
-- column scorer: what produced the value beyond a formula (a toxicity classifier, a rater); '' for a formula
-- column model_revision: the model's revision: a checkpoint's hash, a file's sha256, or what its server reports
-- column backend: transformers | tgi | openai | llamacpp | echo | helm (imported)
-- column prompt: the prompt text exactly as sent to the model
-- column dagster_run_id: the Dagster run that produced the row
-- column agreement: the share of judgements that agree with the known or human answer
-- column reason: why, in words
-- column note: why a value is missing, or what to know about it ('' otherwise)
-- column battle_id: the battle: a hash of the version, scenario, instance and the two models
-- column model_a: the first model of the pair
-- column model_b: the second model of the pair
-- column judge_request_first: the judge's request for the first position order (a key of the completion cache)
-- column judge_request_second: the judge's request for the second position order
-- column latency_s: seconds from sending the request to its answer
-- column finish_reason: why generation stopped: stop, length, or the backend's own word
-- column adapter_method: how the instance was asked: generation, multiple_choice_joint, ... (HELM's adapters)
-- column prediction: the answer that was scored (the completion's text, or the chosen option)
-- column template: the prompt template's name
-- column max_tokens: the most tokens a request may generate
-- column method: what asked the request (its decoding method): an evaluation's adapter method, shadow, arena_judge, shadow_judge, judge_qualification
-- column record_id: the logged call's id within its log
-- column slice: the value of the traffic's slice field ('' = all traffic)
-- column level: critical | warning | ok
-- column baseline: the model compared against (arena: the model fixed at rating 1000)
-- column diff: the paired difference (candidate minus baseline, model_b minus model_a)
-- column p_value: the paired test's p-value
-- column qualified: the judge passed its qualification and its verdicts count
-- column position_consistency: the share of battles whose two position orders agree
-- column bootstrap_seed: the seed of the bootstrap resampling
-- column bootstrap_samples: the number of bootstrap resamples
-- column win_rate: the share of battles won (ties count half)
-- column request_a: model_a's judged completion (a request id of the completions table)
-- column request_b: model_b's judged completion
-- column tokens_a: model_a's answer length in tokens
-- column tokens_b: model_b's answer length in tokens
-- column winner: the verdict over both orders: a | b | tie (shadow: candidate | production | tie), '' for none
-- column tokens: the generated tokens, as a JSON list of strings
-- column logprobs: each generated token's log-probability (JSON list; empty where the backend gives none)
-- column logprob: the completion's total log-probability (for a scored continuation: the continuation's)
-- column top_logprobs: per generated token, the top alternatives with their log-probabilities (JSON)
-- column created_at: when the row was written (UTC)
-- column split: test (evaluated) or train (the few-shot pool); valid for HELM's validation instances
-- column original_instance_id: for a perturbed instance, the instance it was made from ('' for an original)
-- column source: the qualification set (truthfulqa, xstest) or 'all'
-- column agreeing: judgements that agree with the known or human answer
-- column measured_at: when the measurement was taken (UTC)
-- column count: the number of instances behind the value
-- column continuation: the text scored after the prompt (separate multiple choice, ranking, language modeling)
-- column num_train_instances: in-context examples in the prompt (after fitting it to the context window)
-- column truncated: the prompt was cut to fit the model's context window
-- column source_uri: the file (or generator) the record was read from
-- column source_sha256: the sha256 of that file
-- column temperature: the sampling temperature (0: greedy)
-- column batch_size: rows per forward pass of a local model (NULL for a server)
-- column decoding: the decoding settings and prompt format, the price where the model has one, and in_context_examples where the few-shot pool was borrowed from the evaluated file (JSON)
-- column hardware: the device that ran the model (CPU model, GPU name) or the server's address
-- column library_versions: the versions of the libraries that produced the row (JSON)
-- column reason_first: the judge's raw output for the first position order
-- column reason_second: the judge's raw output for the second position order
-- column rater: the safety judge: XSTest's refusal string match or a judge model's name
-- column rater_identity: the safety judge's weights or version (for a judge model: the completion cache's model key)
-- column candidate: the candidate model
-- column recorded_at: when the row was written (UTC)
-- column line: the line number in the log file (from 1)
-- column rule: the alert rule's name (resources/alerts.yaml)
-- column baseline_value: the baseline's value of the metric
-- column ratio: candidate over baseline (latency rules)
-- column threshold: the rule's threshold, as written in the alerts file
-- column message: the finding in words
-- column rating: the rating on the Elo scale (baseline 1000)
-- column mean_answer_tokens: the model's mean answer length in tokens over its battles
-- column opponent: the column model
-- column num_battles: battles the model took part in
-- column mean_a: model_a's mean over the shared instances
-- column mean_b: model_b's mean over the shared instances
-- column verdict: regression | improvement | no significant difference, at alpha
-- column alpha: the significance level of the verdict
-- column seed: the seed of the bootstrap and the permutation test
-- column model_key: the model's identity (backend, path, revision) that answered
-- column sample_index: which sample of a sampled request (0 for a greedy one)
-- column run_name: HELM's run name (e.g. mmlu:subject=anatomy,...)
-- column description: HELM's description of the run
-- column run_spec: HELM's run_spec.json as written (JSON)
-- column main_metric: the metric the scenario is ranked by
-- column imported_at: when the run was imported (UTC)
-- column subset: the subset (an MMLU subject, a BBQ category, a RAFT task; '' where there is none)
-- column input: the instance's input text
-- column num_correct_references: how many references are correct answers
-- column is_multiple_choice: the references are the choices of a multiple-choice question
-- column metadata: fields a metric needs beyond input and references (JSON)
-- column judge_identity: the judge's weights that answered (the completion cache's model key)
-- column battles: battles with a known answer judged
-- column judgements: judgements made (two per battle, one per order)
-- column agreement_ci_low: the lower end of agreement's Wilson 95% interval
-- column agreement_ci_high: the upper end of agreement's Wilson 95% interval
-- column no_verdict: judgements without a verdict
-- column min_agreement: the agreement the judge needed
-- column min_consistency: the position consistency the judge needed
-- column completion_text: the model's output text
-- column completion_logprob: the completion's total log-probability
-- column instance_input: the instance's input text
-- column references: the references as [{"output": str, "correct": bool}, ...]
-- column source_record: the record (line or row) of the source file
-- column source_revision: the upstream revision of the source file
-- column choice_index: which choice the request scores (separate multiple choice; NULL otherwise)
-- column is_null_context: the request scores a choice without its question (calibrated multiple choice)
-- column stop: the stop sequences (JSON list)
-- column model_path: where the weights are (a checkpoint folder, a GGUF file) or the served model's name
-- column max_context: the model's context window in tokens
-- column question: the question the judge was shown
-- column reference: the reference answer the judge was shown ('' for none)
-- column answer_better: the known-better answer
-- column answer_worse: the known-worse answer
-- column better_first: the first judgement showed the better answer as "Assistant A"
-- column cost_usd: the request's cost in US dollars at its recorded price
-- column human_label: the people's label of the answer (full compliance, full refusal, ...; 'all' for every one)
-- column kappa: Cohen's kappa between the safety judge and people over the labels
-- column score: the rating's score (NULL when the rating failed)
-- column label: the safety judge's label of the answer
-- column judge_request_id: the judge model's request (a key of the completion cache; '' for the string match)
-- column raw_output: the judge model's raw output
-- column key: the setting's name (schema_version)
-- column candidate_first: the first judgement showed the candidate's answer as "Assistant A"
-- column verdict_first: the verdict in the first position order
-- column verdict_second: the verdict in the second position order
-- column wins: records the candidate won
-- column ties: records judged a tie
-- column losses: records production won
-- column sha256: the file's sha256 (of the generator's name and parameters for generated data)
-- column revision: the upstream revision (a commit, a release, or the download's URL)
-- column num_bytes: the file's size in bytes
-- column repeat: which repeat of the request (from 0)
-- column agrees: the repeated answer equals the stored completion's text
-- column step: the step: datasets, a model's evaluation, or the summaries
-- column partition: the step's partition (version, or version and model)
-- column fingerprint: a hash of the step's inputs (code, suite, scenarios, registry entry, rows read)
-- column files: the files the step read, with size and modification time (JSON)
-- column run_id: the Dagster run of the step's last success
-- column messages: the request's messages, PII removed (JSON)
-- column production: the production model's name as logged
-- column production_text: production's answer, PII removed
-- column production_tokens: tokens in production's answer
-- column production_latency_s: production's latency as logged (NULL where not logged)
-- column logged_at: when the call was logged (UTC)
-- column title: the alert's title
-- column voter: the voter's id (from their signed invitation)
-- column voted_at: when the vote was cast (UTC)
-- column mean_win_rate: HELM's mean win rate in the family (ties count half)
-- column num_columns: the scenario columns the win rate averages over
-- column shown_first: the model whose answer was shown as "Answer 1"
-- column a_first: the first judgement showed model_a's answer as "Assistant A"
-- column uri: the local path, or generator://name?params
-- column applies: the family applies to the scenario
-- column detail: the perturbations that apply, or why the family does not apply
-- column kind: generate | score
-- column n_full: the original test instances of the scenario's full draw
-- column n_evaluated: the original test instances the model answered (the anchors)
-- column estimated: the value is estimated from the anchors a model answered, not measured on the full draw
-- column fitted_at: when the anchors were fitted (UTC)
