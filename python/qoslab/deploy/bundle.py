"""A QoS policy as configuration a real cluster deploys: the opensm.conf QoS fragment, a
qos-policy.conf with one port group per job, each job's environment for the MPI stacks that pick
their SL themselves, and a Slurm TaskProlog. What hardware cannot express (an SL chosen per
message or per rank) is written down as what the MPI side must do, never dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qoslab.deploy.names import (ExportError, check_name, comment, conf_word, file_stems, markdown_cell,
                                   opensm_string, shell_word)
from qoslab.io.opensm import write_opensm_conf
from qoslab.scenario import Scenario

FILES = ("opensm.conf", "qos-policy.conf", "slurm-taskprolog.sh", "README.md")


def job_environment(sl: int) -> dict[str, str]:
    """The variables that make each MPI stack send on `sl` (formats.md section 4)."""
    return {
        "UCX_IB_SL": str(sl),  # UCX: Open MPI 5 (pml ucx), MPICH ch4:ucx, HPC-X, Intel MPI FI_PROVIDER=mlx
        "OMPI_MCA_btl_openib_ib_service_level": str(sl),  # Open MPI <= 4 openib BTL
        "MV2_DEFAULT_SERVICE_LEVEL": str(sl),  # MVAPICH2
        "NCCL_IB_SL": str(sl),  # NCCL
    }


def mpi_side(job: dict[str, Any]) -> str | None:
    """What the MPI library must do for a per-message or per-rank policy; None when the job's
    SL is static and the environment is enough."""
    policy = job.get("sl_policy") or {"kind": "job"}
    kind = policy["kind"]
    if kind == "job":
        return None
    if kind == "ranks":
        return (f"ranks {policy['ranks']} send ({policy['match']}) on SL {policy['sl']}, the rest on SL {job['sl']}: "
                "set the SL per rank, e.g. with a wrapper that exports UCX_IB_SL from the rank number "
                "(SLURM_PROCID) before exec")
    if kind == "slowest-ranks":
        return (f"the slowest {policy['fraction']:.0%} of ranks ({policy['metric']}, measured after "
                f"{policy['after_iterations']} iterations) move to SL {policy['sl']}: this needs the MPI library to "
                "measure its ranks and re-create connections on the new SL; a static alternative is a per-rank "
                "wrapper for ranks found slow in a profiling run")
    if kind == "spread":
        sls = policy["sls"]
        hint = (f"; MVAPICH2 does this with MV2_USE_QOS=1 MV2_NUM_SLS={len(sls)} (it uses SLs 0..{len(sls) - 1})"
                if sls == list(range(len(sls))) else "")
        return (f"messages spread over SLs {sls} by {policy['by']}: the MPI library must open one connection per "
                f"SL and choose among them{hint}")
    if kind == "latency-history":
        return (f"each message's SL is chosen from the latency of earlier ones (tiers {policy['sls']}, thresholds "
                f"{policy['thresholds']} x the job's typical latency): this needs MPI-side support (one QP per SL "
                "and the selection logic); no environment variable does it")
    return f"SL policy {kind!r}: needs MPI-side support"


def export_opensm(scenario: Scenario, out: Path, policy: str = "", policy_file: str = "/etc/opensm/qos-policy.conf") -> list[Path]:
    """Writes the deployment bundle of `scenario`'s QoS into `out`; returns the files written.
    Every job name is checked before anything is written (names.py)."""
    resolved = scenario.resolved()
    jobs = resolved["jobs"]
    for i, job in enumerate(jobs):
        check_name(job["name"], f"job name (jobs[{i}].name)")
    stems = file_stems([job["name"] for job in jobs])
    conf_word(policy_file, "--policy-file")
    origin = f"policy {policy!r} of " if policy else ""
    source = comment(f"{origin}{scenario.source or 'a scenario'}")
    header = [f"QoS written by qoslab from {source}",
              "Add these lines to opensm.conf (or pass the file with opensm -F) and restart or re-sweep OpenSM."]
    layers, step = scenario.routing.vls or 1, scenario.qos_vls()
    if layers > 1:
        header.append(f"Routing uses {layers} VL layers ({scenario.routing.algorithm} on a Dragonfly+): QoS has "
                      f"VL0..VL{step - 1}, and VL v + {step} repeats VL v's weight for packets after a non-minimal turn.")
        header.append("Moving packets to the higher layer is the switches' adaptive-routing configuration, not "
                      "OpenSM's. To simulate this file again, give only the QoS VLs and routing.vls.")
    tables = {port: scenario.engine_port_qos(port) for port in ("ca", "swe")}
    conf = write_opensm_conf(tables, scenario.fabric.data_vls, policy_file, header)
    notes: list[str] = []
    if layers > 1:
        notes.append(f"Routing takes {layers} VL layers: the VLArb tables in opensm.conf list every QoS VL once per "
                     f"layer (VL v and VL v + {step}, same weight). The switches must move non-minimal packets to "
                     "the higher layer themselves (Dragonfly+ adaptive routing's VL escalation); OpenSM's SL2VL "
                     "tables cannot.")
    if scenario.qos.sl2vl_pairs:
        notes.append("The scenario sets SL2VL tables per (input, output) port pair of single switches "
                     "(qos.sl2vl_pairs): opensm.conf has one SL2VL table per port type, so these are NOT in "
                     "opensm.conf; program them with a routing engine that owns SL2VL or by MADs.")
    files = {
        "opensm.conf": conf,
        "qos-policy.conf": qos_policy_text(jobs, scenario),
        "slurm-taskprolog.sh": taskprolog_text(jobs),
        "README.md": readme_text(jobs, stems, source, notes),
    }
    files.update({f"env/{stems[job['name']]}.env": env_file_text(job) for job in jobs})
    # Every text is made (and every name checked) before the first file is written.
    (out / "env").mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = out / name
        path.write_text(text)
        written.append(path)
    (out / "slurm-taskprolog.sh").chmod(0o755)
    return written


def qos_policy_text(jobs: list[dict[str, Any]], scenario: Scenario) -> str:
    """qos-policy.conf: one port group per job, its SL for paths between its own ports. Names are
    OpenSM quoted strings; a study without jobs has no port-groups section (OpenSM refuses an
    empty one)."""
    fabric = scenario.tool_fabric()
    hosts = fabric.endpoints()
    lines = ["# qos-policy.conf written by qoslab. It only changes the SL the SA gives in PathRecords",
             "# (rdma_cm, MVAPICH2 with MV2_PATH_SL_QUERY=1, PSM path queries); stacks that pick their",
             "# SL themselves (UCX, NCCL) need the per-job environment instead."]
    if jobs:
        lines.append("port-groups")
        for i, job in enumerate(jobs):
            what = f"job name (jobs[{i}].name)"
            members = [hosts[h] for h in job["hosts"]]
            guids = ", ".join(f"0x{fabric.nodes[e.node].port_guid(e.port):016x}" for e in members)
            names = comment(", ".join(f"{fabric.nodes[e.node].description}/P{e.port}" for e in members))
            lines += ["    port-group", f"        name: {opensm_string(job['name'], what)}",
                      f"        use: {opensm_string('qoslab job ' + job['name'], what)}",
                      f"        port-guid: {guids}", f"        # port-name: {names}", "    end-port-group"]
        lines.append("end-port-groups")
    lines += ["qos-levels", "    qos-level", "        name: DEFAULT", "        sl: 0", "    end-qos-level"]
    for sl in sorted({job["sl"] for job in jobs} - {0}):
        lines += ["    qos-level", f"        name: sl{sl}", f"        sl: {sl}", "    end-qos-level"]
    lines += ["end-qos-levels", "qos-match-rules"]
    for i, job in enumerate(jobs):
        if job["sl"] == 0:
            continue
        what = f"job name (jobs[{i}].name)"
        group = opensm_string(job["name"], what)
        lines += ["    qos-match-rule", f"        use: {opensm_string(job['name'] + ' to itself', what)}",
                  f"        source: {group}", f"        destination: {group}", f"        qos-level-name: sl{job['sl']}",
                  "    end-qos-match-rule"]
    lines.append("end-qos-match-rules")
    return "\n".join(lines) + "\n"


def env_file_text(job: dict[str, Any]) -> str:
    """A job's environment as a file to source: comments on one line each, fixed variable names,
    integer values."""
    need = mpi_side(job)
    text = [f"# job {comment(job['name'])}: SL {job['sl']}"] + ([f"# MPI side: {comment(need)}"] if need else [])
    text += [f"export {k}={v}" for k, v in job_environment(job["sl"]).items()]
    return "\n".join(text) + "\n"


def taskprolog_text(jobs: list[dict[str, Any]]) -> str:
    """The Slurm TaskProlog: prints each job's exports when $SLURM_JOB_NAME equals its name. Every
    pattern is a single-quoted literal, so no job name is ever expanded or run."""
    prolog = ["#!/bin/sh", "# Slurm TaskProlog written by qoslab: each line 'export NAME=value' on stdout",
              "# becomes part of the task's environment (slurm.conf TaskProlog=/path/to/this file).",
              "# Job names are matched literally. Any user can name a job, so a name here grants its SL to",
              "# whoever uses it: see README.md.",
              'case "$SLURM_JOB_NAME" in']
    for job in jobs:
        prolog.append(f"    {shell_word(job['name'])})")
        prolog += [f"        echo {shell_word(f'export {k}={v}')}" for k, v in job_environment(job["sl"]).items()]
        prolog.append("        ;;")
    prolog += ["esac", ""]
    return "\n".join(prolog)


def readme_text(jobs: list[dict[str, Any]], stems: dict[str, str], source: str, notes: list[str]) -> str:
    readme = ["# QoS deployment from qoslab", "", f"Source: {markdown_cell(source)}.", "",
              "| job | SL | environment | MPI side |", "|---|---|---|---|"]
    for job in jobs:
        need = mpi_side(job) or "nothing beyond the environment"
        readme.append(f"| {markdown_cell(job['name'])} | {job['sl']} | `env/{stems[job['name']]}.env` | "
                      f"{markdown_cell(need)} |")
    readme += ["", "1. Merge `opensm.conf` into OpenSM's configuration (`qos TRUE` and the `qos_ca_*`, `qos_swe_*` "
               "tables); copy `qos-policy.conf` to the `qos_policy_file` path.",
               "2. Restart OpenSM or send it SIGHUP for a heavy sweep; check with `smpquery sl2vl <lid> <port>` "
               "and `smpquery vlarb <lid> <port>`.",
               "3. Give each job its SL: `srun --export=ALL,UCX_IB_SL=<sl>`, source `env/<job>.env`, or install "
               "`slurm-taskprolog.sh` as TaskProlog (it matches jobs by name, literally).",
               "", "Matching by job name is a convenience, not access control: any user may name a job like one "
               "of these and get its SL. Where priority must be earned, give SLs by Slurm account or QOS instead."]
    if notes:
        readme += ["", "## Not expressible in opensm.conf", ""] + [f"- {n}" for n in notes]
    return "\n".join(readme) + "\n"


def study_scenario(study_out: Path, policy: str | None, repetition: int) -> tuple[Scenario, str]:
    """The scenario a study ran for `policy` (default: the one with the least total contention)."""
    runs = study_out / "runs"
    if not runs.is_dir():
        raise ExportError(f"{study_out}: not a study output folder (no runs/)")
    if policy is None:
        import pandas as pd

        table = study_out / "policies.parquet"
        if not table.exists():
            raise ExportError(f"{table}: missing; name the policy with --policy")
        ranked = pd.read_parquet(table).sort_values("total_contention_us")
        if ranked.empty:
            raise ExportError(f"{table}: no policy finished; name one with --policy")
        policy = str(ranked.iloc[0]["policy"])
    found = []
    for record in sorted(runs.glob("*/record.json")):
        meta = json.loads(record.read_text())
        run = meta["run"]
        if run["policy"] == policy and run["mode"] == "shared" and "scenario" in meta:
            found.append((run["repetition"], meta["scenario"], run.get("source")))
    if not found:
        raise ExportError(f"{study_out}: no stored run of policy {policy!r} with its scenario")
    matching = [f for f in found if f[0] == repetition]
    if not matching:
        raise ExportError(f"{study_out}: policy {policy!r} has no repetition {repetition} "
                          f"(stored: {sorted({f[0] for f in found})})")
    return Scenario.from_dict(matching[0][1]), policy
