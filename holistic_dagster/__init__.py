"""holistic-dagster: holistic evaluation of language models as a Dagster data pipeline."""

__version__ = "0.1.0"
