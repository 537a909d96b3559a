"""End to end through the compiled engine: simulate(), describe(), and the run/check/study commands."""

import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pyarrow.parquet as pq
import pytest
import qoslab
from qoslab.cli import app
from typer.testing import CliRunner

runner = CliRunner()
# The module, not the function the package exports under the same name.
simulate_module = importlib.import_module("qoslab.simulate")

SMALL = """
name = "small"
seed = 7

[topology]
kind = "xgft"
m = [4, 2]
w = [1, 2]

[[traffic]]
pattern = "uniform"
load = 0.3
message_bytes = 8192

[[traffic]]
pattern = "incast"
hosts = "4-7"
destinations = [1]
load = "saturate"
sl = 1

[run]
duration_us = 40
warmup_us = 5
"""

SUMMARY_KEYS = {
    "qoslab_version",
    "seed",
    "scenario",
    "hosts",
    "switches",
    "links",
    "sim_time_ns",
    "wall_seconds",
    "events",
    "packet_hops",
    "offered_load",
    "accepted_load",
    "packets_delivered",
    "bytes_delivered",
    "latency_ns",
    "by_sl",
    "jobs",
    "interrupted",
}
LINK_COLUMNS = [
    "link",
    "vl",
    "src",
    "src_node",
    "src_port",
    "dst",
    "dst_node",
    "dst_port",
    "packets",
    "bytes",
    "busy_ns",
    "credit_stall_ns",
]


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    return path


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result


def test_simulate_summary_and_tables(small):
    scenario = qoslab.Scenario.from_toml(small)
    result = qoslab.simulate(scenario)
    summary = result.summary
    assert set(summary) >= SUMMARY_KEYS
    assert list(summary)[:3] == ["qoslab_version", "seed", "scenario"]
    assert summary["seed"] == 7 and summary["scenario"] == scenario.resolved()
    assert (summary["hosts"], summary["switches"]) == (8, 4)
    assert summary["jobs"] == {} and summary["interrupted"] is False
    assert set(summary["latency_ns"]) >= {"mean", "p50", "p99", "p999", "max"}
    assert set(summary["by_sl"]) == {"0", "1"}
    assert summary["wall_seconds"] > 0

    assert result.links.column_names == LINK_COLUMNS
    links = result.links.to_pandas()
    assert len(links) == 2 * summary["links"] * scenario.fabric.data_vls  # each cable both ways, per VL
    assert links["src"].notna().all() and links["dst"].notna().all()
    assert links["bytes"].sum() > 0
    assert result.messages is None


def test_messages_table(small):
    scenario = qoslab.Scenario.from_toml(small).with_overrides(["run.messages=true"])
    messages = qoslab.simulate(scenario).messages
    assert messages is not None and messages.num_rows > 0
    assert {"src", "dst", "sl", "bytes", "created_ns", "delivered_ns"} <= set(messages.column_names)


def test_same_seed_same_results(small):
    scenario = qoslab.Scenario.from_toml(small)
    first, second = qoslab.simulate(scenario), qoslab.simulate(scenario)
    strip = lambda s: {k: v for k, v in s.items() if k != "wall_seconds"}
    assert strip(first.summary) == strip(second.summary)
    assert first.links.equals(second.links)


def test_save(small, tmp_path):
    result = qoslab.simulate(qoslab.Scenario.from_toml(small).with_overrides(["run.messages=true"]))
    out = result.save(tmp_path / "out")
    assert json.loads((out / "summary.json").read_text()) == json.loads(json.dumps(result.summary))
    assert pq.read_table(out / "links.parquet").equals(result.links)
    assert pq.read_table(out / "messages.parquet").num_rows == result.messages.num_rows


def test_describe(small):
    fabric = qoslab.describe(qoslab.Scenario.from_toml(small))
    assert (fabric["hosts"], fabric["switches"]) == (8, 4)


def test_engine_config_error_becomes_scenario_error(tmp_path):
    # Only the engine knows that host 3 has nobody to send to.
    path = tmp_path / "lonely.toml"
    path.write_text('[[traffic]]\nhosts = [3]\ndestinations = [3]\nload = 0.5\n')
    with pytest.raises(qoslab.ScenarioError) as caught:
        qoslab.simulate(qoslab.Scenario.from_toml(path))
    assert str(caught.value).startswith(f"{path}: traffic[0].destinations: ")


