"""The study runner: study files and their errors, alone vs shared runs on the same hosts,
storing and resuming, failures recorded, executors (local processes, Dask) and the search."""

from __future__ import annotations

import copy
import json
import math
import tracemalloc

import pandas as pd
import pytest
from qoslab.analysis import slowdowns
from qoslab.cli import app
from qoslab.errors import ScenarioError
from qoslab.policies.arbitration import weight_entries
from qoslab.scenario import Scenario
from qoslab.study.model import Study
from qoslab.study.plan import StudyPlan, study_size
from qoslab.study.runner import StudyRunner
from qoslab.sweep import execute as execute_module
from qoslab.sweep.executors import DaskExecutor, LocalExecutor
from typer.testing import CliRunner

# Two 4-node jobs, randomly placed on a 4:1... 2:1 slimmed 16-host tree: the flood and the
# all-to-all share up-links, so sharing costs the all-to-all time.
SCENARIO = {
    "seed": 3,
    "topology": {"kind": "xgft", "m": [4, 4], "w": [1, 2]},
    "jobs": [
        {"name": "a2a", "nodes": 4, "placement": "random", "workload": {"kind": "all-to-all", "bytes": 32768, "iterations": 2}},
        {"name": "flood", "nodes": 4, "placement": "random", "workload": {"kind": "flood-pairs", "iterations": 10}},
    ],
}


def study(policies=None, **keys) -> Study:
    data = {"scenario": copy.deepcopy(SCENARIO), "policies": policies or [{"kind": "default"}], **keys}
    return Study.from_dict(data, "study.toml")


def run(s: Study, out, executor=None):
    return StudyRunner(s, out, executor or LocalExecutor(1), progress=False).run()


# -- weights as table entries ---------------------------------------------------------------


def test_weights_above_255_span_entries_of_near_equal_size():
    entries = weight_entries({0: 2286, 1: 254, 2: 9, 3: 1})
    assert [w for vl, w in entries if vl == 0] == [254] * 9  # 2286 = 9 x 254
    assert sum(w for vl, w in entries if vl == 1) == 254 and len(entries) == 12
    assert entries[:4] == [(0, 254), (1, 254), (2, 9), (3, 1)]  # interleaved: every VL in the first round


def test_weights_beyond_64_entries_are_refused():
    with pytest.raises(ValueError, match="65 VLArb entries"):
        weight_entries({0: 255 * 65})
    assert len(weight_entries({0: 255 * 64})) == 64
    # Refused before the entries are made: 2^63 - 1 took every byte of memory (a MemoryError
    # traceback), 10^10 771 MB, before the same refusal.
    tracemalloc.start()
    with pytest.raises(ValueError, match="36170086419038338 VLArb entries"):
        weight_entries({0: 2**63 - 1, 1: 1})
    assert tracemalloc.get_traced_memory()[1] < 1 << 20
    tracemalloc.stop()


# -- the study file and its errors ----------------------------------------------------------


def test_default_baseline_is_added_first_and_all_assignments_expand():
    s = study([{"kind": "per-job", "assignment": "all", "weights": [2286, 254, 9, 1]}])
    labels = [p.label() for p in s.concrete_policies()]
    assert labels[0] == "default"
    assert len(labels) == 1 + 4 * 3  # two jobs on distinct levels of four
    four = copy.deepcopy(SCENARIO)
    four["topology"] = {"kind": "single-switch", "hosts": 16}
    four["jobs"] += [{**copy.deepcopy(four["jobs"][0]), "name": n} for n in ("c", "d")]
    s = Study.from_dict({"scenario": four, "policies": [{"kind": "per-job", "assignment": "all"}]})
    assert len(s.concrete_policies()) == 1 + 24  # Savoie: the 24 permutations of 4 jobs on 4 SLs


