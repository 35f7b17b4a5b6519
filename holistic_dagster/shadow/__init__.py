"""Shadow evaluation on production traffic, a feature of its own: reading traffic logs (`traffic`), removing personal
data before anything is stored or sent (`pii`), and the independent detector the `pii_removed` check runs
(`pii_check`). Its configuration is config/shadow.py, its stages stages/shadow.py, its Dagster wiring defs/shadow.py."""

from holistic_dagster.shadow.traffic import Quarantined, TrafficRecord, log_key, read_traffic

__all__ = ["Quarantined", "TrafficRecord", "log_key", "read_traffic"]
