"""Figures and report.html from hand-made tables (they never simulate)."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.colors import to_hex
from qoslab.analysis import (
    interference_matrix,
    policy_summary,
    slowdowns,
    vl_utilisation,
)
from qoslab.cli import app
from qoslab.plots import (
    interference_figure,
    latency_cdf,
    policy_ranking,
    policy_styles,
    rank_timing_map,
    slowdown_bars,
    slowdown_heatmap,
    utilisation_figure,
)
from qoslab.report import write_report
from qoslab.sweep.iterations import IterationsFile
from typer.testing import CliRunner


def tables():
    jobs, iterations, runs = [], [], []
    runtimes = {"alone": {"a": 100.0, "b": 200.0}, "default": {"a": 150.0, "b": 320.0}, "prio-a": {"a": 105.0, "b": 330.0}}
    for policy, per_job in runtimes.items():
        mode = "alone" if policy == "alone" else "shared"
        for job, t in per_job.items():
            run_id = f"r0-{policy}-{job}" if mode == "alone" else f"r0-{policy}"
            jobs.append({"run_id": run_id, "repetition": 0, "policy": policy, "mode": mode, "job": job,
                         "workload": "all-to-all", "ranks": 4, "runtime_us": t})
            for rank in range(4):
                for it in range(3):
                    iterations.append({"run_id": run_id, "repetition": 0, "policy": policy, "mode": mode, "job": job,
                                       "rank": rank, "iteration": it, "time_ns": t * 1000 / 3 * (1 + 0.1 * rank),
                                       "mpi_wait_ns": 10.0 * rank})
    for run_id in sorted({j["run_id"] for j in jobs}):
        runs.append({"run_id": run_id, "repetition": 0, "policy": "x", "mode": "alone" if "alone" in run_id else "shared",
                     "alone_job": None, "status": "completed", "error": None})
    runs.append({"run_id": "r0-broken", "repetition": 0, "policy": "broken", "mode": "shared", "alone_job": None,
                 "status": "error", "error": "engine exploded at the spine"})
    return {"jobs": pd.DataFrame(jobs), "iterations": pd.DataFrame(iterations), "runs": pd.DataFrame(runs)}


def runs_of(jobs: pd.DataFrame) -> pd.DataFrame:
    """runs.parquet's rows for hand-made job rows (one run per repetition and policy, and per job
    alone): completed unless a job's runtime is missing, which a run at its time limit leaves."""
    rows = []
    for (rep, policy, mode), group in jobs.groupby(["repetition", "policy", "mode"], sort=False):
        for job, runtimes in (group.groupby("job")["runtime_us"] if mode == "alone" else [(None, group["runtime_us"])]):
            rows.append({"run_id": f"r{rep}-{policy}" + (f"-{job}" if job else ""), "repetition": rep, "policy": policy,
                         "mode": mode, "alone_job": job,
                         "status": "time_limit" if runtimes.isna().any() else "completed", "error": None})
    return pd.DataFrame(rows)


def report(out, t, meta):
    """report.html of hand-made tables, their iterations written as a study writes them."""
    out.mkdir(parents=True, exist_ok=True)
    if "completed" not in t["jobs"]:  # as jobs.parquet has it: a job without a runtime did not complete
        t = {**t, "jobs": t["jobs"].assign(completed=t["jobs"]["runtime_us"].notna())}
    iterations = IterationsFile.of_frame(out / "iterations.parquet", t["iterations"])
    return write_report(out, {k: v for k, v in t.items() if k != "iterations"}, iterations, None, meta)


def test_figures_have_the_expected_bars_and_lines():
    t = tables()
    slow = slowdowns(t["jobs"])
    bars = slowdown_bars(slow, ["default", "prio-a"])
    assert len(bars.axes[0].patches) == 2 * 2  # two policies x two jobs
    ranking = policy_ranking(policy_summary(slow))
    assert len(ranking.axes[0].patches) == 2
    cdf = latency_cdf(t["iterations"], "a", ["alone", "default", "prio-a"])
    assert len(cdf.axes[0].get_lines()) == 3
    heat = rank_timing_map(t["iterations"], "a", ["alone", "default"])
    assert len([ax for ax in heat.axes if ax.images]) == 2