@pytest.mark.parametrize(
    "policies, scenario_change, key, words",
    [
        ([{"kind": "bogus"}], {}, "policies[0].kind", "expected one of"),
        ([{"kind": "per-rank", "job": "a2a", "fractoin": 0.1}], {}, "policies[0].fractoin", "unknown key"),
        ([{"kind": "per-rank", "job": "nope"}], {}, "policies[0].job", "no job named 'nope'"),
        ([{"kind": "per-rank", "job": "a2a", "fraction": 0}], {}, "policies[0].fraction", "greater than 0"),
        ([{"kind": "per-job", "assignment": {"a2a": 0, "flood": 1}, "weights": [2286, 254, 9, 1]}],
         {"fabric": {"data_vls": 2}}, "policies[0].weights", "only 2 data VLs"),
        ([{"kind": "per-job", "assignment": {"a2a": 0, "flood": 5}, "weights": [1, 2]}], {}, "policies[0].assignment.flood", "levels 0..1"),
        ([{"kind": "per-job", "assignment": {"a2a": 0}, "weights": [255 * 60, 255 * 10]}], {}, "policies[0].weights", "a table holds 64"),
        ([{"kind": "multi-vl", "vls": 8}], {}, "policies[0].vls", "4 data VLs"),
        ([{"kind": "per-message", "weights": [1, 2, 3], "thresholds": [2.0]}], {}, "policies[0].thresholds", "expected 2 thresholds"),
        ([{"kind": "per-rank", "job": "a2a", "selection": "online", "metric": "random"}], {}, "policies[0].metric", "online"),
        ([{"kind": "default"}, {"kind": "default"}], {}, "policies", "both named 'default'"),
        ([], {}, "policies", "at least 1"),
        ([{"kind": "default"}], {"jobs": []}, "scenario", "nothing to compare"),
        ([{"kind": "default"}], {"fabric": {"data_vls": 3}}, "scenario.fabric.data_vls", "expected"),
        ([{"kind": "default", "data_vls": 3}], {}, "policies[0].data_vls", "expected 1, 2, 4, 8 or 15"),
        ([{"kind": "multi-vl", "vls": 4, "data_vls": 2}], {}, "policies[0].vls",
         "4 VLs, but the ports operate only 2 data VLs (this policy's data_vls = 2)"),
        ([{"kind": "per-job", "assignment": {"a2a": 0}, "weights": [1, 2], "data_vls": 1}], {}, "policies[0].weights",
         "only 1 data VLs (this policy's data_vls = 1)"),
        ([{"kind": "multi-vl", "data_vls": 8}], {"fabric": {"port_buffer_bytes": 32768}}, "policies[0].data_vls",
         ("with fabric.data_vls = 8 the scenario is invalid: fabric.port_buffer_bytes: expected at least 33280 "
          "bytes for 8 data VLs")),
        ([{"kind": "default"}, {"kind": "multi-vl", "data_vls": 2}, {"kind": "multi-vl", "data_vls": 2}], {}, "policies",
         "both named 'multi-vl[all,connection] on 2 VLs'"),
    ],
)
def test_bad_study_is_refused_before_any_run(policies, scenario_change, key, words):
    scenario = {**copy.deepcopy(SCENARIO), **scenario_change}
    with pytest.raises(ScenarioError) as caught:
        Study.from_dict({"scenario": scenario, "policies": policies}, "study.toml")
    text = str(caught.value)
    assert f"study.toml: {key}" in text and words in text, text


def test_a_plain_union_s_errors_name_keys_not_pydantic_types():
    # `assignment` is a table of job levels or "all": pydantic named the branches it tried
    # (assignment.dict[str,constrained-int].a) and added the other branch's "expected 'all', got a
    # table", which misled; an empty list read "List should have at least 1 item after validation".
    with pytest.raises(ScenarioError) as caught:
        Study.from_dict({"scenario": copy.deepcopy(SCENARIO), "policies": [{"kind": "per-job", "assignment": {"a2a": 99}}]},
                        "study.toml")
    assert caught.value.problems == [("policies[0].assignment.a2a", "expected less than or equal to 14, got 99")]
    # A job name with a bracket (a quoted TOML key) is a key, not one of pydantic's branch types.
    bracketed = copy.deepcopy(SCENARIO)
    bracketed["jobs"][0]["name"] = "a[1]"
    with pytest.raises(ScenarioError) as caught:
        Study.from_dict({"scenario": bracketed, "policies": [{"kind": "per-job", "assignment": {"a[1]": 99}}]},
                        "study.toml")
    assert caught.value.problems == [("policies[0].assignment.a[1]", "expected less than or equal to 14, got 99")]
    with pytest.raises(ScenarioError) as caught:
        Study.from_dict({"scenario": copy.deepcopy(SCENARIO), "seeds": [], "policies": [{"kind": "default"}]}, "s.toml")
    assert caught.value.problems == [("seeds", "expected at least 1 entry, got []")]


def test_executor_keys_are_checked():
    with pytest.raises(ScenarioError, match="needs the scheduler address"):
        study(executor={"kind": "dask"})
    with pytest.raises(ScenarioError, match="only used with kind = \"dask\""):
        study(executor={"kind": "local", "scheduler": "tcp://x:1"})


def test_scenario_file_is_read_relative_to_the_study(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "base.toml").write_text('[topology]\nkind = "single-switch"\nhosts = 8\n[[jobs]]\nnodes = 2\nworkload = { kind = "ping-pong" }\n')
    (tmp_path / "s.toml").write_text('scenario = "sub/base.toml"\n[[policies]]\nkind = "default"\n')
    assert Study.from_toml(tmp_path / "s.toml").base().host_count() == 8
    (tmp_path / "t.toml").write_text('scenario = "sub/missing.toml"\n[[policies]]\nkind = "default"\n')
    with pytest.raises(ScenarioError, match="missing.toml: file not found"):
        Study.from_toml(tmp_path / "t.toml")


