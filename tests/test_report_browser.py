"""The report in a real browser: Debian's chromium + chromedriver driven by selenium (no browser download).

Each page (single-device, joint, layouts) must load with no console error; a click on a frontier point must show
that point's architecture in the detail panel, read back against ``rooflaw report --json`` and against
``rooflaw evaluate --json`` of that architecture; the table sorts; a screenshot is saved (``ROOFLAW_SCREENSHOT_DIR``
or the test's temporary folder). Skips, saying why, where chromium, its driver or selenium is missing; ``.ci/run``
installs them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from cli_helpers import run_cli, space_file

pytest.importorskip("plotly", reason="the report extra (plotly) is not installed")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
)

DEVICE = "jetson-orin-nano-8gb"
ARCH = ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k")


@pytest.fixture(scope="module")
def driver():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1500,1500",
              "--disable-extensions", "--no-first-run"):  # fmt: skip
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    drv.set_page_load_timeout(60)
    drv.set_script_timeout(30)
    try:
        yield drv
    finally:
        drv.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    where = os.environ.get("ROOFLAW_SCREENSHOT_DIR")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def console_errors(drv) -> list[str]:
    """Console messages at level SEVERE (errors, uncaught exceptions, failed loads) since the last call."""
    return [e["message"] for e in drv.get_log("browser") if e["level"] == "SEVERE"]


def open_page(drv, path: Path, n_points: int) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    drv.get(path.resolve().as_uri())
    WebDriverWait(drv, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#points-table tbody tr")) == n_points)
    WebDriverWait(drv, 30).until(lambda d: d.find_element(By.ID, "detail-id").text not in ("", "—"))


def click_point(drv, point_id: int) -> None:
    """Move the mouse onto the frontier marker of ``point_id`` and click, as a user does: Plotly's plot area takes
    the click and reports the nearest point."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # the marker's trace and index within it (one trace per colour group; customdata holds the point ids)
    where = drv.execute_script(
        "const gd = document.getElementById('frontier-plot');"
        "for (let t = 0; t < gd.data.length; t++) { const c = gd.data[t].customdata || [];"
        "  const i = c.indexOf(arguments[0]); if (i >= 0) return [t, i]; } return null;",
        point_id,
    )
    assert where is not None
    traces = drv.find_elements(By.CSS_SELECTOR, "#frontier-plot .scatterlayer .trace")
    marker = traces[where[0]].find_elements(By.CSS_SELECTOR, ".points path")[where[1]]
    ActionChains(drv).move_to_element(marker).pause(0.3).click().perform()
    WebDriverWait(drv, 10).until(lambda d: d.find_element(By.ID, "detail-id").text == str(point_id))


def detail_arch(drv) -> dict[str, int]:
    from selenium.webdriver.common.by import By

    cells = drv.find_elements(By.CSS_SELECTOR, "#detail-arch td[data-field]")
    return {c.get_attribute("data-field"): c.text for c in cells}


def seconds(text: str) -> float:
    """``'484 ms'`` -> 0.484 (the page's time format)."""
    m = re.fullmatch(r"([\d.]+) (s|ms|µs)", text.strip())
    assert m is not None, text
    return float(m.group(1)) * {"s": 1.0, "ms": 1e-3, "µs": 1e-6}[m.group(2)]


def make_report(capsys, tmp_path, name: str, *args) -> tuple[Path, dict]:
    out = tmp_path / f"{name}.html"
    code, text, err = run_cli(capsys, "report", *args, "--n-jobs", "1", "--out", out, "--json")
    assert code == 0, err
    return out, json.loads(text)


