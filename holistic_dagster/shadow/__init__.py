"""Shadow evaluation on production traffic: reading traffic logs (`traffic`), removing personal data before
anything is stored or sent (`pii`), and the independent detector the `pii_removed` check runs (`pii_check`).
The stages are in stages/shadow.py, the Dagster wiring in defs/assets.py."""

from holistic_dagster.shadow.traffic import (
    PiiSpec,
    Quarantined,
    ShadowSpec,
    TrafficRecord,
    load_shadow_spec,
    log_key,
    read_traffic,
)

__all__ = ["PiiSpec", "Quarantined", "ShadowSpec", "TrafficRecord", "load_shadow_spec", "log_key", "read_traffic"]
