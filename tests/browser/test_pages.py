"""The HTML reports in headless Chromium: no console errors, the sort script works, screenshots.

Run by ``make browser-test`` (marker ``browser``); screenshots land in
``traces/screenshots/`` for a person to look at.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ncompass.analysis import summarize_trace
from ncompass.analysis.comparison import compare
from ncompass.analysis.html_page import render_html
from tests.traces.builders import shared_trace

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(__file__).resolve().parents[2] / "traces" / "screenshots"
# Appended to a copy of a page: sort the first sortable table by one column (twice: descending,
# then ascending) and leave the column's values, as the browser ordered them, on <body>.
_SORT_CHECK = """<script>
(function () {
  var table = document.querySelector("table.sortable");
  var header = Array.prototype.find.call(table.tHead.rows[0].cells, function (cell) {
    return cell.textContent.indexOf("%s") === 0;
  });
  function values() {
    return Array.prototype.map.call(table.tBodies[0].rows, function (row) {
      return parseFloat(row.cells[header.cellIndex].dataset.sort);
    });
  }
  header.click();
  var first = values();
  header.click();
  document.body.dataset.sorted = JSON.stringify([first, values()]);
})();
</script>"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium on PATH (apt-get install -y chromium)")


def _run(page: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = [
        _chromium(),
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--enable-logging=stderr",
        "--v=0",
        *options,
        page.resolve().as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _console(stderr: str) -> list[str]:
    """Console messages the page produced (uncaught errors included)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def _screenshot(page: Path) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"{page.stem}.png"
    done = _run(page, f"--screenshot={shot}", "--window-size=1400,2000")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not _console(done.stderr)
    assert shot.is_file() and shot.stat().st_size > 10_000  # a picture, not a blank page
    return shot


def _sorted_column(page: Path, column: str, folder: Path) -> list[list[float]]:
    """The column's values after one click on its header and after a second one."""
    checked = folder / f"{page.stem}.sort.html"
    checked.write_text(
        page.read_text(encoding="utf-8").replace("</body>", _SORT_CHECK % column + "</body>"),
        encoding="utf-8",
    )
    done = _run(checked, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not _console(done.stderr)
    found = re.search(r'data-sorted="([^"]*)"', done.stdout)
    assert found, "the sort check did not run"
    result: list[list[float]] = json.loads(found.group(1).replace("&quot;", '"'))
    return result


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pages")
    rank0 = shared_trace("trace_filter").with_name("sampled_rank-0.json.gz")
    rank1 = rank0.with_name("sampled_rank-1.json.gz")
    written = {
        "summary_gpu": render_html(summarize_trace(rank0)),
        "summary_cpu_only": render_html(summarize_trace(shared_trace("cpu_only"))),
        "comparison_ranks": compare([rank0], [rank1]).to_html(),
    }
    paths = {}
    for name, html in written.items():
        paths[name] = folder / f"{name}.html"
        paths[name].write_text(html, encoding="utf-8")
    return paths


@pytest.mark.parametrize("name", ["summary_gpu", "summary_cpu_only", "comparison_ranks"])
def test_page_renders_without_console_errors(pages: dict[str, Path], name: str) -> None:
    _screenshot(pages[name])


@pytest.mark.parametrize(
    ("name", "column"),
    [("summary_gpu", "total"), ("summary_cpu_only", "total"), ("comparison_ranks", "change")],
)
def test_clicking_a_header_sorts_the_table(pages: dict[str, Path], name: str, column: str) -> None:
    descending, ascending = _sorted_column(pages[name], column, pages[name].parent)
    assert descending == sorted(descending, reverse=True)
    assert ascending == sorted(ascending)
    assert sorted(descending) == ascending


def test_the_timeline_is_drawn(pages: dict[str, Path]) -> None:
    done = _run(pages["summary_gpu"], "--dump-dom")
    assert done.returncode == 0
    assert 'class="timeline"' in done.stdout and "GPU busy" in done.stdout


def test_a_broken_page_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>notDefined();</script></body></html>")
    done = _run(page, "--dump-dom")
    assert any("Uncaught ReferenceError" in line for line in _console(done.stderr))
