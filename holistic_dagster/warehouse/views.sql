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
