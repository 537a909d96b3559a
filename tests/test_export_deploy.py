"""`qoslab export opensm` as an administrator uses it: the policy exported by default is one
standard MPI settings deploy, a policy that needs MPI-side support says so first, each stack gets
the variables it reads, per-rank policies get a wrapper that sets the SL per rank, and opensm.conf
is complete and merges into the site's own."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import qoslab
from qoslab.cli import app
from qoslab.deploy import ExportError, export_opensm, study_scenario
from qoslab.deploy.mpi_env import (
    ENVIRONMENT,
    MPI_SUPPORT,
    MVAPICH_QOS,
    RANK_WRAPPER,
    SL_VARIABLES,
    deployment,
)
from qoslab.io.opensm import merge_opensm_conf, parse_opensm_conf, write_opensm_conf
from qoslab.study.model import Study
from qoslab.study.runner import StudyRunner
from qoslab.sweep.executors import LocalExecutor
from typer.testing import CliRunner

SCENARIO = {
    "seed": 3,
    "topology": {"kind": "xgft", "m": [4, 4], "w": [1, 2]},
    "jobs": [
        {"name": "a2a", "nodes": 4, "placement": "random", "workload": {"kind": "all-to-all", "bytes": 32768, "iterations": 2}},
        {"name": "flood", "nodes": 4, "placement": "random", "workload": {"kind": "flood-pairs", "iterations": 10}},
    ],
}
POLICIES = [{"kind": "default"}, {"kind": "per-job", "assignment": {"a2a": 1, "flood": 0}, "weights": [64, 255]},
            {"kind": "per-message", "jobs": "all"}, {"kind": "multi-vl", "vls": 2, "by": "connection"},
            {"kind": "per-rank", "name": "per-rank[a2a]", "job": "a2a", "fraction": 0.5, "metric": "random"}]


@pytest.fixture(scope="module")
def study_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    s = Study.from_dict({"scenario": copy.deepcopy(SCENARIO), "policies": POLICIES, "repetitions": 1}, "study.toml")
    StudyRunner(s, out, LocalExecutor(1), progress=False).run()
    return out


def rank_policies_first(out: Path, first: list[str]) -> None:
    """Reorders policies.parquet so that `first` lead the ranking (the selection reads only it)."""
    table = pd.read_parquet(out / "policies.parquet")
    order = first + [p for p in table["policy"] if p not in first]
    table = table.set_index("policy").loc[order].reset_index()
    table["total_contention_us"] = range(len(table))
    table.to_parquet(out / "policies.parquet")


def test_every_sl_rule_is_classified_by_how_it_deploys():
    job = {"name": "j", "sl": 0}
    assert deployment({**job, "sl_policy": {"kind": "job"}}).how == ENVIRONMENT
    assert deployment({**job, "sl_policy": {"kind": "ranks", "ranks": [1], "sl": 1, "match": "source"}}).how == RANK_WRAPPER
    assert deployment({**job, "sl_policy": {"kind": "ranks", "ranks": [1], "sl": 1, "match": "destination"}}).how == MPI_SUPPORT
    assert deployment({**job, "sl_policy": {"kind": "spread", "sls": [0, 1, 2], "by": "connection"}}).how == MVAPICH_QOS
    assert deployment({**job, "sl_policy": {"kind": "spread", "sls": [0, 1], "by": "destination"}}).how == MPI_SUPPORT
    assert deployment({**job, "sl_policy": {"kind": "latency-history", "sls": [0, 1], "thresholds": [2.0]}}).how == MPI_SUPPORT


def test_the_default_export_is_the_best_policy_mpi_settings_can_deploy(study_out, tmp_path):
    rank_policies_first(study_out, ["per-message[all,promote]", "multi-vl[2,connection]", "per-job[a2a=1 flood=0]"])
    choice = study_scenario(study_out, None, 0)
    assert choice.policy == "per-job[a2a=1 flood=0]"
    assert "per-message[all,promote]" in choice.why and "multi-vl[2,connection]" in choice.why
    result = CliRunner().invoke(app, ["export", "opensm", str(study_out), "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "exporting policy 'per-job[a2a=1 flood=0]'" in result.stdout and "WARNING" not in result.stderr
    assert "export UCX_IB_SL=1" in (tmp_path / "d" / "env" / "a2a.env").read_text()
    flood = (tmp_path / "d" / "env" / "flood.env").read_text()
    assert "export" not in flood.replace("# SL 0", "") and "UCX_IB_SL stays 'auto'" in flood


def test_a_policy_needing_mpi_support_is_exported_only_when_named_and_says_so_first(study_out, tmp_path):
    result = CliRunner().invoke(app, ["export", "opensm", str(study_out), "--policy",
                                                      "per-message[all,promote]", "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "WARNING: configuration alone does not deploy this policy" in result.stderr
    readme = (tmp_path / "d" / "README.md").read_text()
    assert readme.index("## This policy cannot be deployed by configuration alone") < readme.index("| job | SL |")
    assert "latency of earlier ones" in readme


def test_a_wrong_policy_name_lists_the_study_s_policies(study_out):
    with pytest.raises(ExportError) as error:
        study_scenario(study_out, "per-job/high=milc", 0)
    for name in ("default", "per-job[a2a=1 flood=0]", "per-message[all,promote]"):
        assert f"\n  {name}" in str(error.value)


def test_multi_vl_by_connection_is_mvapich_s_qos_mode_and_others_are_told(study_out, tmp_path):
    bundle = export_opensm(study_scenario(study_out, "multi-vl[2,connection]", 0).scenario, tmp_path)
    env = (tmp_path / "env" / "a2a.env").read_text()
    for line in ("export MV2_USE_QOS=1", "export MV2_NUM_SLS=2", "export MVP_USE_QOS=1", "export MVP_NUM_SLS=2"):
        assert line in env
    assert any("UCX, NCCL and Open MPI cannot spread" in line for line in bundle.mpi_side)
    readme = (tmp_path / "README.md").read_text()  # qoslab's own prose as written: no MV2\_USE\_QOS
    assert "- **`a2a`**: connections spread over SLs 0..1" in readme and "MV2_USE_QOS=1 MV2_NUM_SLS=2" in readme
    # What MVAPICH does beyond what was simulated (connections set up together) is said.
    assert any("as the study simulated for connections made on demand" in line and "was not simulated" in line
               for line in bundle.mpi_side)


def test_the_rank_wrapper_sets_the_sl_of_the_listed_ranks_only(study_out, tmp_path):
    scenario = study_scenario(study_out, "per-rank[a2a]", 0).scenario
    bundle = export_opensm(scenario, tmp_path)
    wrapper = tmp_path / "env" / "a2a-sl-wrapper.sh"
    assert wrapper in bundle.written and os.access(wrapper, os.X_OK)
    seen = {}
    for rank in range(4):
        env = {"PATH": os.environ["PATH"], "SLURM_PROCID": str(rank)}
        proc = subprocess.run([str(wrapper), "sh", "-c", 'echo "${UCX_IB_SL:-unset} ${NCCL_IB_SL:-unset}"'], env=env,
                              capture_output=True, text=True, timeout=10)
        assert proc.returncode == 0, proc.stderr
        seen[rank] = proc.stdout.split()
    policy = scenario.resolved()["jobs"][0]["sl_policy"]
    assert len(policy["ranks"]) == 2 and policy["sl"] != 0
    assert seen == {r: ([str(policy["sl"])] * 2 if r in policy["ranks"] else ["unset", "unset"]) for r in range(4)}
    # Under mpirun inside an allocation every process inherits SLURM_PROCID=0: the launcher's rank wins.
    for variable in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"):
        for rank in range(4):
            env = {"PATH": os.environ["PATH"], "SLURM_PROCID": "0", variable: str(rank)}
            proc = subprocess.run([str(wrapper), "sh", "-c", 'echo "${UCX_IB_SL:-unset} ${NCCL_IB_SL:-unset}"'],
                                  env=env, capture_output=True, text=True, timeout=10)
            assert proc.stdout.split() == seen[rank], (variable, rank)
    proc = subprocess.run([str(wrapper), "true"], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True)
    assert proc.returncode == 1 and "cannot tell this process's rank" in proc.stderr


def test_env_files_set_each_stack_s_variable_and_nothing_for_sl_0(tmp_path):
    scenario = qoslab.Scenario(**{**SCENARIO, "jobs": [{**SCENARIO["jobs"][0], "sl": 2}, SCENARIO["jobs"][1]]})
    export_opensm(scenario, tmp_path)
    a2a = (tmp_path / "env" / "a2a.env").read_text()
    assert [line for line in a2a.splitlines() if line.startswith("export")] == [f"export {v}=2" for v in SL_VARIABLES]
    prolog = (tmp_path / "slurm-taskprolog.sh").read_text()
    assert "'a2a')" in prolog and "'flood')" not in prolog


def test_opensm_conf_sets_every_qos_option_and_merges_into_a_base(tmp_path):
    tables = {"ca": {"vlarb_high": [(1, 64)], "vlarb_low": [(0, 64), (2, 192)], "high_limit": 4,
                     "sl2vl": [0, 1, 2, 3] * 4},
              "swe": {"vlarb_high": [], "vlarb_low": [(0, 32), (1, 255)], "high_limit": 0, "sl2vl": [0, 1, 0, 1] * 4}}
    ours = write_opensm_conf(tables, 4, "/etc/opensm/qos-policy.conf", ["qoslab test"])
    for prefix in ("qos_", "qos_ca_", "qos_sw0_", "qos_swe_", "qos_rtr_"):
        for name in ("max_vls", "high_limit", "vlarb_high", "vlarb_low", "sl2vl"):
            assert f"\n{prefix}{name} " in ours
    base = ("# site settings\nrouting_engine dfsssp,minhop\nsm_priority 15\nqos FALSE\nqos_swe_vlarb_low 0:4\n"
            "log_flags 0x03\nqos FALSE\n")
    merged = merge_opensm_conf(base, ours, "site.conf")
    # Our header first (what wrote the file, from what), then the base, options set in place.
    assert merged.startswith("# qoslab test\n\n")
    lines = merged.splitlines()[2:]
    assert lines[:3] == ["# site settings", "routing_engine dfsssp,minhop", "sm_priority 15"]
    assert lines[3] == "qos TRUE" and lines[4].startswith("qos_swe_vlarb_low 0:32,1:255") and lines[5] == "log_flags 0x03"
    assert lines[6].startswith("# qos FALSE")  # a later repeat OpenSM would let win, commented out
    read = parse_opensm_conf(merged, "merged.conf")
    assert read.enabled and read.data_vls == 4
    assert read.tables["swe"]["vlarb_low"] == [(0, 32), (1, 255)] and read.tables["ca"]["high_limit"] == 4


def test_cli_base_merge_warns_about_routing_engines_that_use_vls(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\nkind = "xgft"\nm = [4, 2]\nw = [1, 2]\n[[jobs]]\nname = "a"\nnodes = 2\nsl = 1\n'
                        'workload = { kind = "all-to-all", bytes = 4096, iterations = 1 }\n')
    base = tmp_path / "opensm.conf"
    base.write_text("routing_engine nue\nsm_priority 3\n")
    result = CliRunner().invoke(app, ["export", "opensm", str(scenario), "--base", str(base),
                                                      "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "routing_engine nue assigns SL2VL" in result.stderr
    merged = (tmp_path / "d" / "opensm.conf").read_text()
    assert merged.startswith("# QoS written by qoslab from ") and "\n\nrouting_engine nue\nsm_priority 3\n" in merged
    assert "\nqos TRUE\n" in merged
    base.write_bytes(b"\x00\x01binary")
    result = CliRunner().invoke(app, ["export", "opensm", str(scenario), "--base", str(base),
                                                      "--out", str(tmp_path / "e")])
    assert result.exit_code == 2 and "binary data" in result.stderr


@pytest.mark.skipif(shutil.which("opensm") is None and not Path("/usr/sbin/opensm").exists(),
                    reason="OpenSM is not installed (apt-get install opensm)")
def test_a_merge_into_opensm_s_own_template_reads_back_as_the_simulated_tables(tmp_path):
    template = tmp_path / "template.conf"
    subprocess.run([shutil.which("opensm") or "/usr/sbin/opensm", "-c", str(template)], capture_output=True, timeout=60)
    assert template.exists()
    scenario = qoslab.Scenario(**{**SCENARIO, "qos": {"swe": {"vlarb_low": "0:32,1:255", "sl2vl": [0, 1] * 8}}})
    export_opensm(scenario, tmp_path / "d", base=template.read_text(), base_source=str(template))
    merged = (tmp_path / "d" / "opensm.conf").read_text()
    assert len(merged.splitlines()) >= len(template.read_text().splitlines())
    read = parse_opensm_conf(merged, "merged")
    assert read.enabled and read.tables["swe"]["vlarb_low"] == [(0, 32), (1, 255)]
    assert read.tables["swe"]["sl2vl"] == [0, 1] * 8


def test_a_merged_opensm_conf_keeps_the_vlarb_capability_note_and_the_export_warns(tmp_path):
    # Weights above 255 split over entries: 12 low entries, beyond the 8 many ports program.
    scenario = qoslab.Scenario(**{**SCENARIO, "qos": {"vlarb_low": "0:254,1:254,2:9,3:1" + ",0:254" * 8}})
    template = "qos FALSE\nqos_ca_vlarb_low 0:4\nqos_swe_vlarb_low 0:4\nqos_vlarb_low 0:4\nqos_sw0_vlarb_low 0:4\n" \
               "qos_rtr_vlarb_low 0:4\n"
    for base in (None, template):
        bundle = export_opensm(scenario, tmp_path / str(base is None), base=base)
        conf = (tmp_path / str(base is None) / "opensm.conf").read_text()
        assert conf.startswith("# QoS written by qoslab")
        # Once, naming the key that simulates what the ports hold (it was repeated per port type).
        [note] = [line for line in conf.splitlines() if line.startswith("# note:")]
        assert note.startswith("# note: 12 vlarb_low entries (every port type): ports whose VLArb capability is "
                               "smaller (often 8) program only the first entries")
        assert "fabric.vlarb_capacity" in note
        assert any(w.startswith("qos.swe.vlarb_low: 12 VLArb entries") for w in bundle.warnings), bundle.warnings
    switches = qoslab.Scenario(**{**SCENARIO, "qos": {"swe": {"vlarb_low": "0:254,1:254,2:9,3:1" + ",0:254" * 6}}})
    export_opensm(switches, tmp_path / "swe")
    conf = (tmp_path / "swe" / "opensm.conf").read_text()
    assert [line.split(":")[1] for line in conf.splitlines() if line.startswith("# note:")] == [
        " 10 vlarb_low entries (qos_vlarb_low, qos_swe_vlarb_low, qos_rtr_vlarb_low)"]


def test_tables_that_never_send_a_job_s_traffic_are_refused_naming_sl_vl_and_job(tmp_path):
    # a2a on SL1 -> VL1, which has no weight in either table: OpenSM would program it, a2a would hang.
    starving = qoslab.Scenario(**{**SCENARIO, "jobs": [{**SCENARIO["jobs"][0], "sl": 1}, SCENARIO["jobs"][1]],
                                  "qos": {"vlarb_high": [], "vlarb_low": [[0, 255], [2, 64]]}})
    with pytest.raises(ExportError) as error:
        export_opensm(starving, tmp_path / "d", policy="per-job[a2a=1]")
    message = str(error.value)
    assert message.startswith("policy 'per-job[a2a=1]' of the scenario: not exported: traffic would never be sent")
    assert "qos.ca: SL1 -> VL1" in message and "qos.swe: SL1 -> VL1" in message
    assert "job 'a2a'" in message and "flood" not in message
    assert not (tmp_path / "d").exists()
    # The rule is check's: the same SL and VL are warned about there.
    assert any("SL1 maps to VL1" in w and "job 'a2a'" in w for w in starving.warnings())


def test_cli_export_of_a_table_without_weight_for_used_traffic_exits_2_and_writes_nothing(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n[qos]\nvlarb_high = "1:255"\n'
                        'vlarb_low = "0:255"\nsl2vl = "0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0"\n'
                        '[[traffic]]\npattern = "uniform"\nload = 0.1\n')
    result = CliRunner().invoke(app, ["export", "opensm", str(scenario), "--set", "qos.vlarb_low=",
                                      "--out", str(tmp_path / "d")])
    assert result.exit_code == 2, result.output
    assert "qos.swe: SL0 -> VL0" in result.stderr and "traffic[0]" in result.stderr
    assert not (tmp_path / "d").exists()
    fine = CliRunner().invoke(app, ["export", "opensm", str(scenario), "--out", str(tmp_path / "e")])
    assert fine.exit_code == 0, fine.output


def test_the_default_export_passes_over_a_policy_whose_tables_never_send(study_out, tmp_path):
    copy_out = tmp_path / "study"
    shutil.copytree(study_out, copy_out)
    runs = pd.read_parquet(copy_out / "runs.parquet")
    starved = "per-job[a2a=1 flood=0]"
    for run_id in runs[(runs["policy"] == starved) & (runs["mode"] == "shared")]["run_id"]:
        record = copy_out / "runs" / str(run_id) / "record.json"
        data = json.loads(record.read_text())
        data["scenario"]["qos"]["vlarb_low"] = [[0, 64]]  # VL1 (a2a's) loses its weight
        record.write_text(json.dumps(data))
    rank_policies_first(copy_out, [starved, "default"])
    choice = study_scenario(copy_out, None, 0)
    assert choice.policy == "default" and "never send" in choice.why and repr(starved) in choice.why
    result = CliRunner().invoke(app, ["export", "opensm", str(copy_out), "--policy", starved,
                                      "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and "SL1 -> VL1" in result.stderr and "job 'a2a'" in result.stderr
    assert not (tmp_path / "d").exists()


def test_more_than_8_data_vls_are_exported_with_a_warning_naming_the_key(tmp_path):
    wide = qoslab.Scenario(**{**SCENARIO, "fabric": {"data_vls": 15}})
    bundle = export_opensm(wide, tmp_path / "d")
    conf = (tmp_path / "d" / "opensm.conf").read_text()
    assert "\nmax_op_vls 5\n" in conf and "# note: ports whose VLCap is VL0-7" in conf
    [warning] = [w for w in bundle.warnings if w.startswith("fabric.data_vls = 15")]
    assert "VLCap VL0-7" in warning and "VL8-14 lands on VL0-6" in warning and "fabric.data_vls = 8" in warning
    narrow = export_opensm(qoslab.Scenario(**{**SCENARIO, "fabric": {"data_vls": 8}}), tmp_path / "e")
    assert not any("data_vls" in w for w in narrow.warnings)
    assert "VLCap" not in (tmp_path / "e" / "opensm.conf").read_text()


def test_a_base_naming_another_policy_file_is_warned_about_and_the_readme_says_when_to_restart(tmp_path):
    scenario = qoslab.Scenario(**SCENARIO)
    base = "sm_priority 3\nqos_policy_file /etc/opensm/old.conf\nqos_policy_file '/etc/opensm/site-policy.conf'\n"
    bundle = export_opensm(scenario, tmp_path / "d", base=base, base_source="site.conf")
    [warning] = [w for w in bundle.warnings if "qos_policy_file" in w]
    assert warning.startswith("site.conf:3: qos_policy_file /etc/opensm/site-policy.conf becomes "
                              "/etc/opensm/qos-policy.conf: the exported qos-policy.conf replaces the site's policy "
                              "rules in /etc/opensm/site-policy.conf, it is not merged with them")
    assert "restart it, SIGHUP does not take a new path" in warning
    assert "\nqos_policy_file /etc/opensm/qos-policy.conf\n" in (tmp_path / "d" / "opensm.conf").read_text()
    readme = (tmp_path / "d" / "README.md").read_text()
    assert "2. If `qos_policy_file` changed, restart OpenSM" in readme and "Restart OpenSM or send it SIGHUP" not in readme
    assert "whose port groups, QoS levels and match rules are not merged in" in readme
    # The same path, an unset one or none: nothing changes where OpenSM looks, nothing to warn about.
    for same in ("qos_policy_file /etc/opensm/qos-policy.conf\n", "qos_policy_file (null)\n", "sm_priority 3\n"):
        quiet = export_opensm(scenario, tmp_path / "e", base=same, base_source="site.conf")
        assert not any("qos_policy_file" in w for w in quiet.warnings), same


def test_jobs_the_simulation_placed_are_warned_about_for_qos_policy_conf(study_out, tmp_path):
    # The study placed both jobs at random: its stored scenarios list hosts, study.json says how they came.
    assert json.loads((study_out / "study.json").read_text())["placement"] == {"a2a": "random", "flood": "random"}
    result = CliRunner().invoke(app, ["export", "opensm", str(study_out), "--policy", "per-job[a2a=1 flood=0]",
                                      "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    stderr = " ".join(result.stderr.split())
    assert "the port groups of job 'a2a' (placement = \"random\") list the hosts the simulation placed" in stderr
    assert "job 'flood'" not in stderr  # on SL 0: no match rule to mislead
    assert "env/<job>.env" in stderr
    assert '# placement = "random": hosts the simulation chose' in (tmp_path / "d" / "qos-policy.conf").read_text()
    assert "**qos-policy.conf names hosts the simulation chose** for `a2a`" in (tmp_path / "d" / "README.md").read_text()
    # A study folder that does not record placement: said so, not taken for explicit hosts.
    old = tmp_path / "old"
    shutil.copytree(study_out, old)
    meta = json.loads((old / "study.json").read_text())
    del meta["placement"]
    (old / "study.json").write_text(json.dumps(meta))
    choice = study_scenario(old, "per-job[a2a=1 flood=0]", 0)
    bundle = export_opensm(choice.scenario, tmp_path / "e", placement=choice.placement)
    assert any("job 'a2a' (placement not recorded by the study folder)" in w for w in bundle.warnings)
    # Hosts given explicitly: the port groups are the job's own hosts, nothing to warn about.
    explicit = qoslab.Scenario(**{**SCENARIO, "jobs": [
        {"name": job["name"], "workload": job["workload"], "sl": 1, "placement": "hosts", "hosts": hosts}
        for job, hosts in zip(SCENARIO["jobs"], ([0, 1, 2, 3], [4, 5, 6, 7]), strict=True)]})
    assert not any("qos-policy.conf" in w for w in export_opensm(explicit, tmp_path / "f").warnings)
    drawn = qoslab.Scenario(**{**SCENARIO, "jobs": [{**SCENARIO["jobs"][0], "sl": 1}, SCENARIO["jobs"][1]]})
    assert any("job 'a2a' (placement = \"random\")" in w for w in export_opensm(drawn, tmp_path / "g").warnings)


def test_the_export_states_what_sl0_everyone_else_s_sl_gets(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\nkind = "xgft"\nm = [4, 2]\nw = [1, 2]\n[qos]\nvlarb_low = "0:64,1:192"\n'
                        '[[jobs]]\nname = "a"\nnodes = 2\nsl = 1\n'
                        'workload = { kind = "all-to-all", bytes = 4096, iterations = 1 }\n')
    result = CliRunner().invoke(app, ["export", "opensm", str(scenario), "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    # 64 and 192 are 1 and 3 MTU packets a turn at 4 KiB: VL0 gets 25% of a saturated port.
    said = "SL 0 is on VL0, weight 64 in the low-priority table: 25% of a saturated port with every low-table VL backlogged"
    assert said in " ".join(result.stdout.split())
    readme = (tmp_path / "d" / "README.md").read_text()
    assert "**SL 0 is everyone else's.**" in readme and said in readme and "IPoIB" in readme
    # SL 0 without weight starves everything outside the study: refused though no job of it is on SL 0.
    starving = CliRunner().invoke(app, ["export", "opensm", str(scenario), "--set", "qos.vlarb_low=1:192",
                                        "--out", str(tmp_path / "e")])
    assert starving.exit_code == 2 and "SL0 -> VL0" in starving.stderr
    assert "everything outside this export" in " ".join(starving.stderr.split())
    assert not (tmp_path / "e").exists()


def test_a_study_export_names_the_study_says_ties_and_refuses_overrides(study_out, tmp_path):
    rank_policies_first(study_out, ["per-job[a2a=1 flood=0]", "default"])
    table = pd.read_parquet(study_out / "policies.parquet")
    table.loc[table["policy"] == "default", "total_contention_us"] = 0.0  # tied with the first
    table.to_parquet(study_out / "policies.parquet")
    choice = study_scenario(study_out, None, 0)
    assert choice.policy == "per-job[a2a=1 flood=0]" and "tied with 'default'," in choice.why
    # A tie with a policy configuration cannot deploy says so: it had read as one that could.
    table.loc[table["policy"] == "multi-vl[2,connection]", "total_contention_us"] = 0.0
    table.to_parquet(study_out / "policies.parquet")
    choice = study_scenario(study_out, None, 0)
    assert "'multi-vl[2,connection]' (needs MPI-side support)" in choice.why and "'default'," in choice.why
    result = CliRunner().invoke(app, ["export", "opensm", str(study_out), "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert f"of the study in {study_out}" in (tmp_path / "d" / "opensm.conf").read_text().splitlines()[0]
    refused = CliRunner().invoke(app, ["export", "opensm", str(study_out), "--set", "fabric.data_vls=8",
                                       "--out", str(tmp_path / "e")])
    assert refused.exit_code == 2 and "--set" in refused.stderr and "study folder" in refused.stderr
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("damage, words", [
    (lambda out: pd.read_parquet(out / "runs.parquet").drop(columns="mode").to_parquet(out / "runs.parquet"),
     "runs.parquet: has no column mode"),
    (lambda out: pd.read_parquet(out / "policies.parquet").drop(columns="total_contention_us")
     .to_parquet(out / "policies.parquet"), "policies.parquet: has no column total_contention_us"),
    (lambda out: pd.read_parquet(out / "runs.parquet").assign(repetition=None).to_parquet(out / "runs.parquet"),
     "repetition None is not a number"),
])
def test_a_damaged_study_folder_is_named_not_a_traceback(study_out, tmp_path, damage, words):
    out = tmp_path / "copy"
    shutil.copytree(study_out, out)
    damage(out)
    result = CliRunner().invoke(app, ["export", "opensm", str(out), "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert words in " ".join(result.output.split()), result.output


def test_an_edited_stored_scenario_names_its_record(study_out, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(study_out, out)
    record = next(p for p in (out / "runs").glob("*per-job*/record.json"))
    data = json.loads(record.read_text())
    data["scenario"]["fabric"]["data_vls"] = 3
    record.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["export", "opensm", str(out), "--policy", "per-job[a2a=1 flood=0]",
                                      "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and f"{record}: fabric.data_vls" in " ".join(result.output.split()), result.output