def test_cli_run_writes_results(small, tmp_path):
    out = tmp_path / "out"
    result = invoke("run", small, "--out", out, "--set", "run.messages=true", "--set", "seed=3")
    assert result.exit_code == 0, result.output
    assert "accepted load" in result.stdout and "per service level" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 3 and summary["scenario"]["run"]["messages"] is True
    assert (out / "links.parquet").exists() and (out / "messages.parquet").exists()


def test_cli_run_engine_config_error_exits_2(tmp_path):
    path = tmp_path / "lonely.toml"
    path.write_text('[[traffic]]\nhosts = [3]\ndestinations = [3]\nload = 0.5\n')
    result = invoke("run", path, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert f"{path}: traffic[0].destinations: " in result.stderr


def test_cli_check_describes_fabric(small):
    result = invoke("check", small)
    assert result.exit_code == 0, result.output
    for word in ("hosts", "switches", "links", "levels", "QoS"):
        assert word in result.stdout


def test_cli_check_shows_the_buffer_division(tmp_path):
    path = tmp_path / "buffers.toml"
    path.write_text("[fabric]\ndata_vls = 2\nport_buffer_bytes = 65536\n")
    result = invoke("check", path)
    assert result.exit_code == 0, result.output
    assert "65,536 bytes per port (fabric.port_buffer_bytes), divided among 2 data VLs: 32,768 bytes (512 credits) per VL" \
        in " ".join(result.stdout.split())
    result = invoke("check", path, "--set", "fabric.data_vls=8")
    assert "divided among 8 data VLs: 8,192 bytes (128 credits) per VL" in " ".join(result.stdout.split())


def test_interrupted_run_saves_partial_results(small, tmp_path, monkeypatch):
    real = simulate_module.engine()

    class StoppedEngine:  # the real engine, as if Ctrl-C had stopped it
        validate = staticmethod(real.validate)
        write_parquet = staticmethod(real.write_parquet)

        @staticmethod
        def run(config, traces=None, progress=None):
            raw = real.run(config, traces, progress)
            raw["summary"]["interrupted"] = True
            return raw

    monkeypatch.setattr(simulate_module, "engine", lambda: StoppedEngine)
    with pytest.raises(qoslab.Interrupted) as caught:
        qoslab.simulate(qoslab.Scenario.from_toml(small))
    assert caught.value.result.summary["interrupted"] is True

    out = tmp_path / "out"
    result = invoke("run", small, "--out", out)
    assert result.exit_code == 130
    assert json.loads((out / "summary.json").read_text())["interrupted"] is True

    # Whatever else runs the engine stops too, as on Ctrl-C itself: `validate` said nothing of
    # it (a traceback), and a study's run was stored as a failed run before the next one began.
    result = invoke("validate")
    assert result.exit_code == 130, result.output
    from qoslab.sweep.execute import RunSpec, execute

    spec = RunSpec(run_id="r0", repetition=0, seed=1, policy="p", mode="shared", alone_job=None,
                   scenario=qoslab.Scenario.from_toml(small).model_dump(mode="json", exclude_none=True),
                   source=str(small))
    with pytest.raises(KeyboardInterrupt):
        execute(spec)


def test_engine_bug_exits_3(small, monkeypatch):
    class BrokenEngine:
        validate = staticmethod(simulate_module.engine().validate)

        @staticmethod
        def run(config, traces=None, progress=None):
            raise qoslab.EngineError("credit counter went negative")

    monkeypatch.setattr(simulate_module, "engine", lambda: BrokenEngine)
    result = invoke("run", small)
    assert result.exit_code == 3
    assert "internal error" in result.stderr and "credit counter went negative" in result.stderr


def test_check_reports_what_only_building_the_traffic_finds(tmp_path):
    """A shift equal to the host count sends every host to itself: check must say so, like run."""
    from qoslab.cli import app
    from typer.testing import CliRunner

    path = tmp_path / "self.toml"
    path.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n[[traffic]]\npattern = "shift"\nshift = 4\nload = 0.5\n')
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 2
    assert "traffic[0].shift" in result.output and "Traceback" not in result.output


def test_traffic_on_an_unweighted_vl_is_warned_about(tmp_path):
    from qoslab.cli import app
    from typer.testing import CliRunner

    path = tmp_path / "starved.toml"
    path.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n[qos]\nvlarb_low = "0:255"\n'
                    '[[traffic]]\nload = 0.1\nsl = 1\n[run]\nduration_us = 20\nwarmup_us = 2\n')
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 0
    assert "SL1 maps to VL1" in result.output and "never be sent" in result.output
    quiet = tmp_path / "fine.toml"
    quiet.write_text(path.read_text().replace('"0:255"', '"0:255,1:10"'))
    assert "warning" not in CliRunner().invoke(app, ["check", str(quiet)]).output