# -- running --------------------------------------------------------------------------------


def test_alone_and_shared_runs_use_the_same_hosts_and_slowdown_is_measured(tmp_path):
    outcome = run(study(repetitions=2), tmp_path)
    runs, jobs, it = outcome.tables["runs"], outcome.tables["jobs"], outcome.tables["iterations"]
    assert len(runs) == 2 * (2 + 1) and set(runs["status"]) == {"completed"}
    alone = jobs[jobs["mode"] == "alone"]
    assert (alone.groupby("run_id").size() == 1).all()  # alone means alone
    for rep in (0, 1):
        hosts = it[it["repetition"] == rep].groupby(["mode", "job", "rank"])["host"].first().unstack("mode")
        assert (hosts["alone"] == hosts["shared"]).all()
    # Repetitions draw different placements (random placement follows the seed).
    by_rep = it[it["mode"] == "alone"].groupby(["repetition"])["host"].apply(lambda h: tuple(sorted(set(h))))
    assert by_rep[0] != by_rep[1]
    shared = jobs[jobs["mode"] == "shared"].set_index(["repetition", "job"])["runtime_us"]
    alone_t = alone.set_index(["repetition", "job"])["runtime_us"]
    assert ((shared / alone_t) >= 1.0 - 1e-9).all()  # sharing never makes a job faster here
    assert (shared / alone_t).max() > 1.05  # and the flood costs the all-to-all


def test_a_stored_study_resumes_without_running_again(tmp_path, monkeypatch):
    first = run(study(repetitions=2), tmp_path)
    assert first.runs_reused == 0

    def never(spec):
        raise AssertionError(f"{spec.run_id} ran again")

    monkeypatch.setattr(execute_module, "execute", never)
    monkeypatch.setattr("qoslab.sweep.executors.execute", never)
    again = run(study(repetitions=2), tmp_path)
    assert again.runs_reused == again.runs_total == first.runs_total
    pd.testing.assert_frame_equal(first.tables["jobs"], again.tables["jobs"])


def test_an_interrupted_study_keeps_what_finished(tmp_path):
    class StopAfterTwo(LocalExecutor):
        def run_into(self, specs, store):  # what a stage calls on local workers
            for n, record in enumerate(super().run_into(specs, store)):
                yield record
                if n == 1:
                    raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(study(repetitions=2), tmp_path, StopAfterTwo(1))
    again = run(study(repetitions=2), tmp_path)
    assert again.runs_reused == 2 and again.runs_total == 6


def test_a_failed_run_is_recorded_and_the_study_goes_on(tmp_path, monkeypatch):
    real = execute_module.execute

    def flaky(spec):
        if spec.policy.startswith("per-job[a2a=1"):
            raise RuntimeError("engine exploded")
        return real(spec)

    monkeypatch.setattr("qoslab.sweep.executors.execute", flaky)
    outcome = run(study([{"kind": "per-job", "assignment": "all", "weights": [254, 9]}]), tmp_path)
    runs = outcome.tables["runs"]
    failed = runs[runs["status"] != "completed"]
    assert list(failed["policy"]) == ["per-job[a2a=1 flood=0]"]
    assert "engine exploded" in failed.iloc[0]["error"]
    assert [row["run_id"] for row in outcome.failed] == list(failed["run_id"])
    assert len(runs) == 5  # 2 alone + default + 2 assignments: nothing else lost
    # Resuming tries the failed run again (a bug fixed, a worker lost) and keeps the rest.
    monkeypatch.setattr("qoslab.sweep.executors.execute", real)
    again = run(study([{"kind": "per-job", "assignment": "all", "weights": [254, 9]}]), tmp_path)
    assert again.runs_reused == 4 and set(again.tables["runs"]["status"]) == {"completed"}


def test_a_policy_that_cannot_be_applied_keeps_its_error_and_runs_nothing(tmp_path, monkeypatch):
    from qoslab.policies.base import PolicyError
    from qoslab.policies.per_job import PerJob

    real_apply, real_execute = PerJob.apply, execute_module.execute

    def refuse_one(self, scenario, ctx):
        if self.label().startswith("per-job[a2a=1"):
            raise PolicyError("assignment", "refused on purpose")
        return real_apply(self, scenario, ctx)

    ran = []

    def recording(spec):
        ran.append(spec.policy)
        return real_execute(spec)

    monkeypatch.setattr(PerJob, "apply", refuse_one)
    monkeypatch.setattr("qoslab.sweep.executors.execute", recording)
    policies = [{"kind": "per-job", "assignment": "all", "weights": [254, 9]}]
    outcome = run(study(policies), tmp_path)
    runs = outcome.tables["runs"]
    failed = runs[runs["status"] != "completed"]
    assert list(failed["policy"]) == ["per-job[a2a=1 flood=0]"]
    assert failed.iloc[0]["error"].startswith("policy could not be applied: ")
    assert "refused on purpose" in failed.iloc[0]["error"]
    assert "per-job[a2a=1 flood=0]" not in ran  # its placeholder never reached the executor
    # A resumed study tries the policy again: applied now, it runs and completes.
    monkeypatch.setattr(PerJob, "apply", real_apply)
    again = run(study(policies), tmp_path)
    assert set(again.tables["runs"]["status"]) == {"completed"}


