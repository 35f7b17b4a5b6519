"""Retakes the documentation's pictures from the demo's own results: docs/images/report.png (the report's first
screen) and docs/images/ui.png (the Dagster UI's asset chain of one scenario, with the demo's runs), so that what
README.md shows is what `scripts/demo` gives. Run `scripts/demo` first, then, from the project root:

    .venv/bin/python scripts/docs_pictures.py [--out docs/images]

It reads the deployment the demo used (the default warehouse and Dagster home, or HOLISTIC_WAREHOUSE and
DAGSTER_HOME), opens the newest suite's report in Debian's Chromium (headless, as the browser tests do), then starts
`dagster dev` on a free loopback port over the same warehouse and home, photographs MMLU's asset chain, and stops it.
The browser tests keep their own pictures of a test suite the same way (HOLISTIC_DOCS_PICTURES, tests/helpers.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from holistic_dagster import settings  # noqa: E402
from holistic_dagster.config.deployment import Deployment  # noqa: E402
from holistic_dagster.results.leaderboard import report_path  # noqa: E402
from tests.defs.dagster_dev import dagster_dev  # noqa: E402
from tests.helpers import chromium_page  # noqa: E402


def report_picture(report: Path, out: Path) -> None:
    with chromium_page(1400, 1000) as page:
        page.goto(f"file://{report}")
        page.locator("table.headline").first.wait_for(timeout=30_000)
        page.screenshot(path=str(out))


def ui_picture(deployment: Deployment, out: Path) -> None:
    home = settings.prepare_dagster_home(deployment.dagster_home)
    env = {"HOLISTIC_WAREHOUSE": str(deployment.warehouse_path), "DAGSTER_HOME": str(home)}
    with tempfile.TemporaryDirectory() as scratch, dagster_dev(env, Path(scratch) / "dagster_dev.log") as (port, where):
        with chromium_page() as page:
            # one scenario's group: its chain dataset -> prompts -> completions -> scores, with the demo's runs
            page.goto(f"http://127.0.0.1:{port}/locations/{where}/asset-groups/mmlu", wait_until="domcontentloaded")
            for text in ("dataset", "prompts", "completions", "scores"):
                page.get_by_text(text, exact=True).first.wait_for(timeout=90_000)
            # each node's materializations and checks, read from the instance after the graph is drawn
            page.wait_for_function("() => !document.body.innerText.includes('Loading')", timeout=90_000)
            skip = page.get_by_role("button", name="Skip")  # Dagster's first-visit newsletter dialog
            if skip.count():
                skip.first.click()
            page.screenshot(path=str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    deployment = Deployment()
    version = deployment.catalog().newest_version()
    report = report_path(deployment.warehouse(), version)
    if not Path(report).exists():
        raise SystemExit(f"no report for suite {version} at {report}: run scripts/demo first")
    args.out.mkdir(parents=True, exist_ok=True)
    report_picture(Path(report), args.out / "report.png")
    ui_picture(deployment, args.out / "ui.png")
    print(f"written: {args.out / 'report.png'}, {args.out / 'ui.png'}")
    print(f"from {deployment.warehouse_path}, suite {version}")


if __name__ == "__main__":
    main()
