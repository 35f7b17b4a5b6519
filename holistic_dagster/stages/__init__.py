"""The evaluation stages as plain functions over the warehouse, one module per stage, in the order the data
flows (and the Dagster UI shows it):

    dataset -> prompts -> completions -> scores -> summaries (leaderboard statistics, regressions, report)

Each stage reads its inputs from the warehouse, computes without holding the write lock, and replaces its own
partition in one transaction. The Dagster assets and the CLI both call these; neither computes anything
itself. Every stage receives a StageContext: where results go, the catalog, the model registry, the run.
"""

from holistic_dagster.stages.context import StageContext

__all__ = ["StageContext"]