def test_study_without_file_runs_the_default_study(tmp_path):
    import pandas as pd

    out = tmp_path / "study"
    result = invoke("study", "--out", out)
    assert result.exit_code == 0, result.output
    for name in ("report.html", "policies.parquet", "slowdown.parquet", "runs.parquet", "study.json"):
        assert (out / name).exists()
    runs = pd.read_parquet(out / "runs.parquet")
    assert set(runs["status"]) == {"completed"}
    policies = json.loads((out / "study.json").read_text())["policies"]
    kinds = {p["kind"] for p in policies}
    assert kinds == {"default", "per-job", "per-rank", "per-message", "multi-vl"}
    slow = pd.read_parquet(out / "slowdown.parquet").groupby(["policy", "job"])["slowdown"].mean()
    # Contention costs the jobs under the default policy, and the job given the top SL comes
    # back near its alone time.
    assert slow["default"].max() > 1.3
    assert slow[("per-job[milc first]", "milc")] < 1.1 < slow[("default", "milc")]
    # 10% of MILC's ranks chosen by the latency of their sends recover part of what the whole
    # job on the high SL gains, more than a random 10%, at a fraction of the others' cost.
    per_rank, random_ranks = slow[("per-rank[milc,0.1,slowest-sends]", "milc")], slow[("per-rank[milc,0.1,random]", "milc")]
    assert per_rank < random_ranks < slow[("default", "milc")]
    totals = pd.read_parquet(out / "policies.parquet").set_index("policy")["total_contention_us"]
    assert totals["per-rank[milc,0.1,slowest-sends]"] < totals["default"] < totals["per-job[milc high]"]
    page = (out / "report.html").read_text()
    assert "The best policy by total contention is" in page


