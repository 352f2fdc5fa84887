"""The summary page in headless Chromium: the steady-state timeline is what shows, the whole run
is folded behind one click, and the marker tree table sorts by self and total.

The page is that of a real run whose first 1.5 s are a slow import (see
tests/analysis/test_steady_timeline.py); a screenshot lands in ``traces/screenshots/``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ncompass.analysis.html_page import render_html
from ncompass.analysis.summary import summarize_trace
from tests.analysis.test_steady_timeline import slow_start  # noqa: F401 - the real run
from tests.browser.test_pages import _run, _screenshot

pytestmark = pytest.mark.browser

# Leave on <body>: the drawn height of the steady timeline, whether the whole one is hidden
# (and shown once opened), and the tree's "self" column after a click on its header.
_CHECK = """<script>
(function () {
  var steady = document.querySelector(".steady-timeline svg").getBoundingClientRect();
  var details = document.querySelector(".whole-timeline");
  var whole = details.querySelector("svg");
  var hidden = !whole.checkVisibility();
  details.open = true;  // one click away: opened, it is drawn
  var opened = whole.checkVisibility();
  var table = document.querySelector("table.marker-tree");
  var header = Array.prototype.find.call(table.tHead.rows[0].cells, function (cell) {
    return cell.textContent === "self";
  });
  header.click();
  var sorted = Array.prototype.map.call(table.tBodies[0].rows, function (row) {
    return parseFloat(row.cells[header.cellIndex].dataset.sort);
  });
  document.body.dataset.check = JSON.stringify(
    {steady: steady.height, hidden: hidden, opened: opened, sorted: sorted});
})();
</script>"""


@pytest.fixture(scope="module")
def page(slow_start: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    html = render_html(summarize_trace(slow_start))
    path = tmp_path_factory.mktemp("page") / "summary_slow_start.html"
    path.write_text(html)
    return path


def test_the_steady_state_shows_and_the_whole_run_is_folded(page: Path, tmp_path: Path) -> None:
    _screenshot(page)
    checked = tmp_path / "checked.html"
    checked.write_text(page.read_text().replace("</body>", _CHECK + "</body>"))
    done = _run(checked, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-check="([^"]*)"', done.stdout)
    assert found is not None
    check = json.loads(found.group(1).replace("&quot;", '"'))
    assert check["steady"] > 50 and check["hidden"] and check["opened"]  # folded until opened
    assert check["sorted"] == sorted(check["sorted"], reverse=True) and check["sorted"]