def test_bad_scenarios_and_dead_workers_are_error_records_not_crashes():
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from qoslab.sweep.execute import RunSpec
    from qoslab.sweep.executors import _record

    bad = RunSpec("r0-y", 0, 1, "q", "shared", None, {"topology": 5})
    fine = {"seed": 1, "traffic": [{"load": 0.1}], "run": {"duration_us": 100}}
    records = list(LocalExecutor(2).run([RunSpec("r0-x", 0, 1, "p", "shared", None, fine), bad]))
    status = {r["run"]["run_id"]: r["run"]["status"] for r in records}
    assert status == {"r0-x": "completed", "r0-y": "error"}
    died: Future = Future()
    died.set_exception(BrokenProcessPool("a child process terminated abruptly"))
    record = _record(died, bad)
    assert record["run"]["status"] == "error" and "terminated abruptly" in record["run"]["error"]


def test_the_process_pool_keeps_no_record_it_has_handed_on():
    """A stage's records go to the store one at a time; the executor must not hold them all until
    the stage ends (a study's driver memory would grow with its runs)."""
    import gc
    import weakref

    from qoslab.sweep.execute import RunSpec

    scenario = {"seed": 1, "traffic": [{"load": 0.1}], "run": {"duration_us": 50}}
    executor = LocalExecutor(2)
    try:
        records = executor.run([RunSpec(f"r0-{i}", 0, 1, "p", "shared", None, scenario) for i in range(3)])
        first = next(records)
        table = weakref.ref(first["iterations"])
        del first
        next(records)  # the executor moves on to the next record
        gc.collect()
        assert table() is None
        assert len(list(records)) == 1
    finally:
        executor.close()


def test_local_processes_and_dask_give_identical_results(tmp_path):
    from distributed import LocalCluster

    s = study([{"kind": "per-job", "assignment": {"a2a": 0, "flood": 1}, "weights": [254, 9]}], repetitions=2)
    local = run(s, tmp_path / "local", LocalExecutor(2))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        executor = DaskExecutor(cluster)
        assert executor.workers == 2
        try:
            dask = run(s, tmp_path / "dask", executor)
        finally:
            executor.close()
    columns = ["run_id", "policy", "job", "runtime_us", "bytes_sent"]
    key = ["run_id", "job"]
    pd.testing.assert_frame_equal(
        local.tables["jobs"][columns].sort_values(key).reset_index(drop=True),
        dask.tables["jobs"][columns].sort_values(key).reset_index(drop=True),
    )


def test_exhaustive_search_finds_the_least_total_contention(tmp_path):
    s = study([{"kind": "search", "weight_sets": ["equal", [2286, 1]], "vls": 2}])
    outcome = run(s, tmp_path)
    search = outcome.search
    # Equal weights: {same VL, different VLs} (VLs interchangeable); 2286:1: all 4 mappings.
    assert len(search) == 2 + 4
    jobs = outcome.tables["jobs"]
    alone = jobs[jobs["mode"] == "alone"].set_index("job")["runtime_us"]
    totals = {}
    for candidate in search["candidate"]:
        shared = jobs[jobs["policy"] == candidate].set_index("job")["runtime_us"]
        totals[candidate] = float((shared - alone).sum())
    best = min(totals, key=totals.get)
    assert search.iloc[0]["candidate"] == best
    assert math.isclose(search.iloc[0]["value"], totals[best])
    q_opt = jobs[jobs["policy"] == "q-opt"].set_index("job")["runtime_us"]
    assert math.isclose(float((q_opt - alone).sum()), totals[best])


def test_a_search_whose_every_candidate_failed_publishes_no_best(tmp_path, monkeypatch):
    # A failed candidate's objective is inf; it ranked first among failures and was published as
    # q-opt (the review's studyE: 5 failed candidates, rank 1 listed under q-opt).
    real = execute_module.execute

    def candidates_fail(spec):
        if "/candidate[" in spec.policy:
            raise RuntimeError("engine exploded")
        return real(spec)

    monkeypatch.setattr("qoslab.sweep.executors.execute", candidates_fail)
    outcome = run(study([{"kind": "search", "vls": 2}]), tmp_path)
    assert len(outcome.search) == 2 and not outcome.search["value"].map(math.isfinite).any()
    assert "q-opt" not in set(outcome.tables["runs"]["policy"])
    assert "q-opt" not in set(outcome.tables["policies"]["policy"])
    said = [n for n in outcome.notes if n.startswith("search q-opt: every one of its 2 candidates failed")]
    assert said and "no policy is published as q-opt" in said[0], outcome.notes
    assert said[0] in json.loads((tmp_path / "study.json").read_text())["warnings"]