def test_report_is_self_contained_with_headline_figures_and_failures(tmp_path):
    meta = {"name": "hand-made", "description": "two jobs", "seeds": [1], "qoslab_version": "test",
            "policies": [{"name": "default", "description": "everyone on SL0"}, {"name": "prio-a", "description": "a first"}],
            "base_scenario": {"topology": {"kind": "single-switch", "hosts": 8}, "fabric": {"link_gbps": 100.0, "data_vls": 4}}}
    path = report(tmp_path, tables(), meta)
    page = path.read_text()
    # default: contention 50 + 120 = 170; prio-a: 5 + 130 = 135, 20.6% less.
    assert "The best policy by total contention is <b>prio-a</b>: 135 us (-20.6% against default)" in page
    assert "costs the jobs 170 us of contention in total; the worst hit, b, runs 1.60× slower" in page
    images = re.findall(r'<img [^>]*src="data:image/png;base64,', page)
    assert len(images) == 3 + 2  # slowdown, ranking, per-rank map, and a CDF per job
    assert "src=\"http" not in page and "<link" not in page and "<script" not in page
    assert "engine exploded at the spine" in page
    assert (tmp_path / "figures" / "slowdown.png").exists()


# -- many policies --------------------------------------------------------------------------


def many_policy_tables(count: int = 26, repetitions: int = 3, jobs=("a", "b", "c", "d")):
    """`count` policies (default first) over `repetitions` repetitions: jobs, iterations, runs,
    interference and vl_levels as a study writes them, with made-up but varied numbers."""
    policies = ["default"] + [f"policy-{i:02d}[x,y=z]" for i in range(1, count)]
    rows, iterations, runs, interference, vl_levels = [], [], [], [], []
    for rep in range(repetitions):
        for p_index, policy in enumerate(["alone", *policies]):
            mode = "alone" if policy == "alone" else "shared"
            for j_index, job in enumerate(jobs):
                run_id = f"r{rep}-{policy}-{job}" if mode == "alone" else f"r{rep}-{policy}"
                runtime = 100.0 * (j_index + 1) * (1.0 if mode == "alone" else 1.2 + 0.03 * ((p_index * 7 + j_index) % 11))
                runtime *= 1 + 0.02 * rep
                rows.append({"run_id": run_id, "repetition": rep, "policy": policy, "mode": mode, "job": job,
                             "workload": "all-to-all", "ranks": 4, "runtime_us": runtime})
                for rank in range(4):
                    for it in range(3):
                        iterations.append({"run_id": run_id, "repetition": rep, "policy": policy, "mode": mode, "job": job,
                                           "rank": rank, "iteration": it, "time_ns": runtime * 1000 / 3 * (1 + 0.05 * rank * it),
                                           "mpi_wait_ns": 10.0 * rank, "sends": 2, "send_latency_ns": 100.0 * (rank + 1)})
            for run_id in sorted({r["run_id"] for r in rows if r["repetition"] == rep and r["policy"] == policy}):
                runs.append({"run_id": run_id, "repetition": rep, "seed": rep, "policy": policy, "mode": mode,
                             "alone_job": None, "status": "completed", "error": None, "sim_time_ns": 1e6})
            if mode == "shared":
                run_id = f"r{rep}-{policy}"
                for kind in ("output", "buffer"):
                    for v_index, victim in enumerate(jobs):
                        for c_index, culprit in enumerate(jobs):
                            interference.append({"run_id": run_id, "repetition": rep, "policy": policy, "mode": mode,
                                                 "kind": kind, "victim": victim, "culprit": culprit, "level": 1,
                                                 "direction": "up", "vl": 0,
                                                 "wait_ns": 1e5 * (1 + (p_index + v_index * 3 + c_index) % 5)})
                for level in (1, 2):
                    for direction in ("up", "down"):
                        for vl in range(4):
                            vl_levels.append({"run_id": run_id, "repetition": rep, "policy": policy, "mode": mode,
                                              "level": level, "direction": direction, "vl": vl, "bytes": 1000, "links": 8,
                                              "busy_ns": 8e6 * 0.1 * ((p_index + vl) % 4)})
    return policies, {"jobs": pd.DataFrame(rows), "iterations": pd.DataFrame(iterations), "runs": pd.DataFrame(runs),
                      "interference": pd.DataFrame(interference), "vl_levels": pd.DataFrame(vl_levels)}


