"""The Dagster layer, thin: it names assets, partitions, checks, jobs, sensors and resources and calls the core.
One module per product (evaluation, summaries, arena, shadow), each returning its own definitions; definitions.py's
`build_definitions` merges them with the resources and the executor. jobs.py has the named selections the
products, the runner and the sensors share; runner.py runs a suite version from code, local.py on the CLI's
behalf; imports.py records partitions imported from HELM.
"""

# (kept free of imports: the CLI reads defs/ledger.py without loading Dagster)