def test_an_exhaustive_search_refuses_a_budget_smaller_than_its_space_and_says_what_it_runs(tmp_path):
    # Before: budget was ignored without a word (the review's studyD simulated all 69 of a
    # budget-3 space) and the description said "at most 3 candidates".
    sets = {"weight_sets": ["equal", [64, 128, 192, 255]]}  # 2 jobs on 4 VLs: 2 partitions + 4^2 = 18
    with pytest.raises(ScenarioError) as caught:
        study([{"kind": "search", "method": "exhaustive", "budget": 3, **sets}])
    assert "study.toml: policies[0].budget: 3, but method = \"exhaustive\" simulates every candidate of the space, " \
           "18 here" in str(caught.value)
    study([{"kind": "search", "method": "exhaustive", "budget": 18, **sets}])  # the whole space: accepted
    runner = StudyRunner(study([{"kind": "search", "method": "exhaustive", **sets},
                                {"kind": "search", "name": "t", "method": "tpe", "budget": 3, **sets}]),
                         tmp_path, LocalExecutor(1), progress=False)
    described = {p["name"]: p["description"] for p in runner._describe()["policies"]}
    assert described["q-opt"].endswith("(exhaustive: every candidate of the space); the space has 18 candidates, all "
                                       "simulated"), described
    assert described["t"].endswith("(Optuna TPE, at most 3 candidates); the space has 18 candidates, at most 3 "
                                   "simulated (TPE)"), described
    assert study_size(study([{"kind": "search", "method": "exhaustive", **sets}]))["search_runs"] == {"q-opt": 18}  # 1 repetition


def test_the_worst_slowdown_search_scores_candidates_by_the_figure_it_reports(tmp_path):
    # The objective averaged each repetition's worst job; policies.parquet reports the worst of the
    # jobs' averaged slowdowns, so the two could rank candidates differently.
    s = study([{"kind": "search", "weight_sets": ["equal", [2286, 1]], "vls": 2, "objective": "worst-slowdown"}],
              repetitions=2, scenario={**copy.deepcopy(SCENARIO), "jobs": [
                  {**job, "placement": "random"} for job in SCENARIO["jobs"]]})
    outcome = run(s, tmp_path)
    slow = slowdowns(outcome.tables["jobs"])  # candidates' runs too
    for candidate, value in zip(outcome.search["candidate"], outcome.search["value"], strict=True):
        per_job = slow[slow["policy"] == candidate].groupby("job")["slowdown"].mean()
        assert math.isclose(value, per_job.max()), candidate
    winner = outcome.tables["policies"].set_index("policy").loc[outcome.search.iloc[0]["search"]]
    assert math.isclose(winner["worst_slowdown"], outcome.search.iloc[0]["value"])
    # Where the worst job differs between repetitions the two figures part: slowdowns (2, 1) then
    # (1, 2) are 2.0 averaged per repetition but 1.5 as the worst job mean (what is reported).
    from types import SimpleNamespace

    records = {f"r{rep}": {"run": {"status": "completed"}, "jobs": [{"job": "a", "runtime_us": a},
                                                                    {"job": "b", "runtime_us": b}]}
               for rep, (a, b) in enumerate([(200.0, 100.0), (100.0, 200.0)])}
    alone = {job: SimpleNamespace(runtime_us=100.0) for job in ("a", "b")}
    fake = SimpleNamespace(store=SimpleNamespace(get=records.__getitem__))
    specs = [SimpleNamespace(run_id=f"r{rep}", repetition=rep) for rep in (0, 1)]
    contexts = {rep: SimpleNamespace(alone=alone) for rep in (0, 1)}
    for objective, expected in (("worst-slowdown", 1.5), ("mean-slowdown", 1.5), ("total-contention", 100.0)):
        value = StudyRunner._objective(fake, SimpleNamespace(objective=objective), specs, contexts)  # type: ignore[arg-type]
        assert value == pytest.approx(expected), objective


def test_tpe_search_keeps_to_its_budget_and_repeats(tmp_path):
    policies = [{"kind": "search", "weight_sets": [[254, 9], [9, 254], [64, 64]], "vls": 2, "budget": 3, "method": "tpe"}]
    first = run(study(policies), tmp_path / "a").search
    second = run(study(policies), tmp_path / "b").search
    assert len(first) <= 3
    assert list(first["candidate"]) == list(second["candidate"])


