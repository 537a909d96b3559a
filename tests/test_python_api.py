"""The public Python API (issue 18, part 5): a study from a file, its plan, its run with tables and
figures, short reprs and notebook views, and a typed package."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import qoslab

EXAMPLE = Path(__file__).parent.parent / "examples" / "notebook"


def test_a_study_plans_and_runs_from_python(tmp_path):
    for name in ("scenario.toml", "study.toml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    study = qoslab.Study.from_toml(tmp_path / "study.toml")
    plan = study.plan()
    assert plan["runs"] == 8 and plan["alone_runs"] == 4 and plan["shared_runs"] == 4
    outcome = study.run(tmp_path / "out", workers=1)
    assert list(outcome.tables["policies"]["policy"]) == ["default", "per-job[a2a=0 flood=1]"]
    assert {"runs", "jobs", "slowdown", "policies"} <= set(outcome.tables)
    assert outcome.report == tmp_path / "out" / "report.html"
    assert tmp_path / "out" / "figures" / "slowdown.png" in outcome.figures
    text = repr(outcome)
    assert text.startswith("StudyOutcome(") and "8 runs (0 reused, 0 not completed)" in text and len(text) < 300
    view = outcome._repr_html_()
    assert "<table" in view and "per-job[a2a=0 flood=1]" in view and "data:image/png;base64," in view
    again = study.run(tmp_path / "out", workers=1)  # resumes: nothing runs again
    assert again.runs_reused == 8


def test_load_study_gives_either_kind():
    tail = qoslab.load_study(Path(__file__).parent.parent / "examples" / "dragonfly-tail" / "study.toml")
    assert isinstance(tail, qoslab.TailStudy)
    assert isinstance(qoslab.load_study(EXAMPLE / "study.toml"), qoslab.Study)


def test_a_run_result_shows_itself_briefly():
    result = qoslab.simulate(qoslab.Scenario.from_toml(EXAMPLE / "scenario.toml"))
    text = repr(result)
    assert text.startswith("RunResult('two-jobs', completed,") and "links (" in text and len(text) < 300
    view = result._repr_html_()
    assert "<table>" in view and "packets_delivered" in view and "a2a, flood" in view


def test_the_package_is_typed_and_imports_the_study_api_lazily():
    assert (Path(qoslab.__file__).parent / "py.typed").is_file()
    done = subprocess.run([sys.executable, "-c", "import sys, qoslab; print('qoslab.study.model' in sys.modules)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_run_refuses_what_the_command_line_refuses(tmp_path):
    import pytest
    from qoslab.errors import ScenarioError

    study = qoslab.Study.from_toml(EXAMPLE / "study.toml")
    for executor, words in (("bogus", "executor.kind"), ("dask", "needs the scheduler address"), (42, "executor")):
        with pytest.raises(ScenarioError, match=words):
            study.run(tmp_path / "out", executor=executor)
    for workers in (-1, "2", 1.5):
        with pytest.raises(ScenarioError, match="workers"):
            study.run(tmp_path / "out", workers=workers)
    assert not (tmp_path / "out").exists()


def test_a_tail_study_read_as_a_policy_study_says_how_to_read_it():
    import pytest
    from qoslab.errors import ScenarioError

    with pytest.raises(ScenarioError, match=r"kind: a tail-latency study: read it with qoslab.load_study"):
        qoslab.Study.from_toml(Path(__file__).parent.parent / "examples" / "dragonfly-tail" / "study.toml")


def test_the_lazily_loaded_study_api_is_typed_and_listed(tmp_path):
    # `qoslab.Study` typed as object: mypy refused the documented `qoslab.Study.from_toml(...)`,
    # and tab completion did not offer it.
    assert {"Study", "TailStudy", "load_study"} <= set(dir(qoslab))
    script = tmp_path / "use.py"
    script.write_text('import qoslab\n\nstudy = qoslab.Study.from_toml("study.toml")\nother = qoslab.load_study("s.toml")\n'
                      'print(study.plan(), other)\n')
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(script)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout


def test_a_tail_study_s_unknown_key_lists_its_own_keys_and_a_bare_study_says_how_to_make_it():
    # The hint listed the policy study's keys (repetitions, policies, sweep) for a tail study,
    # and Study(...) failed with a bare AssertionError in plan().
    with pytest.raises(qoslab.ScenarioError) as caught:
        qoslab.TailStudy.from_dict({"kind": "tail-latency", "scenario": "x.toml", "nope": 1}, "t.toml")
    hint = str(caught.value)
    assert "nope: unknown key" in hint and "localities" in hint and "repetitions" not in hint, hint
    with pytest.raises(qoslab.ScenarioError, match=r"make it with Study.from_dict\(data, source\)"):
        qoslab.Study(scenario="x.toml", policies=[{"kind": "default"}]).plan()


def test_a_scenario_is_read_only_and_says_how_to_change_it():
    # s.seed = 2 was taken, and the run kept the placements drawn for seed 1.
    s = qoslab.Scenario(topology={"kind": "xgft", "m": [4, 4], "w": [1, 2]},
                        jobs=[{"name": "a", "nodes": 4, "placement": "random", "workload": {"kind": "ping-pong"}}])
    for target, key in ((s, "seed"), (s.jobs[0], "nodes"), (s.jobs[0].workload, "iterations"), (s.fabric, "data_vls")):
        with pytest.raises(AttributeError, match=rf"\.{key}: a scenario's keys are read-only .*with_overrides"):
            setattr(target, key, 3)
    assert s.with_overrides(["seed=2"]).placements() != s.placements()


def test_export_opensm_takes_a_path_as_a_string(tmp_path):
    # str / str: a TypeError before.
    from qoslab.deploy import export_opensm

    s = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4}, traffic=[{"load": 0.1}])
    written = export_opensm(s, str(tmp_path / "deploy")).written
    assert (tmp_path / "deploy" / "opensm.conf") in written


def test_a_scenario_whose_lists_changed_in_place_is_refused_when_run():
    # The tables are read-only but the lists hold them: s.jobs[0] = ... ran on the old placement.
    s = qoslab.Scenario(topology={"kind": "xgft", "m": [4, 4], "w": [1, 2]},
                        jobs=[{"name": "a", "nodes": 4, "placement": "random", "workload": {"kind": "ping-pong"}}])
    s.jobs[0] = s.jobs[0].model_copy(update={"nodes": 12})
    with pytest.raises(qoslab.ScenarioError, match="jobs: changed after the scenario was made"):
        qoslab.simulate(s)
    s.jobs.pop()
    with pytest.raises(qoslab.ScenarioError, match="jobs: changed after"):
        qoslab.describe(s)
