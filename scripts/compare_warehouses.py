"""Are two warehouses' results the same? Compares every table row by row, leaving out what differs between any
two runs by nature: run ids, timestamps, provenance ids (they hash the run id), measured latencies and what is
computed from them (runtime, throughput, the efficiency win rates), and the fingerprints of a step's inputs (they
hash this package's code).

    .venv/bin/python scripts/compare_warehouses.py BEFORE.duckdb AFTER.duckdb

Prints per table the rows compared and any difference; exits 1 when something differs. Used to check that a
refactoring left the demo's results unchanged.
"""

from __future__ import annotations

import sys

import duckdb
import pandas as pd

VOLATILE_COLUMNS = {"provenance_id", "dagster_run_id", "created_at", "latency_s"}
TIMED_METRICS = ("runtime_s", "requests_per_second", "tokens_per_second")


def table_rows(path: str, table: str) -> pd.DataFrame:
    with duckdb.connect(path, read_only=True) as con:
        frame = con.execute(f"SELECT * FROM {table}").df()
    frame = frame.drop(columns=[c for c in frame.columns if c in VOLATILE_COLUMNS])
    if "metric" in frame.columns:
        timed = frame["metric"].isin(TIMED_METRICS)
        for column in ("value", "ci_low", "ci_high"):
            if column in frame.columns:
                frame.loc[timed, column] = None
    if table == "win_rates":
        frame = frame[frame["family"] != "efficiency"]
    if table == "provenance":
        frame = frame.drop(columns=["hardware"], errors="ignore")
    if table == "step_inputs":  # what a step's inputs were: this package's code among them, and the files' times
        frame = frame.drop(columns=["fingerprint", "files", "run_id", "recorded_at"], errors="ignore")
    return frame.sort_values(list(frame.columns)).reset_index(drop=True).astype(str)


def main(before: str, after: str) -> int:
    with duckdb.connect(before, read_only=True) as con:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
    failed = False
    for table in tables:
        a, b = table_rows(before, table), table_rows(after, table)
        if list(a.columns) != list(b.columns):
            print(f"{table}: columns differ: {list(a.columns)} vs {list(b.columns)}")
            failed = True
            continue
        merged = a.merge(b, how="outer", indicator=True)
        only_a, only_b = (merged["_merge"] == "left_only").sum(), (merged["_merge"] == "right_only").sum()
        status = "identical" if not (only_a or only_b) and len(a) == len(b) else "DIFFERENT"
        print(f"{table:20s} {len(a):6d} vs {len(b):6d} rows: {status}")
        if status != "identical":
            failed = True
            print(merged[merged["_merge"] != "both"].head(10).to_string())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