def test_a_tpe_search_takes_the_same_path_on_any_number_of_workers(tmp_path):
    # Its batch is a key of its own: it had been the number of workers, so the best candidate
    # depended on the machine the study ran on.
    # Past TPE's 10 random start-up trials, where what it was told steers what it asks.
    policies = [{"kind": "search", "weight_sets": [[254, 9, 1], [9, 254, 1], [64, 64, 64], [128, 32, 8]], "vls": 3,
                 "budget": 14, "method": "tpe", "batch": 2}]
    one = StudyRunner(study(policies), tmp_path / "one", LocalExecutor(1), progress=False).run().search
    three = StudyRunner(study(policies), tmp_path / "three", LocalExecutor(3), progress=False).run().search
    assert list(one["candidate"]) == list(three["candidate"]) and len(one) == 14


def test_a_policy_sets_the_vls_the_ports_operate_and_the_port_buffer_follows(tmp_path):
    """1 VL x the whole port buffer against 2 VLs x half of it, as the seeds compare them."""
    s = study([{"kind": "default", "name": "default", "data_vls": 1},
               {"kind": "multi-vl", "by": "destination", "data_vls": 2},
               {"kind": "search", "vls": 2, "data_vls": 2, "method": "exhaustive"}],
              scenario={**copy.deepcopy(SCENARIO), "fabric": {"port_buffer_bytes": 65536}})
    assert [p.label() for p in s.concrete_policies()] == ["default", "multi-vl[all,destination] on 2 VLs", "q-opt"]
    plan = StudyPlan(s)
    rep = plan.repetitions[0]
    default, spread, search = s.concrete_policies()
    base_hosts = [j["hosts"] for j in rep.scenario["jobs"]]
    for policy, vls in ((default, 1), (spread, 2)):
        spec = plan.shared_spec(rep, policy, plan.context(rep))
        fabric = spec.scenario["fabric"]
        assert (fabric["data_vls"], fabric["port_buffer_bytes"]) == (vls, 65536)
        assert [j["hosts"] for j in spec.scenario["jobs"]] == base_hosts  # same placement
        assert Scenario.from_dict(spec.scenario).to_engine_config()["fabric"]["vl_buffer_bytes"] == 65536 // vls
    # The baseline's QoS tables are derived again for 1 VL (the base scenario's were for 4).
    assert plan.shared_spec(rep, default, plan.context(rep)).scenario["qos"]["swe"]["vlarb_low"] == [[0, 255]]
    candidate = search.candidate(((0, 1), 0), rep.jobs, plan.qos_vls(search))
    assert candidate.data_vls == 2
    assert plan.shared_spec(rep, candidate, plan.context(rep)).scenario["fabric"]["data_vls"] == 2
    outcome = run(s, tmp_path)
    runs = outcome.tables["runs"]
    assert set(runs["status"]) == {"completed"}, runs[["policy", "status", "error"]]
    described = json.loads((tmp_path / "study.json").read_text())["policies"]
    assert described[0]["parameters"]["data_vls"] == 1 and "ports operate 1 data VL" in described[0]["description"]


# A 3-group Dragonfly+ with adaptive routing: 2 routing layers (routing.vls = 2) on the default 4
# data VLs leave 2 VLs for QoS; the review's studyE/studyG setups, made small (12 hosts).
DRAGONFLY_ADAPTIVE = {
    "seed": 1,
    "topology": {"kind": "dragonfly-plus", "groups": 3, "leaves_per_group": 2, "spines_per_group": 2, "hosts_per_leaf": 2,
                 "global_links_per_spine": 1},
    "routing": {"algorithm": "adaptive"},
    "jobs": [
        {"name": "a2a", "nodes": 4, "placement": "random", "workload": {"kind": "all-to-all", "bytes": 4096, "iterations": 2}},
        {"name": "ar", "nodes": 4, "placement": "random",
         "workload": {"kind": "collective-loop", "collective": "allreduce", "bytes": 1024, "iterations": 5}},
        {"name": "flood", "nodes": 4, "placement": "random", "workload": {"kind": "flood-pairs", "iterations": 4}},
    ],
}


def test_policies_on_routing_layers_use_the_vls_qos_is_left(tmp_path):
    # Before: "every VL" meant the 4 data VLs, --plan accepted it, and every run of multi-vl,
    # vl-mapping and the search failed (qos.vlarb_low: entry "2:64" is for VL2, but routing.vls = 2 ...).
    policies = [{"kind": "default"}, {"kind": "multi-vl"}, {"kind": "vl-mapping"}, {"kind": "search", "budget": 16}]
    s = Study.from_dict({"scenario": copy.deepcopy(DRAGONFLY_ADAPTIVE), "policies": policies, "repetitions": 1}, "study.toml")
    base = s.base()
    assert (base.fabric.data_vls, base.routing.vls, base.qos_vls()) == (4, 2, 2)
    plan = StudyPlan(s)
    rep = plan.repetitions[0]
    _, spread, _, search = s.concrete_policies()
    # 3 jobs on at most 2 interchangeable VLs: S(3,1) + S(3,2) = 1 + 3 partitions (4 VLs: 5).
    assert search.space_size(3, plan.qos_vls(search)) == 4
    applied = plan.shared_spec(rep, spread, plan.context(rep)).scenario
    assert {vl for vl, _ in applied["qos"]["vlarb_low"]} == {0, 1}
    assert {job["sl_policy"]["sls"] == [0, 1] for job in applied["jobs"]} == {True}
    outcome = run(s, tmp_path)
    runs = outcome.tables["runs"]
    assert set(runs["status"]) == {"completed"}, runs[["policy", "status", "error"]]
    assert len(outcome.search) == 4 and outcome.search["value"].map(math.isfinite).all()
    assert {"multi-vl[all,connection]", "vl-mapping[spread-by-load,equal]", "q-opt"} <= set(outcome.tables["policies"]["policy"])


