"""report.html opened in a real headless browser: Debian's Chromium driven by Playwright.

Built from a stored run's files (``tests/data/report_run``: the CSV and JSON of a real
``lodevem start`` over the README's quick-start files on the tier2 profiles, see
tests/data/README.md) by the real ``lodevem report`` command, with the figures drawn from those
rows: no Docker. The page must hold one table row per CSV row, sort by latency when the header
is clicked, filter, log no console error and make no network request (everything is inline).
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import with_columns

from lodevem.cli import cli
from lodevem.report.figure_cache import write_figures
from lodevem.report.files import read_json

STORED = Path(__file__).parent / "data" / "report_run"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report_run")
    for name in ("benchmark_results.csv", "benchmark_results.json"):
        shutil.copy(STORED / name, folder / name)
    rows, _ = read_json(folder / "benchmark_results.json")
    write_figures(rows, None, folder)  # the run's figures, drawn again from its rows (matplotlib, no engine)
    result = CliRunner().invoke(cli, ["report", str(folder)])
    assert result.exit_code == 0, result.output
    assert (folder / "report.html").is_file()
    return folder / "report.html"


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


def _csv_rows() -> list[dict[str, str]]:
    with (STORED / "benchmark_results.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_page_has_every_row_sorts_filters_and_stays_offline(report: Path, browser, tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(report.as_uri())
    page.wait_for_load_state("load")

    stored = _csv_rows()
    body = page.locator("#results tbody tr")
    assert body.count() == len(stored) > 1
    assert page.locator("#count").inner_text() == f"{len(stored)} of {len(stored)} rows"
    headers = page.locator("#results thead th").all_inner_texts()
    latency = headers.index("Latency (ms)")

    def latencies() -> list[float]:
        values = page.eval_on_selector_all(
            "#results tbody tr", f"rows => rows.map(r => r.cells[{latency}].getAttribute('data-sort'))")
        return [float(v) for v in values if v is not None]

    before = latencies()
    page.locator("#results thead th").nth(latency).click()
    ascending = latencies()
    assert ascending == sorted(before) and ascending != before
    page.locator("#results thead th").nth(latency).click()
    assert latencies() == sorted(before, reverse=True)
    assert page.locator("#results thead th").nth(latency).get_attribute("aria-sort") == "descending"

    model = stored[0]["model_label"]
    page.fill("#filter", model)
    shown = sum(1 for r in stored if r["model_label"] == model)
    assert page.locator("#results tbody tr:visible").count() == shown < len(stored)
    assert page.locator("#count").inner_text() == f"{shown} of {len(stored)} rows"
    page.fill("#filter", "")
    page.select_option("#verdict", "tight")
    assert page.locator("#results tbody tr:visible").count() == sum(1 for r in stored if r["verdict"] == "tight")

    # everything inline: the figures are data: URIs, the methods and manifest are on the page
    assert page.locator("figure img").count() >= 2
    assert all(src.startswith("data:image/png;base64,")
               for src in page.eval_on_selector_all("img", "imgs => imgs.map(i => i.getAttribute('src'))"))
    text = page.inner_text("body")
    assert "Methods" in text and "held-out error" in text and "Manifest" in text and "[qemu]" in text
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert errors == []
    assert [url for url in requests if not url.startswith("data:")] == [report.as_uri()]
    page.close()


def test_user_strings_are_text_never_markup(tmp_path: Path) -> None:
    """A model file named like markup is shown as typed: escaped, never run."""

    from lodevem.report.html import report_html

    rows, environment = read_json(STORED / "benchmark_results.json")
    hostile = [with_columns(rows[0], model_label="<script>alert(1)</script>.pt", profile_label='"><img src=x>')]
    page = report_html(hostile, environment, tmp_path)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;.pt" in page
    assert '"><img src=x>' not in page
    assert "default-src 'none'" in page  # the page may load nothing from anywhere


def test_report_without_results_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "no benchmark_results.json" in result.output and "Traceback" not in result.output