def panel_titles(fig) -> list[str]:
    return [ax.get_title().replace("\n", "") for ax in fig.axes if ax.get_visible() and ax.get_title()]


def test_every_figure_shows_every_one_of_26_policies():
    policies, t = many_policy_tables()
    slow = slowdowns(t["jobs"])
    heat = slowdown_heatmap(slow, policies)
    assert [label.get_text() for label in heat.axes[0].get_yticklabels()] == policies
    ranked = policy_ranking(policy_summary(slow))
    assert {label.get_text() for label in ranked.axes[0].get_yticklabels()} == set(policies)
    assert len(ranked.axes[0].patches) == len(policies)
    cdf = latency_cdf(t["iterations"], "a", ["alone", *policies])
    legends = {text.get_text() for ax in cdf.axes if ax.get_legend() for text in ax.get_legend().get_texts()}
    assert legends == {"alone", *policies}
    assert max(len(ax.get_lines()) for ax in cdf.axes) <= 2 + 4  # references + a few per panel, not 27 lines
    ranks = rank_timing_map(t["iterations"], "a", ["alone", *policies])
    assert panel_titles(ranks) == ["alone", *policies]
    matrix = interference_matrix(t["interference"], t["runs"], ["a", "b", "c", "d"])
    for kind in ("output", "buffer"):
        fig = interference_figure(matrix, policies, ["a", "b", "c", "d"], kind)
        assert panel_titles(fig) == policies
        norms = {(image.norm.vmin, image.norm.vmax) for ax in fig.axes for image in ax.images}
        assert len(norms) == 1  # one colour scale for every panel
    utilisation = utilisation_figure(vl_utilisation(t["vl_levels"], t["runs"]), policies)
    assert panel_titles(utilisation) == policies
    plt.close("all")


def test_policy_styles_are_distinct_and_the_same_in_every_figure():
    names = ["alone", "default"] + [f"p{i}" for i in range(60)]
    styles = policy_styles(names)
    lines = [(s.colour, s.linestyle, s.marker) for s in styles.values()]
    bars = [(s.colour, s.hatch, s.marker) for s in styles.values()]
    assert len(set(lines)) == len(lines) and len(set(bars)) == len(bars)
    assert policy_styles(names[5:] + names[:5])["alone"] == styles["alone"]  # references keep their look
    policies, t = many_policy_tables(count=12, repetitions=2)
    styles = policy_styles(["alone", *policies])
    cdf = latency_cdf(t["iterations"], "b", ["alone", *policies], styles=styles)
    drawn = {line.get_label(): (to_hex(line.get_color()), line.get_linestyle()) for ax in cdf.axes for line in ax.get_lines()}
    ranked = policy_ranking(policy_summary(slowdowns(t["jobs"])), styles=styles)
    by_y = {round(patch.get_y() + patch.get_height() / 2, 6): to_hex(patch.get_facecolor()) for patch in ranked.axes[0].patches}
    bars = {label.get_text(): by_y[round(label.get_position()[1], 6)] for label in ranked.axes[0].get_yticklabels()}
    for policy in policies:
        assert drawn[policy][0] == bars[policy] == styles[policy].colour
    plt.close("all")