@pytest.mark.parametrize(
    "policy, key, words",
    [
        ({"kind": "per-job", "assignment": {"ar": 3}}, "policies[0].weights",
         "the policy uses 4 SLs (the default weights, [2286, 254, 9, 1]), each on its own VL, but routing leaves only 2 "
         "VLs for QoS (fabric.data_vls = 4 divided among routing.vls = 2 routing layers)"),
        ({"kind": "multi-vl", "vls": 4}, "policies[0].vls", "4 VLs, but routing leaves only 2 VLs for QoS"),
        ({"kind": "vl-mapping", "weights": [1, 2, 3]}, "policies[0].weights", "3 VLs, but routing leaves only 2 VLs"),
        ({"kind": "search", "vls": 4}, "policies[0].vls", "4 VLs, but routing leaves only 2 VLs for QoS"),
        ({"kind": "search", "weight_sets": [[1, 2, 3, 4]]}, "policies[0].weight_sets", "4 VLs, but routing leaves only 2"),
        ({"kind": "multi-vl", "vls": 2, "data_vls": 2}, "policies[0].vls",
         "routing leaves only 1 VLs for QoS (this policy's data_vls = 2 divided among routing.vls = 2 routing layers)"),
    ],
)
def test_a_policy_needing_more_vls_than_routing_leaves_is_refused_before_any_run(policy, key, words):
    with pytest.raises(ScenarioError) as caught:
        Study.from_dict({"scenario": copy.deepcopy(DRAGONFLY_ADAPTIVE), "policies": [policy]}, "study.toml")
    text = str(caught.value)
    assert f"study.toml: {key}" in text and words in text, text


def test_a_folder_written_before_port_buffers_holds_the_same_study(tmp_path):
    """Its marker fingerprints resolved scenarios that held vl_buffer_bytes = 32768 where they now
    hold the 128 KiB port buffer: the same engine config, so the same study, resumed."""
    from qoslab.sweep.folder import MARKER, study_identity

    s = study()
    plan = StudyPlan(s)
    legacy = []
    for rep in plan.repetitions:
        scenario = copy.deepcopy(rep.scenario)
        fabric = scenario["fabric"]
        assert fabric.pop("port_buffer_bytes") == 131072 and fabric["data_vls"] == 4
        fabric["vl_buffer_bytes"] = 32768
        legacy.append(scenario)
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / MARKER).write_text(json.dumps(study_identity("policies", s.title(), s.source, legacy)))
    outcome = run(s, tmp_path)
    assert set(outcome.tables["runs"]["status"]) == {"completed"}


# -- the command line -----------------------------------------------------------------------


