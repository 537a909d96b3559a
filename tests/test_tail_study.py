"""The tail-latency study (kind = "tail-latency"): planning is deterministic, snapshots come from
a synthetic scheduler or from sacct logs, bad input is named, and at small scale the seed's
findings hold in direction (docs/reproductions.md has the full-size numbers)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from qoslab.analysis.tail import compare_groups, correlation
from qoslab.cli import app
from qoslab.errors import ScenarioError
from qoslab.io.scheduler import SchedulerLogError, background_traffic
from qoslab.report.tail import BY, with_background_label
from qoslab.scenario import read_toml
from qoslab.study.tail_model import TailStudy
from qoslab.study.tail_plan import TailPlan
from qoslab.study.tail_runner import Snapshot, TailStudyRunner
from qoslab.sweep.executors import LocalExecutor
from typer.testing import CliRunner

EXAMPLE = Path(__file__).parent.parent / "examples" / "dragonfly-tail" / "study.toml"


def study(**changes) -> TailStudy:
    data = {**read_toml(EXAMPLE), **changes}
    return TailStudy.from_dict(data, str(EXAMPLE))


def run(s: TailStudy, out: Path):
    executor = LocalExecutor()
    try:
        return TailStudyRunner(s, out, executor, progress=False).run()
    finally:
        executor.close()


@pytest.fixture(scope="module")
def small_outcome(tmp_path_factory):
    target = {"nodes": 8, "workload": {"kind": "collective-loop", "collective": "allreduce", "bytes": 1024,
                                       "iterations": 200}}
    return run(study(snapshots=16, target=target), tmp_path_factory.mktemp("tail"))


def test_the_plan_is_deterministic_and_b_is_the_heuristic_of_the_snapshot(tmp_path):
    s = study(snapshots=4)
    first = TailStudyRunner(s, tmp_path / "a", LocalExecutor(1), progress=False)
    second = TailStudyRunner(s, tmp_path / "b", LocalExecutor(1), progress=False)
    specs_a, plan_a = first.plan()
    specs_b, plan_b = second.plan()
    assert [x.run_id for x in specs_a] == [x.run_id for x in specs_b]
    pd.testing.assert_frame_equal(plan_a, plan_b)
    snap = first.snapshot(2)
    target = first.target_hosts(snap, "spread-groups")
    assert not set(target) & {h for hosts in snap.background for h in hosts}
    groups = first.groups
    assert len({groups[h] for h in target}) == 4  # spread over the 4 groups
    row = plan_a[(plan_a.snapshot == 2) & (plan_a.locality == "spread-groups")].iloc[0]
    assert row["b"] == pytest.approx(background_traffic(target, snap.background, groups, definition=s.heuristic))
    empty = Snapshot(-1, [], [], "none")
    assert len({groups[h] for h in first.target_hosts(empty, "same-group")}) == 1


def test_plan_of_a_tail_study_counts_its_runs(tmp_path):
    s = study(snapshots=4)
    specs, plan = TailStudyRunner(s, tmp_path / "a", LocalExecutor(1), progress=False).plan()
    size = TailPlan(s).size()
    assert not (tmp_path / "b").exists()
    # (4 snapshots + the baseline) x 2 localities x 2 routings, less the ones without room for the job.
    assert size["runs"] == len(specs) == 5 * 2 * 2 - 2 * size["not_placed"]
    assert size["not_placed"] == plan["run_id"].isna().sum()
    assert size["jobs"] == {"target": {"nodes": s.target.nodes, "ranks": s.target.nodes * s.target.ranks_per_node,
                                       "ranks_per_node": s.target.ranks_per_node}}
    assert size["hosts"] == 64


def test_congestion_control_off_and_on_are_runs_of_their_own_and_a_target_gets_its_sl(tmp_path):
    plain = TailPlan(study(snapshots=2)).plan()[0]
    specs = TailPlan(study(snapshots=2, congestion_control=[False, True])).plan()[0]
    # Congestion control off: the very runs of a study without the key (same ids); on: "+cc" runs
    # whose scenario turns it on, with the scenario's other settings.
    off = [s for s in specs if not s.policy.endswith("+cc")]
    on = [s for s in specs if s.policy.endswith("+cc")]
    assert [s.run_id for s in off] == [s.run_id for s in plain] and len(on) == len(off)
    assert all(s.scenario["congestion_control"] == {"enabled": True} for s in on)
    assert all("congestion_control" not in s.scenario for s in off)
    assert TailPlan(study(snapshots=2, congestion_control=[False, True])).size()["routings"] == \
        ["minimal", "minimal+cc", "adaptive", "adaptive+cc"]
    high = TailPlan(study(snapshots=2, target={"nodes": 8, "sl": 1})).plan()[0]
    assert {s.scenario["jobs"][0]["sl"] for s in high} == {1}
    assert all("sl" not in s.scenario["jobs"][0] for s in plain)  # SL 0 is not written: run ids as before


def test_background_makes_the_tail_long_and_same_group_placement_is_faster(small_outcome):
    it = small_outcome.tables["tail_iterations"]
    summary = compare_groups(with_background_label(it), by=BY).set_index(BY)
    for locality in ("same-group", "spread-groups"):
        for routing in ("minimal", "adaptive"):
            alone = summary.loc[("none", locality, routing)]
            loaded = summary.loc[("snapshots", locality, routing)]
            assert alone["p99_over_p50"] < 1.3, alone
            assert loaded["p99_over_p50"] > 2.0, loaded
            assert loaded["p50"] > alone["p50"]
    for routing in ("minimal", "adaptive"):
        same, spread = summary.loc[("snapshots", "same-group", routing)], summary.loc[("snapshots", "spread-groups", routing)]
        assert same["p50"] < spread["p50"] and same["p99"] < spread["p99"], (routing, same, spread)


def test_b_correlates_positively_with_latency_for_spread_jobs(small_outcome):
    it = small_outcome.tables["tail_iterations"]
    runs = it[(it.snapshot >= 0) & (it.locality == "spread-groups")]
    medians = runs.groupby(["snapshot", "routing"]).agg(b=("b", "first"), p50=("latency_ns", "median")).reset_index()
    for routing, group in medians.groupby("routing"):
        c = correlation(group["b"], group["p50"])
        assert c.pearson_r > 0.2 and c.spearman_rho > 0.2, (routing, c)


def test_outputs_and_report(small_outcome):
    out = small_outcome.out
    for name in ("tail_runs.parquet", "tail_iterations.parquet", "report.html"):
        assert (out / name).is_file()
    assert small_outcome.report_error is None
    page = (out / "report.html").read_text()
    assert "Background traffic b and latency" in page and "pearson_r" in page
    runs = small_outcome.tables["tail_runs"]
    # Every run completed, or the measured job could not be placed in one group (full groups).
    assert set(runs["status"]) <= {"completed", "not placed"}
    assert (runs[runs["status"] == "not placed"]["locality"] == "same-group").all()


SACCT = """\
100|100|lammps|alice|gpu|normal|COMPLETED|2024-01-01T00:00:00|2024-01-01T00:00:10|2024-01-01T10:00:00|35990|8|8|r[01-08]
101|101|serial|bob|gpu|normal|COMPLETED|2024-01-01T00:00:00|2024-01-01T00:00:10|2024-01-01T10:00:00|35990|1|1|r17
102|102|cfd|carol|gpu|normal|RUNNING|2024-01-01T00:00:00|2024-01-01T00:00:10|Unknown|0|12|12|r[33-40],r[49-52]
"""


def test_a_routing_with_flowlets_runs_beside_the_plain_ones_under_its_own_label(tmp_path):
    s = study(snapshots=1, baseline=False, localities=["spread-groups"],
              routings=["adaptive", {"algorithm": "adaptive", "flowlet_gap_us": 20}])
    specs, plan = TailStudyRunner(s, tmp_path / "out", LocalExecutor(1), progress=False).plan()
    assert list(plan["routing"]) == ["adaptive", "adaptive-flowlet-20us"]
    assert [spec.scenario["routing"] for spec in specs] == [{"algorithm": "adaptive"},
                                                             {"algorithm": "adaptive", "flowlet_gap_us": 20.0}]
    # A plain routing keeps the run id it had before routings could carry flowlets (resume).
    plain = study(snapshots=1, baseline=False, localities=["spread-groups"], routings=["adaptive"])
    assert TailStudyRunner(plain, tmp_path / "o2", LocalExecutor(1), progress=False).plan()[0][0].run_id == specs[0].run_id


def test_snapshots_from_a_sacct_log_use_the_jobs_hosts(tmp_path):
    log = tmp_path / "jobs.txt"
    log.write_text(SACCT)
    background = {"source": "sacct", "log": str(log), "host_names": "r[01-64]"}
    s = study(snapshots=2, localities=["spread-groups"], routings=["minimal"], baseline=False, background=background,
              target={"nodes": 4, "workload": {"kind": "collective-loop", "collective": "allreduce", "bytes": 64,
                                               "iterations": 20}})
    runner = TailStudyRunner(s, tmp_path / "out", LocalExecutor(1), progress=False)
    snap = runner.snapshot(0)
    # Every job runs through the whole log: all three, by name (r01 is host 0).
    assert sorted(snap.background) == sorted([tuple(range(8)), (16,), tuple(range(32, 40)) + tuple(range(48, 52))])
    assert [w is None for w in snap.workloads] == [len(h) < 2 for h in snap.background]
    outcome = run(s, tmp_path / "out")
    assert set(outcome.tables["tail_runs"]["status"]) == {"completed"}


def test_snapshots_from_a_jobcomp_log_use_the_jobs_hosts(tmp_path):
    log = tmp_path / "slurm_jobcomp.log"
    log.write_text(
        "JobId=100 UserId=alice(1) GroupId=g(1) Name=lammps JobState=COMPLETED Partition=gpu TimeLimit=600 "
        "StartTime=2024-01-01T00:00:10 EndTime=2024-01-01T10:00:00 NodeList=r[01-08] NodeCnt=8 ProcCnt=8 WorkDir=/ "
        "ReservationName= Tres= Account=a QOS=normal WcKey= Cluster=c SubmitTime=2024-01-01T00:00:00 "
        "EligibleTime=2024-01-01T00:00:00 DerivedExitCode=0:0 ExitCode=0:0\n"
        "JobId=102 UserId=carol(3) GroupId=g(1) Name=cfd JobState=COMPLETED Partition=gpu TimeLimit=600 "
        "StartTime=2024-01-01T00:00:10 EndTime=2024-01-01T10:00:00 NodeList=r[33-40],r[49-52] NodeCnt=12 ProcCnt=12 "
        "WorkDir=/ ReservationName= Tres= Account=a QOS=normal WcKey= Cluster=c SubmitTime=2024-01-01T00:00:00 "
        "EligibleTime=2024-01-01T00:00:00 DerivedExitCode=0:0 ExitCode=0:0\n")
    s = study(snapshots=1, background={"source": "jobcomp", "log": str(log), "host_names": "r[01-64]"})
    snap = TailStudyRunner(s, tmp_path / "out", LocalExecutor(1), progress=False).snapshot(0)
    assert sorted(snap.background) == sorted([tuple(range(8)), tuple(range(32, 40)) + tuple(range(48, 52))])


def test_snapshots_from_a_sacct_json_dump_use_the_jobs_hosts(tmp_path):
    def job(job_id, nodes, end):
        return {"job_id": job_id, "name": "j", "user": "u", "state": {"current": ["COMPLETED" if end else "RUNNING"]},
                "time": {"submission": 1704067200, "start": 1704067210, "end": end}, "nodes": nodes, "steps": []}

    log = tmp_path / "jobs.json"
    log.write_text(json.dumps({"jobs": [job(100, "r[01-08]", 1704103200), job(101, "r17", 1704103200),
                                        job(102, "r[33-40],r[49-52]", 0)]}))
    s = study(snapshots=1, background={"source": "sacct-json", "log": str(log), "host_names": "r[01-64]"})
    snap = TailStudyRunner(s, tmp_path / "out", LocalExecutor(1), progress=False).snapshot(0)
    assert sorted(snap.background) == sorted([tuple(range(8)), (16,), tuple(range(32, 40)) + tuple(range(48, 52))])
    assert snap.label.startswith("sacct-json at t = ")
    log.write_text(json.dumps({"jobs": [job(100, "r[01-08]", 1704103200), job(101, "login9", 1704103200)]}))
    with pytest.raises(SchedulerLogError) as error:
        TailStudyRunner(s, tmp_path / "out2", LocalExecutor(1), progress=False).plan()
    assert f"{log}: jobs[1]: job 101 runs on host 'login9'" in str(error.value)


def test_a_sacct_host_outside_the_fabric_is_named_by_line(tmp_path):
    log = tmp_path / "jobs.txt"
    log.write_text(SACCT.replace("r17", "login9"))
    s = study(snapshots=1, background={"source": "sacct", "log": str(log), "host_names": "r[01-64]"})
    with pytest.raises(SchedulerLogError) as error:
        TailStudyRunner(s, tmp_path / "out", LocalExecutor(1), progress=False).plan()
    assert f"{log}:2" in str(error.value) and "login9" in str(error.value)


@pytest.mark.parametrize("changes, key, expected", [
    ({"scenario": {"topology": {"kind": "xgft", "m": [4, 4], "w": [1, 4]}}}, "scenario.topology", "needs a dragonfly-plus"),
    ({"heuristic": "mine"}, "heuristic", "unknown definition 'mine'"),
    ({"target": {"nodes": 100}}, "target.nodes", "100 nodes, but the fabric has 64 hosts"),
    ({"background": {"source": "sacct"}}, "background.log", 'source = "sacct" needs the log file'),
    ({"background": {"source": "sacct-json"}}, "background.log", 'source = "sacct-json" needs the log file'),
    ({"background": {"source": "swf", "log": "x.swf", "host_names": "r[1-4]"}}, "background.host_names",
     'only used with source = "sacct", "sacct-json" or "jobcomp"'),
    ({"background": {"source": "swf", "log": "nowhere.swf"}}, "background.log", "file not found"),
    ({"background": {"occupancy": [0.9, 0.2]}}, "background.occupancy", "expected 0 <= low <= high < 1"),
    ({"localities": ["corner"]}, "localities[0]", "same-group"),
    ({"colour": 1}, "colour", "unknown key"),
    ({"routings": ["minimal", {"algorithm": "minimal", "flowlet_gap_us": 5}]}, "routings[1].flowlet_gap_us",
     'flowlets apply to adaptive routing on a Dragonfly+ (routing.algorithm is "minimal"'),
    ({"routings": ["adaptive", {"algorithm": "adaptive"}]}, "routings[1]", "'adaptive' is listed twice"),
    ({"routings": ["fastest"]}, "routings[0].algorithm", "minimal"),
    ({"congestion_control": [True, True]}, "congestion_control", "each value once"),
    ({"congestion_control": []}, "congestion_control", "at least 1"),
    ({"target": {"nodes": 8, "sl": 16}}, "target.sl", "less than or equal to 15"),
])
def test_bad_study_files_name_the_key(changes, key, expected):
    with pytest.raises(ScenarioError) as error:
        study(**changes)
    assert f"{key}: " in str(error.value) and expected in str(error.value), str(error.value)


def test_cli_runs_a_tail_study_and_reports_a_bad_one(tmp_path):
    text = EXAMPLE.read_text().replace("snapshots = 40", "snapshots = 2").replace("iterations = 1000", "iterations = 20")
    path = tmp_path / "study.toml"
    path.write_text(text.replace('scenario = "scenario.toml"', f'scenario = "{EXAMPLE.parent / "scenario.toml"}"'))
    runner = CliRunner()
    result = runner.invoke(app, ["study", str(path), "--out", str(tmp_path / "out"), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "report.html").is_file()
    bad = tmp_path / "bad.toml"
    bad.write_text(path.read_text().replace("snapshots = 2", "snapshots = 0"))
    result = runner.invoke(app, ["study", str(bad), "--out", str(tmp_path / "bad-out")])
    assert result.exit_code == 2
    assert f"{bad}: snapshots: " in result.stderr


SWF = """\
; Version: 2.2
; MaxNodes: 64
; MaxProcs: 64
1 0 10 36000 16 -1 -1 16 -1 -1 1 1 1 -1 1 -1 -1 -1
2 5 10 36000 24 -1 -1 24 -1 -1 1 2 1 -1 1 -1 -1 -1
3 8 10 36000 1 -1 -1 1 -1 -1 1 3 1 -1 1 -1 -1 -1
"""


def test_snapshots_from_an_swf_log_are_placed_with_their_node_counts(tmp_path):
    log = tmp_path / "jobs.swf"
    log.write_text(SWF)
    s = study(snapshots=2, localities=["spread-groups"], routings=["minimal"], baseline=False,
              background={"source": "swf", "log": str(log), "placement": "random"},
              target={"nodes": 4, "workload": {"kind": "collective-loop", "collective": "allreduce", "bytes": 64,
                                               "iterations": 20}})
    runner = TailStudyRunner(s, tmp_path / "out", LocalExecutor(1), progress=False)
    snap = runner.snapshot(1)
    assert sorted(len(h) for h in snap.background) == [1, 16, 24]  # all three run through the log
    assert len({h for hosts in snap.background for h in hosts}) == 41
    outcome = run(s, tmp_path / "out")
    assert set(outcome.tables["tail_runs"]["status"]) == {"completed"}


def test_cli_names_a_malformed_sacct_line(tmp_path):
    log = tmp_path / "jobs.txt"
    log.write_text(SACCT + "104|104|bad|dan|gpu|normal|RUNNING|2024-01-01T00:00:00|not-a-date|Unknown|0|2|2|r[60-61]\n")
    text = EXAMPLE.read_text().replace('scenario = "scenario.toml"', f'scenario = "{EXAMPLE.parent / "scenario.toml"}"')
    text = text.replace('source = "synthetic"', f'source = "sacct"\nlog = "{log}"\nhost_names = "r[01-64]"')
    text = text.replace('placement = "random"\n', "")
    for key in ("occupancy", "job_nodes", "single_node_fraction"):
        text = "\n".join(line for line in text.splitlines() if not line.startswith(key))
    path = tmp_path / "study.toml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["study", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert f"{log}:4:" in result.stderr and "Start" in result.stderr, result.stderr


@pytest.mark.parametrize("log_text, host_names, key, words", [
    ("", "r[01-64]", "background.log", "no job that started"),
    ("\ufeff" + SACCT, "r[01-64", "background.host_names", "not a Slurm host list"),
    ("\ufeff" + SACCT, "r[01-10]", "background.host_names", "names 10 hosts, the fabric has 64"),
])
def test_a_log_or_host_list_the_study_cannot_use_is_named(tmp_path, log_text, host_names, key, words):
    # A byte-order mark before the header is read past (it hid the first field); an empty log and
    # a bad host list were a bare ValueError and a hostlist traceback.
    log = tmp_path / "jobs.txt"
    log.write_text(log_text)
    s = study(snapshots=1, localities=["spread-groups"], routings=["minimal"], baseline=False,
              background={"source": "sacct", "log": str(log), "host_names": host_names})
    with pytest.raises(ScenarioError) as error:
        TailPlan(s).snapshots()
    assert error.value.problems[0][0] == key and words in str(error.value), error.value
