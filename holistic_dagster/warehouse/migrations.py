"""What each schema version changed beyond new tables and new columns (which the declarations' CREATE TABLE IF NOT
EXISTS and ALTER TABLE ... ADD COLUMN bring to any file by themselves): the tables whose key a version widened and
the columns it renamed. A store written by an older release is brought up to SCHEMA_VERSION by these, in order; the
declarations (warehouse/tables/) are the target, and `check` holds the migrations to them (tests run it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from holistic_dagster.warehouse.tables import Table

# 4: efficient evaluation (anchor_fits, ...); 5: request_costs from the completion cache; 6: a safety judge's
# agreement per kind of answers, with its interval; 7: the safety tables name a judge `judge`, as the code does
SCHEMA_VERSION = "7"


@dataclass(frozen=True)
class Migration:
    version: str  # the schema version that made the change
    why: str
    rekeyed: tuple[str, ...] = ()  # tables whose primary key widened: their rows are copied into the new table
    renamed: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # table -> {old column: new column}


MIGRATIONS = (
    Migration("2", "family and perturbation in the scores' keys", rekeyed=("instance_scores", "scenario_metrics")),
    Migration(
        "3",
        "every give-up of an alert with its text; a judge's agreement per answering model",
        rekeyed=("undelivered_alerts", "safety_agreement"),
    ),
    Migration("6", "a judge's agreement per kind of answers", rekeyed=("safety_agreement",)),
    Migration(
        "7",
        "the safety tables said `rater` where every other table and the code say `judge`",
        renamed={
            "safety_ratings": {"rater": "judge", "rater_identity": "judge_identity"},
            "safety_agreement": {"rater": "judge", "rater_identity": "judge_identity"},
        },
    ),
)


def pending(written_by: str | None) -> list[Migration]:
    """The migrations a store written at schema version `written_by` needs (None: a new store, none)."""
    return [m for m in MIGRATIONS if written_by and int(written_by) < int(m.version)]


def rebuilt_tables(migrations: list[Migration]) -> list[str]:
    """The tables these migrations rebuild (a new table, the old rows copied across), each once, in order."""
    return list(dict.fromkeys(t for m in migrations for t in (*m.rekeyed, *m.renamed)))


def renames(migrations: list[Migration], table: str) -> dict[str, str]:
    """{old column: its name now} for one table, over these migrations (a column renamed twice: its last name)."""
    names: dict[str, str] = {}
    for m in migrations:
        for old, new in m.renamed.get(table, {}).items():
            names = {k: (new if v == old else v) for k, v in names.items()}
            names[old] = new
    return names


def check(tables: Mapping[str, Table]) -> list[str]:
    """What in the migrations disagrees with the declarations: a table no longer declared, a renamed column whose new
    name the table does not declare or whose old name it still does, versions out of order or past SCHEMA_VERSION."""
    problems = []
    versions = [int(m.version) for m in MIGRATIONS]
    if versions != sorted(set(versions)) or versions[-1] > int(SCHEMA_VERSION):
        problems.append(f"migration versions {versions} are not increasing up to SCHEMA_VERSION {SCHEMA_VERSION}")
    for m in MIGRATIONS:
        for name in rebuilt_tables([m]):
            if name not in tables:
                problems.append(f"version {m.version}: table {name} is not declared")
        for name, columns in m.renamed.items():
            declared = set(tables[name].column_names) if name in tables else set()
            for old, new in columns.items():
                if new not in declared and new == renames(list(MIGRATIONS), name).get(old, new):
                    problems.append(f"version {m.version}: {name}.{new} (was {old}) is not declared")
                if old in declared:
                    problems.append(f"version {m.version}: {name}.{old} was renamed to {new} but is still declared")
    return problems