def test_headline_warns_when_the_best_lead_is_within_the_intervals(tmp_path):
    # One job alone at 100 us; per repetition its runtime beside the others under each policy.
    shared = {"default": [200, 201, 199], "best": [120, 130, 110], "close": [125, 140, 112]}
    rows = [{"run_id": f"r{rep}-alone", "repetition": rep, "policy": "alone", "mode": "alone", "job": "a",
             "workload": "w", "ranks": 1, "runtime_us": 100.0} for rep in range(3)]
    rows += [{"run_id": f"r{rep}-{policy}", "repetition": rep, "policy": policy, "mode": "shared", "job": "a",
              "workload": "w", "ranks": 1, "runtime_us": float(times[rep])}
             for policy, times in shared.items() for rep in range(3)]
    runs = pd.DataFrame([{"run_id": r["run_id"], "repetition": r["repetition"], "policy": r["policy"], "mode": r["mode"],
                          "alone_job": None, "status": "completed", "error": None} for r in rows])
    empty = pd.DataFrame(columns=["run_id", "repetition", "policy", "mode", "job", "rank", "iteration", "time_ns", "mpi_wait_ns"])
    page = report(tmp_path, {"jobs": pd.DataFrame(rows), "runs": runs, "iterations": empty},
                        {"name": "leads", "seeds": [0, 1, 2]}).read_text()
    headline = re.search(r"<div class='headline'>(.*?)</div>", page, re.DOTALL).group(1)
    # Paired differences, per repetition: default - best 80, 71, 89 (mean 80 ± 32.2: apart);
    # close - best 5, 10, 2 (mean 5.7 ± 14.5: not). Each at 97.5%: the best was picked among 2.
    assert ("best's lead over default, 80 us (95% confidence interval 48 to 112 us, paired over 3 repetitions, "
            "widened for picking the best of 2 policies), is more than run-to-run variation") in headline
    assert ("Warning: best's lead over the runner-up, close, 6 us, is within run-to-run variation (95% confidence "
            "interval -9 to 20 us, paired over 3 repetitions, widened for picking the best of 2 policies): best is "
            "not distinguishable from close") in headline
    assert "The best policy by total contention is <b>best</b>: 20 us (-80.0% against default), 95% confidence interval" in headline


def test_report_with_one_repetition_says_there_is_no_interval(tmp_path):
    page = report(tmp_path, tables(), {"name": "one", "seeds": [1]}).read_text()
    assert "With 1 repetition that both completed there is no confidence interval" in page
    assert "One repetition: there is no confidence interval" in page  # under the figures with error bars