def test_cli_runs_a_study_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        'repetitions = 1\nscenario = "base.toml"\n[[policies]]\nkind = "per-job"\nassignment = { a2a = 0, flood = 1 }\n'
        "weights = [254, 9]\n"
    )
    (tmp_path / "base.toml").write_text(
        '[topology]\nkind = "xgft"\nm = [4, 4]\nw = [1, 2]\n'
        '[[jobs]]\nname = "a2a"\nnodes = 4\nplacement = "random"\nworkload = { kind = "all-to-all", bytes = 32768, iterations = 2 }\n'
        '[[jobs]]\nname = "flood"\nnodes = 4\nplacement = "random"\nworkload = { kind = "flood-pairs", iterations = 10 }\n'
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["study", str(path), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "policies (mean over repetitions)" in result.output and "report.html" in result.output
    for name in ("runs.parquet", "jobs.parquet", "iterations.parquet", "levels.parquet", "slowdown.parquet",
                 "policies.parquet", "study.json", "report.html"):
        assert (out / name).exists()
    assert list(pd.read_parquet(out / "policies.parquet")["policy"]) == ["default", "per-job[a2a=0 flood=1]"]


def test_plan_counts_the_runs_a_study_makes_without_simulating(tmp_path, monkeypatch):
    policies = [{"kind": "default"}, {"kind": "per-job", "assignment": "all", "weights": [254, 9]},
                {"kind": "search", "weight_sets": ["equal", [2286, 1]], "vls": 2}]
    s = study(policies, repetitions=2)
    path = tmp_path / "s.toml"
    path.write_text('repetitions = 2\nscenario = "base.toml"\n[[policies]]\nkind = "default"\n'
                    '[[policies]]\nkind = "per-job"\nassignment = "all"\nweights = [254, 9]\n'
                    '[[policies]]\nkind = "search"\nweight_sets = ["equal", [2286, 1]]\nvls = 2\n')
    (tmp_path / "base.toml").write_text(
        'seed = 3\n[topology]\nkind = "xgft"\nm = [4, 4]\nw = [1, 2]\n'
        '[[jobs]]\nname = "a2a"\nnodes = 4\nplacement = "random"\nworkload = { kind = "all-to-all", bytes = 32768, iterations = 2 }\n'
        '[[jobs]]\nname = "flood"\nnodes = 4\nranks_per_node = 3\nplacement = "random"\n'
        'workload = { kind = "flood-pairs", iterations = 10 }\n')

    def no_simulation(*args, **kwargs):
        raise AssertionError("--plan simulated something")

    monkeypatch.setattr(execute_module, "execute", no_simulation)
    monkeypatch.setattr("qoslab.sweep.executors.execute", no_simulation)
    result = CliRunner().invoke(app, ["study", str(path), "--plan", "--out", str(tmp_path / "plan")])
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert plan["hosts"] == 16
    assert plan["jobs"] == {"a2a": {"nodes": 4, "ranks": 4, "ranks_per_node": 1},
                            "flood": {"nodes": 4, "ranks": 12, "ranks_per_node": 3}}
    # 2 repetitions x (2 jobs alone + default + 2 assignments) + the search's 2 + 4 candidates each.
    assert plan["runs"] == 2 * (2 + 1 + 2) + 2 * (2 + 4)
    assert not (tmp_path / "plan" / "runs").exists()
    monkeypatch.undo()
    s = Study.from_toml(path)
    outcome = run(s, tmp_path / "out")
    assert outcome.runs_total == plan["runs"] == len(list((tmp_path / "out" / "runs").glob("*/record.json")))


def test_cli_bad_study_exits_2_without_traceback(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[scenario]\n[[scenario.jobs]]\nnodes = 2\nworkload = { kind = "ping-pong" }\n[[policies]]\nkind = "per-rank"\njob = "x"\n')
    result = CliRunner().invoke(app, ["study", str(path)])
    assert result.exit_code == 2
    assert "policies[0].job" in result.output and "Traceback" not in result.output


def test_slurm_executor_keys_become_the_job_script(monkeypatch):
    from qoslab.sweep.executors import slurm_cluster

    cluster = slurm_cluster({"cores": 2, "memory": "4GB", "queue": "batch", "walltime": "01:00:00", "account": "qos"})
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    for line in ("#SBATCH -p batch", "#SBATCH -t 01:00:00", "#SBATCH -A qos", "--nthreads 2"):
        assert line in script, script
    with pytest.raises(ScenarioError, match="executor.slurm"):
        slurm_cluster({"cores": 1, "memory": "1GB", "no_such_key": 3})


def test_a_search_candidate_that_does_not_complete_leaves_the_study_whole(tmp_path, monkeypatch):
    # A candidate scored inf only loses the search; the study exited 5 ("change the scenario to
    # complete them") although default and q-opt both completed every repetition.
    from qoslab.sweep import executors

    study = tmp_path / "s.toml"
    study.write_text('[scenario.topology]\nkind = "single-switch"\nhosts = 4\n'
                     + ''.join(f'[[scenario.jobs]]\nname = "{n}"\nnodes = 2\nworkload = {{ kind = "ping-pong", '
                               'iterations = 2 }\n' for n in "ab")
                     + '[[policies]]\nkind = "default"\n[[policies]]\nkind = "search"\nvls = 2\n')
    real, cut = executors.execute, []

    def one_candidate_at_its_time_limit(spec):
        record = real(spec)
        if "/candidate[" in spec.policy and not cut:
            cut.append(spec.policy)
            record["run"] = {**record["run"], "status": "time_limit"}
            record["jobs"] = [{**job, "completed": False, "runtime_us": math.nan} for job in record["jobs"]]
        return record

    monkeypatch.setattr(executors, "execute", one_candidate_at_its_time_limit)
    result = CliRunner().invoke(app, ["study", str(study), "--out", str(tmp_path / "o"), "--workers", "1"])
    assert cut and result.exit_code == 0, result.output
    runs = pd.read_parquet(tmp_path / "o" / "runs.parquet")
    assert (runs.loc[runs["policy"] == cut[0], "status"] == "time_limit").all()  # kept, and listed as such
    report = (tmp_path / "o" / "report.html").read_text()
    assert "did not complete" not in report and "time limit" not in report