def check_page(drv, capsys, path: Path, data: dict, shots: Path, name: str) -> None:
    from selenium.webdriver.common.by import By

    console_errors(drv)  # drop what an earlier page left
    open_page(drv, path, len(data["points"]))
    assert console_errors(drv) == []
    pts = data["points"]
    # the page opens on the lowest-loss point; click another one, away from it
    start = min(pts, key=lambda p: (p["loss"], p["id"]))["id"]
    target = 0 if start != 0 else len(pts) - 1
    click_point(drv, target)
    shown = detail_arch(drv)
    want = {k: str(pts[target][k]) for k in ARCH}
    assert {k: shown[k] for k in ARCH} == want
    assert drv.find_element(By.ID, "detail-spec").text.replace("\n", "") == pts[target]["spec"]
    # the figures shown are those `rooflaw evaluate --json` prints for that architecture (to the 3 digits shown)
    if data["kind"] != "layouts":
        code, text, err = run_cli(capsys, "evaluate", "--device", DEVICE, "--arch", pts[target]["spec"],
                                  "--precision", pts[target].get("precision", "fp16"), "--batch",
                                  pts[target].get("batch", 1), "--json")  # fmt: skip
        assert code == 0, err
        ev = json.loads(text)
        cell = drv.find_element(By.CSS_SELECTOR, "#detail-figures td[data-field=decode_s]").text
        assert abs(seconds(cell) / ev["decode_s"] - 1) < 5e-3, (cell, ev["decode_s"])
        assert drv.find_elements(By.CSS_SELECTOR, "#roofline-plot .scatterlayer .points path")
        assert drv.find_elements(By.CSS_SELECTOR, "#breakdown-plot .barlayer .point")
    assert f"frontier point {target} of {len(pts)}" in drv.find_element(By.ID, "detail-explain").text
    # the table sorts by loss, both ways, and a row click shows that row's point
    header = drv.find_element(By.CSS_SELECTOR, "#points-table thead th[data-key=loss]")
    header.click()
    first = drv.find_element(By.CSS_SELECTOR, "#points-table tbody tr").get_attribute("data-id")
    assert int(first) == min(pts, key=lambda p: (p["loss"], p["id"]))["id"]
    header.click()
    rows = drv.find_elements(By.CSS_SELECTOR, "#points-table tbody tr")
    assert int(rows[0].get_attribute("data-id")) == max(pts, key=lambda p: (p["loss"], -p["id"]))["id"]
    rows[1].click()
    assert drv.find_element(By.ID, "detail-id").text == rows[1].get_attribute("data-id")
    drv.execute_script("window.scrollTo(0, 0)")
    drv.save_screenshot(str(shots / f"report-{name}.png"))
    assert console_errors(drv) == []


def test_single_device_report_in_chromium(driver, capsys, tmp_path, shots):
    path, data = make_report(capsys, tmp_path, "single", "--device", DEVICE, "--latency-budget", "300ms")
    assert data["kind"] == "single" and len(data["points"]) > 20
    check_page(driver, capsys, path, data, shots, "single")


def test_error_bands_are_shown_when_the_data_has_them(driver, tmp_path, shots):
    """A cost model that gives bands (``bands`` or ``*_band`` keys of the evaluation) gets them in the detail."""
    import rooflaw as rl

    prob = rl.Problem(law=rl.get_law("paper-2602.10377"), device=rl.get_device(DEVICE),
                      space=rl.get_space(str(space_file(tmp_path))), allow_extrapolation=True)  # fmt: skip
    data = rl.report_data(prob, rl.frontier(prob, n_jobs=1, cloud=0))
    assert all(d["bands"] == {} for d in data["details"].values())  # today's cost model gives none
    start = min(data["points"], key=lambda p: (p["loss"], p["id"]))["id"]
    dec = data["details"][str(start)]["evaluate"]["decode_s"]
    data["details"][str(start)]["bands"] = {"decode_s": [0.8 * dec, 1.25 * dec]}
    path = rl.write_report(data, tmp_path / "bands.html")
    console_errors(driver)
    open_page(driver, path, len(data["points"]))
    from selenium.webdriver.common.by import By

    cells = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#bands-table td, #bands-table th")]
    assert cells[0] == "decode_s"
    lo, hi = (seconds(x) for x in cells[1].split(" – "))
    assert abs(lo / (0.8 * dec) - 1) < 5e-3 and abs(hi / (1.25 * dec) - 1) < 5e-3
    assert console_errors(driver) == []


def test_joint_report_in_chromium(driver, capsys, tmp_path, shots):
    tiny = space_file(tmp_path)
    path, data = make_report(capsys, tmp_path, "joint", "--device", DEVICE, "--space", tiny, "--allow-extrapolation",
                             "--precisions", "fp16,int8", "--batches", "1,4",
                             "--objectives", "loss,latency,throughput")  # fmt: skip
    assert data["kind"] == "joint" and len({(p["precision"], p["batch"]) for p in data["points"]}) >= 2
    check_page(driver, capsys, path, data, shots, "joint")


def test_layout_report_in_chromium(driver, capsys, tmp_path, shots):
    tiny = space_file(tmp_path)
    path, data = make_report(capsys, tmp_path, "layouts", "--device", "h100-sxm", "--space", tiny,
                             "--allow-extrapolation", "--precision", "bf16", "--batch", "8", "--system", "h100-sxm:8",
                             "--layouts", "tp=1;tp=2")  # fmt: skip
    assert data["kind"] == "layouts" and len({p["option"] for p in data["points"]}) == 2
    check_page(driver, capsys, path, data, shots, "layouts")