def test_figures_are_written_in_every_requested_format_and_deterministically(tmp_path):
    meta = {"name": "formats", "seeds": [1], "figure_formats": ["png", "svg", "pdf"]}
    report(tmp_path / "one", tables(), meta)
    report(tmp_path / "two", tables(), meta)
    pngs = sorted(p.stem for p in (tmp_path / "one" / "figures").glob("*.png"))
    assert pngs and "slowdown" in pngs
    for stem in pngs:
        svg = tmp_path / "one" / "figures" / f"{stem}.svg"
        ElementTree.parse(svg)  # well-formed
        assert (tmp_path / "one" / "figures" / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        assert svg.read_bytes() == (tmp_path / "two" / "figures" / f"{stem}.svg").read_bytes()
    report(tmp_path / "png", tables(), {"name": "png only", "seeds": [1]})
    assert not list((tmp_path / "png" / "figures").glob("*.svg"))


def test_figures_option_is_checked():
    result = CliRunner().invoke(app, ["study", "--figures", "png,tiff", "--plan"])
    assert result.exit_code == 2 and "tiff" in result.output


def test_the_report_says_identical_repetitions_are_one_sample():
    from qoslab.analysis import best_policy_leads
    from qoslab.report.html import _headline

    rows = [{"repetition": r, "policy": p, "mode": "alone" if p == "alone" else "shared", "job": j, "ranks": 4,
             "runtime_us": t} for r in (0, 1, 2)
            for p, j, t in [("alone", "a", 100.0), ("alone", "b", 100.0), ("default", "a", 150.0),
                            ("default", "b", 200.0), ("prio-a", "a", 110.0), ("prio-a", "b", 180.0)]]
    slow = slowdowns(pd.DataFrame(rows))
    summary = policy_summary(slow)
    assert best_policy_leads(summary, slow)["identical_repetitions"].all()
    headline = _headline(summary, slow, runs_of(pd.DataFrame(rows)))
    assert "the same in all 3 repetitions" in headline and "confidence interval" not in headline
    assert "The repetitions of prio-a or default gave identical results" in headline
    assert "larger than both" not in headline


def test_names_from_the_scenario_are_text_in_the_report_never_markup(tmp_path):
    # A job's name is the scenario author's: in a shared report.html it must not become markup
    # (the headline's "worst hit" wrote it raw, so `<img onerror=...>` ran in the reader's browser).
    hostile = "<img src=x onerror=alert(1)>"
    t = tables()
    for name in ("jobs", "iterations"):
        t[name]["job"] = t[name]["job"].replace("b", hostile)
    meta = {"name": "hand-made", "seeds": [1], "qoslab_version": "test",
            "policies": [{"name": "default", "description": "everyone on SL0"}, {"name": "prio-a", "description": "a"}]}
    page = report(tmp_path, t, meta).read_text()
    assert "the worst hit, &lt;img src=x onerror=alert(1)&gt;, runs 1.60× slower" in page
    assert "<img src=x" not in page and "onerror=alert(1)>" not in page


def test_the_headline_says_what_an_incomplete_default_tie_or_policy_means():
    from qoslab.report.html import _headline

    def headline(shared: dict[str, list[float]]) -> str:
        rows = [{"repetition": r, "policy": "alone", "mode": "alone", "job": "a", "ranks": 1, "runtime_us": 100.0}
                for r in (0, 1, 2)]
        rows += [{"repetition": r, "policy": p, "mode": "shared", "job": "a", "ranks": 1, "runtime_us": t}
                 for p, times in shared.items() for r, t in enumerate(times)]
        slow = slowdowns(pd.DataFrame(rows))
        return _headline(policy_summary(slow), slow, runs_of(pd.DataFrame(rows)))

    nan = float("nan")
    # A default that never completed printed "costs the jobs nan us ... +nan% against default".
    text = headline({"default": [nan, nan, nan], "b": [150.0, 140.0, 160.0]})
    assert "nan" not in text and "no figure is given against it" in text
    # A tie was "B's lead over the runner-up, C (0 us) holds".
    text = headline({"default": [200.0, 210.0, 190.0], "b": [150.0, 140.0, 160.0], "c": [150.0, 140.0, 160.0]})
    assert "b and the runner-up, c are tied" in text
    # A policy that finished only the easy repetition is ranked after those that finished all.
    text = headline({"default": [200.0, 210.0, 190.0], "b": [150.0, 140.0, 160.0], "easy": [nan, 101.0, nan]})
    assert "<b>b</b>" in text and "easy (1 of 3)" in text


def test_a_best_ranked_first_only_by_the_other_s_missing_repetitions_is_said_to_be_behind():
    from qoslab.report.html import _headline

    nan = float("nan")
    rows = [{"repetition": r, "policy": "alone", "mode": "alone", "job": "a", "ranks": 1, "runtime_us": 100.0}
            for r in (0, 1, 2)]
    rows += [{"repetition": r, "policy": p, "mode": "shared", "job": "a", "ranks": 1, "runtime_us": t}
             for p, times in {"default": [150.0, 160.0, nan], "b": [170.0, 181.0, 300.0]}.items()
             for r, t in enumerate(times)]
    slow = slowdowns(pd.DataFrame(rows))
    text = _headline(policy_summary(slow), slow, runs_of(pd.DataFrame(rows)))
    # Default's interval of b - default over reps 0 and 1 (20, 21) lies below 0: "within run-to-run
    # variation" before.
    assert "b has 20 us more contention than default" in text and "within run-to-run" not in text