def test_an_undefined_figure_prints_as_a_dash_not_nan():
    # vs_default_pct is undefined when the default policy has no contention at all.
    from qoslab.cli_render import fmt

    assert fmt(float("nan")) == "-" and fmt(None) == "-" and fmt(2.5) == "2.5" and fmt(12345.0) == "12,345"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_run_stopped_by_a_signal_writes_what_it_measured(tmp_path, sig):
    """SIGTERM is what Slurm sends at a job's time limit: the run stops as on Ctrl-C, keeping its
    partial results (before, SIGTERM ended the process and nothing was written)."""
    toml = tmp_path / "long.toml"
    toml.write_text('[topology]\nkind = "xgft"\nm = [8, 4]\nw = [1, 2]\n[[traffic]]\nload = 0.8\n'
                    '[run]\nduration_us = 400000\n')
    qoslab_cli = shutil.which("qoslab")
    assert qoslab_cli
    # SIGINT as a terminal's Ctrl-C sends it: a test suite run from a background job inherits
    # SIGINT ignored, which qoslab honours, as a program started in the background should.
    proc = subprocess.Popen([qoslab_cli, "run", str(toml), "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    summary = tmp_path / "out" / "summary.json"
    time.sleep(3)  # started, and simulating (the whole run takes minutes)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "partial results written" in err, err
    assert json.loads(summary.read_text())["interrupted"] is True


def test_set_can_mend_what_the_file_alone_lacks(tmp_path):
    # The file alone is refused (its default warm-up exceeds its duration); --set is applied first.
    toml = tmp_path / "short.toml"
    toml.write_text('[topology]\nkind = "single-switch"\nhosts = 2\n[[traffic]]\nload = 0.3\n[run]\nduration_us = 5\n')
    alone = CliRunner().invoke(app, ["check", str(toml)])
    assert alone.exit_code == 2 and "run.warmup_us" in alone.stderr
    mended = CliRunner().invoke(app, ["check", str(toml), "--set", "run.warmup_us=0"])
    assert mended.exit_code == 0, mended.output
    bad = CliRunner().invoke(app, ["check", str(toml), "--set", "run.warmup_us=9"])
    assert bad.exit_code == 2 and "(from --set)" in bad.stderr


def test_set_reaches_the_default_topology_of_a_file_without_one(tmp_path):
    toml = tmp_path / "notopo.toml"
    toml.write_text("seed = 1\n[[traffic]]\nload = 0.5\n")
    result = CliRunner().invoke(app, ["check", str(toml), "--set", "topology.hosts=8"])
    assert result.exit_code == 0, result.output
    assert re.search(r"│ hosts\s+│ 8\s+│", result.stdout), result.stdout


def test_an_absurd_duration_is_refused_by_name_not_by_a_traceback(tmp_path):
    toml = tmp_path / "big.toml"
    toml.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n[[traffic]]\nload = 0.5\n[run]\nduration_us = 1e303\n')
    result = CliRunner().invoke(app, ["check", str(toml)])
    assert result.exit_code == 2 and "run.duration_us: at most" in result.stderr, result.output


def test_terminal_tables_fold_figures_instead_of_cutting_them(monkeypatch):
    # At 80 columns rich cut cells to "2,6…": a study with many jobs lost its key figures.
    import pandas as pd
    from qoslab import cli_render
    from qoslab.study import results

    columns = {"policy": ["default", "per-job[a=1 b=0 c=0 d=0 e=0 f=0]"], "total contention us": [2612345.0, 1234567.0]}
    columns |= {f"job-number-{i} slowdown": [1.23456, 2.34567] for i in range(8)}
    monkeypatch.setattr(results, "policy_table", lambda tables, policies: pd.DataFrame(columns))

    class Outcome:
        tables: dict = {}
        policies: list = []
        runs_total, runs_reused, written, out, report_error, failed = 2, 0, [], "out", None, []

    monkeypatch.setattr(cli_render.console, "width", 80)  # an 80-column terminal
    with cli_render.console.capture() as captured:
        cli_render.print_study(Outcome())
    text = captured.get()
    assert "…" not in text, text
    assert all(part in text for part in ("2,612", ",345", "1,234", ",567")), text  # folded, whole


def test_off_a_terminal_the_study_table_is_not_folded_at_80_columns():
    # In a log or a pipe rich's 80 columns folded the default study's policy names into 7-letter
    # pieces; there is no width to respect there (COLUMNS still decides when it is set).
    import sys

    code = "from qoslab import cli_render; print(cli_render.console.width)"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    wide = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    narrow = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**env, "COLUMNS": "100"}, check=True)
    assert int(wide.stdout) >= 200 and int(narrow.stdout) == 100, (wide.stdout, narrow.stdout)


def test_qoslab_s_errors_pickle_whole(tmp_path):
    # A process pool hands a worker's error to its caller pickled: ScenarioError, Deadlock and the
    # file errors failed to unpickle (BrokenProcessPool), the engine's were "not found as _engine".
    import pickle

    from qoslab.errors import ConfigError, EngineError, FileLineError
    from qoslab.io.ibnetdiscover import FabricFileError

    for error in (qoslab.ScenarioError([("a.b", "expected 1")], "s.toml"), FileLineError("f", 3, "bad"),
                  FabricFileError("t.topo", 2, "bad"), qoslab.Deadlock(None, "ranks 0-3 wait"),
                  ConfigError("fabric.mtu_bytes: expected"), EngineError("broken")):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
    assert pickle.loads(pickle.dumps(qoslab.ScenarioError([("k", "m")]))).problems == [("k", "m")]


def test_an_exception_from_the_caller_s_signal_handler_is_raised_as_it_is(small):
    # Only Ctrl-C is an interruption; a timeout a SIGALRM handler raised came back as Interrupted.
    class Timeout(Exception):
        pass

    def handler(signum, frame):
        raise Timeout

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        scenario = qoslab.Scenario.from_toml(small).with_overrides(["run.duration_us=1000000"])
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(Timeout):
            qoslab.simulate(scenario)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_ctrl_c_inside_the_progress_callback_is_an_interruption_with_its_partial_result(small):
    # It came back as a bare KeyboardInterrupt: qoslab run then wrote no partial results.
    def progress(now_us, end_us, events):
        raise KeyboardInterrupt

    scenario = qoslab.Scenario.from_toml(small).with_overrides(["run.duration_us=1000000"])
    with pytest.raises(qoslab.Interrupted) as caught:
        qoslab.simulate(scenario, progress)
    assert caught.value.result.summary["interrupted"] is True
