"""A real study with 25 policies, end to end: the tables it writes (intervals, who delayed whom),
its figures in two formats, and report.html rendered by headless Chromium with every policy in
its text and in every figure."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from qoslab.cli import EXIT_RUNS_INCOMPLETE, app
from typer.testing import CliRunner

# Three small jobs on a 16-host slimmed tree; "every assignment of the jobs to distinct levels"
# of four SLs is 24 policies, 25 with the default.
STUDY = """
name = "25 policies"
repetitions = 2

[scenario]
seed = 5
topology = { kind = "xgft", m = [4, 4], w = [1, 2] }

[[scenario.jobs]]
name = "a2a"
nodes = 4
placement = "random"
workload = { kind = "all-to-all", bytes = 8192, iterations = 2 }

[[scenario.jobs]]
name = "ring"
nodes = 4
placement = "random"
workload = { kind = "collective-loop", collective = "allreduce", bytes = 8, iterations = 20 }

[[scenario.jobs]]
name = "flood"
nodes = 4
placement = "random"
workload = { kind = "flood-pairs", iterations = 4 }

[[policies]]
kind = "default"

[[policies]]
kind = "per-job"
assignment = "all"
"""

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]

# Injected into a copy of the report (the report itself has no script): once the page has loaded,
# what the browser made of it, as JSON in a <pre> that --dump-dom prints.
PROBE = """<script>
window.addEventListener('load', () => {
  const images = [...document.images];
  const result = {images: images.length, decoded: images.filter(i => i.complete && i.naturalWidth > 0).length,
                  alts: images.map(i => i.alt), text: document.body.innerText};
  const out = document.createElement('pre');
  out.id = 'qoslab-probe';
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="module")
def study_out(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("study25")
    (folder / "study.toml").write_text(STUDY)
    out = folder / "out"
    result = CliRunner().invoke(app, ["study", str(folder / "study.toml"), "--out", str(out), "--workers", "1",
                                      "--figures", "svg"])
    assert result.exit_code == 0, result.output
    return out


def study_policies(out: Path) -> list[str]:
    return [p["name"] for p in json.loads((out / "study.json").read_text())["policies"]]


def visible_text(page: str) -> str:
    """The page's text without tags (so without alt attributes) and without embedded images."""
    body = re.sub(r"<style>.*?</style>", " ", page, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_a_study_with_25_policies_writes_intervals_interference_and_every_policy(study_out):
    policies = study_policies(study_out)
    assert len(policies) == 25 and policies[0] == "default"
    summary = pd.read_parquet(study_out / "policies.parquet").set_index("policy")
    assert set(summary.index) == set(policies)
    for column in ("total_contention_us", "total_contention_min_us", "total_contention_max_us", "vs_default_pct",
                   "complete_repetitions", "total_contention_ci95_low_us", "total_contention_ci95_high_us"):
        assert column in summary.columns
    complete = summary[summary["complete_repetitions"] == 2]
    assert len(complete) and (complete["total_contention_ci95_low_us"] <= complete["total_contention_us"]).all()
    assert (complete["total_contention_us"] <= complete["total_contention_ci95_high_us"]).all()
    slow = pd.read_parquet(study_out / "slowdown.parquet")
    assert {"repetition", "policy", "job", "slowdown", "contention_us", "complete", "slowdown_mean", "slowdown_ci95_low",
            "slowdown_ci95_high", "slowdown_repetitions"} <= set(slow.columns)
    means = slow.groupby(["policy", "job"])["slowdown"].mean()
    given = slow.groupby(["policy", "job"])["slowdown_mean"].first()
    assert np.allclose(means.to_numpy(), given.reindex(means.index).to_numpy(), equal_nan=True)

    interference = pd.read_parquet(study_out / "interference.parquet")
    jobs = {"a2a", "ring", "flood"}
    assert set(interference["policy"]) == set(policies)
    assert set(interference["kind"]) <= {"output", "buffer"} and set(interference["victim"]) <= jobs
    assert (interference["wait_ns"] > 0).all()

    page = (study_out / "report.html").read_text()
    text = visible_text(page)
    alts = [html.unescape(a) for a in re.findall(r'<img alt="([^"]*)"', page)]
    assert len(alts) >= 8  # slowdown, ranking, two interference, utilisation, per-rank, a CDF per job
    for policy in policies:
        assert policy in text, policy
        for alt in alts:
            assert policy in alt, (policy, alt[:60])
    assert "Who delayed whom" in text and "Link utilisation per level and VL" in text
    assert "95% confidence interval" in text
    pngs = sorted((study_out / "figures").glob("*.png"))
    assert len(pngs) == len(alts)
    for png in pngs:
        assert png.with_suffix(".svg").stat().st_size > 0
        assert not png.with_suffix(".pdf").exists()  # only what was asked for


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_report_renders_in_headless_chromium_with_every_policy(request, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium on PATH: scripts/install-browser installs Debian's chromium")
    study_out = request.getfixturevalue("study_out")  # only once there is a browser to show it
    page = (study_out / "report.html").read_text()
    probed = tmp_path / "probe.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"))
    flags = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
                         check=False, capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="qoslab-probe">(.*?)</pre>', dom.stdout, re.DOTALL)
    assert found, "the page did not finish loading in the browser"
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["images"] == page.count("<img ") and probe["decoded"] == probe["images"]
    for policy in study_policies(study_out):
        assert policy in probe["text"], policy
        assert all(policy in alt for alt in probe["alts"]), policy

    shot = tmp_path / "report.png"
    taken = subprocess.run([*flags, "--window-size=1200,3000", f"--screenshot={shot}", (study_out / "report.html").as_uri()],
                           check=False, capture_output=True, text=True, timeout=180)
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    from PIL import Image  # matplotlib's own dependency

    with Image.open(shot) as image:
        assert image.size == (1200, 3000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is None or len(colours) > 200  # text, tables and figures, not a blank page


def test_a_study_whose_runs_all_hit_their_time_limit_says_so_instead_of_nan(tmp_path):
    from qoslab.cli import app
    from typer.testing import CliRunner

    (tmp_path / "study.toml").write_text(
        'repetitions = 2\n[scenario]\n[scenario.topology]\nkind = "single-switch"\nhosts = 4\n'
        '[scenario.run]\nduration_us = 1\n[[scenario.jobs]]\nname = "a"\nnodes = 2\n'
        'workload = {kind = "all-to-all", bytes = 65536, iterations = 4}\n[[scenario.jobs]]\nname = "b"\nnodes = 2\n'
        'workload = {kind = "all-to-all", bytes = 65536, iterations = 4}\n'
        '[[policies]]\nkind = "default"\n[[policies]]\nkind = "per-job"\nassignment = "all"\n')
    result = CliRunner().invoke(app, ["study", str(tmp_path / "study.toml"), "--out", str(tmp_path / "o"), "--workers", "1"])
    # Runs that did not complete exit non-zero (docs/python-api.md said so; the command exited 0).
    assert result.exit_code == EXIT_RUNS_INCOMPLETE, result.output
    assert "30 of 30 runs did not complete" in " ".join(result.stderr.split())
    page = (tmp_path / "o" / "report.html").read_text()
    assert "No repetition completed" in page and "nan us" not in page and "None, runs" not in page
    assert "of the 26 shared and 4 alone runs, 30 ended at the time limit" in page and "Give the runs more time" in page


def test_a_study_whose_shared_runs_all_deadlock_says_they_deadlocked_and_gives_no_impact_figure(tmp_path):
    # Every shared run deadlocked (minhop round a ring, tests/test_dragonfly.py); the report said they
    # had all ended at their time limit and advised more time, the command exited 0, and the
    # congestion-impact table gave 0 from the iterations the deadlocked runs got through.
    from qoslab.cli import app
    from test_dragonfly import ring_net
    from typer.testing import CliRunner

    (tmp_path / "ring.net").write_text(ring_net())
    (tmp_path / "scenario.toml").write_text(
        'seed = 1\n[topology]\nkind = "ibnetdiscover"\npath = "ring.net"\n[fabric]\ndata_vls = 1\nvl_buffer_bytes = 4160\n'
        '[[jobs]]\nname = "a2a"\nnodes = 5\nplacement = "random"\n'
        'workload = { kind = "all-to-all", bytes = 262144, iterations = 3 }\n'
        '[[jobs]]\nname = "flood"\nnodes = 5\nplacement = "random"\nworkload = { kind = "flood-pairs", iterations = 20 }\n'
        '[[traffic]]\nload = "saturate"\n')
    (tmp_path / "study.toml").write_text('scenario = "scenario.toml"\nrepetitions = 2\n[[policies]]\nkind = "default"\n')
    result = CliRunner().invoke(app, ["study", str(tmp_path / "study.toml"), "--out", str(tmp_path / "o"), "--workers", "1"])
    assert result.exit_code == EXIT_RUNS_INCOMPLETE, result.output
    runs = pd.read_parquet(tmp_path / "o" / "runs.parquet")
    assert set(runs[runs["mode"] == "shared"]["status"]) == {"deadlock"}
    assert set(runs[runs["mode"] == "alone"]["status"]) == {"completed"}
    page = (tmp_path / "o" / "report.html").read_text()
    assert "of the 2 shared and 4 alone runs, 2 deadlocked" in page
    assert "time limit" not in page.split("<h2>How the metrics")[0].split("Runs that did not complete")[0]
    impact = page.split("Congestion impact (GPCNeT")[1].split("</table>")[0]
    cells = re.findall(r"<td>([^<]*)</td>", impact)
    assert cells == ["flood", "default", "–", "–"], cells
