"""A QoS policy as configuration a real cluster deploys: opensm.conf (complete, or merged into the
site's own), a qos-policy.conf with one port group per job, each job's environment for the MPI
stacks that pick their SL themselves, a Slurm TaskProlog, a per-rank SL wrapper where that is how
a policy works, and a README that says first what configuration cannot do. Every name reaches
these files through names.py; every MPI variable through mpi_env.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from qoslab.deploy.mpi_env import (
    ENVIRONMENT,
    MPI_SUPPORT,
    RANK_WRAPPER,
    SL_VARIABLES,
    deployment,
    env_file_text,
    job_exports,
    rank_wrapper_text,
)
from qoslab.deploy.names import (
    ExportError,
    check_name,
    comment,
    conf_word,
    file_stems,
    markdown_code,
    markdown_text,
    opensm_string,
    shell_word,
)
from qoslab.io.opensm import (
    COMMON_VLARB_CAP,
    MAX_OP_VLS,
    enables_congestion_control,
    merge_opensm_conf,
    option_value,
    routing_engine_warnings,
    vlcap_caveat,
    write_opensm_conf,
)
from qoslab.io.opensm_cc import cc_lines
from qoslab.scenario import Scenario
from qoslab.vlarb import percent

FILES = ("opensm.conf", "qos-policy.conf", "slurm-taskprolog.sh", "README.md")
# Who sends on SL 0 on a cluster besides the exported jobs.
DEFAULT_POLICY_FILE = "/etc/opensm/qos-policy.conf"  # OpenSM's default qos_policy_file (its config dir)


@dataclass
class Bundle:
    """What an export wrote, and what its reader must not miss."""

    written: list[Path]
    warnings: list[str] = field(default_factory=list)
    mpi_side: list[str] = field(default_factory=list)  # per job: what configuration alone cannot do
    sl0: str = ""  # what SL 0, everyone else's SL, gets from the tables (sl0_share)


def export_opensm(scenario: Scenario, out: str | Path, policy: str = "", policy_file: str = DEFAULT_POLICY_FILE,
                  base: str | None = None, base_source: str = "opensm.conf",
                  placement: dict[str, str] | None = None) -> Bundle:
    """Writes the deployment bundle of `scenario`'s QoS into `out`. `base`: the text of an
    opensm.conf to merge the QoS options into (the site's, or `opensm -c`'s template).
    `placement`: how each job's hosts were chosen, by job name, where the scenario no longer says
    (a study's stored scenario lists every job's hosts: Choice.placement); None: its [[jobs]]
    placement. Every name is checked and every text made before the first file is written."""
    out = Path(out)
    resolved = scenario.resolved()
    jobs = resolved["jobs"]
    if placement is None:
        placement = {job["name"]: given.placement for job, given in zip(jobs, scenario.jobs, strict=True)}
    # Jobs whose qos-policy.conf rule names hosts the simulation chose, not hosts they will run on.
    drawn = {job["name"]: placement.get(job["name"], "") for job in jobs
             if job["sl"] != 0 and placement.get(job["name"]) != "hosts"}
    for i, job in enumerate(jobs):
        check_name(job["name"], f"job name (jobs[{i}].name)")
    stems = file_stems([job["name"] for job in jobs])
    conf_word(policy_file, "--policy-file", "qos_policy_file")
    if not PurePosixPath(policy_file).is_absolute():
        raise ExportError(f"--policy-file {policy_file!r}: a relative path, which OpenSM opens from its own working "
                          "directory (/ for a daemon), not from here, and then logs ERR AC01 (and PathRecords carry "
                          f"SL 0): give the absolute path where qos-policy.conf will be ({DEFAULT_POLICY_FILE}, OpenSM's "
                          f"default, or {Path(policy_file).absolute()} for that file seen from here)")
    origin = f"policy {policy!r} of " if policy else ""
    refuse_unsent(scenario, f"{origin}{scenario.source or 'the scenario'}")
    source = comment(f"{origin}{scenario.source or 'a scenario'}")
    header = [f"QoS written by qoslab from {source}"]
    if base is None:
        header.append("Every QoS option OpenSM has. Merge them into your opensm.conf (qoslab export opensm ... "
                      "--base /etc/opensm/opensm.conf does it), then restart OpenSM (needed when qos_policy_file "
                      "changes) or send it SIGHUP; given alone to opensm -F this file would leave every other setting "
                      "at OpenSM's default.")
    layers, step = scenario.routing.vls or 1, scenario.qos_vls()
    if layers > 1:
        header.append(f"Routing uses {layers} VL layers ({scenario.routing.algorithm} on a Dragonfly+): QoS has "
                      f"VL0..VL{step - 1}, and VL v + {step} repeats VL v's weight for packets after a non-minimal turn.")
        header.append("Moving packets to the higher layer is the switches' adaptive-routing configuration, not "
                      "OpenSM's. To simulate this file again, give only the QoS VLs and routing.vls.")
    tables = {port: scenario.engine_port_qos(port) for port in ("ca", "swe")}
    conf = write_opensm_conf(tables, scenario.fabric.data_vls, policy_file, header)
    if scenario.congestion_control.enabled:
        try:
            congestion = cc_lines(scenario.congestion_control)
        except ValueError as error:  # a CCT line OpenSM would cut
            raise ExportError(str(error)) from None
        conf += "\n".join(["# congestion control, as simulated ([congestion_control])", *congestion]) + "\n"
    else:
        # Nothing written: `congestion_control FALSE` would switch off a site's own setting on --base.
        conf += "# congestion control: not simulated ([congestion_control] is off); OpenSM's setting is left as it is\n"
    warnings: list[str] = []
    caveat = vlcap_caveat(scenario.fabric.data_vls)
    if caveat:
        warnings.append(f"fabric.data_vls = {scenario.fabric.data_vls}: written as max_op_vls "
                        f"{MAX_OP_VLS[scenario.fabric.data_vls]} (VL0-{scenario.fabric.data_vls - 1}), but {caveat}")
    for port, table in tables.items():
        for name in ("vlarb_high", "vlarb_low"):
            if len(table[name]) > COMMON_VLARB_CAP and scenario.fabric.vlarb_capacity is None:
                warnings.append(f"qos.{port}.{name}: {len(table[name])} VLArb entries, as simulated; ports whose VLArb "
                                f"capability is {COMMON_VLARB_CAP} (ibsim's, and many switches') program only the first "
                                f"{COMMON_VLARB_CAP}, which share the link differently from what was simulated: set "
                                f"fabric.vlarb_capacity = {COMMON_VLARB_CAP} to simulate and export what they hold")
    if base is not None:
        conf = merge_opensm_conf(base, conf, base_source)
        warnings += routing_engine_warnings(base, base_source)
        warnings += policy_file_warnings(base, base_source, policy_file)
        if not scenario.congestion_control.enabled and enables_congestion_control(base):
            warnings.append(f"{base_source}: congestion_control TRUE, but the scenario simulated the policy without "
                            "congestion control: add its cc_* settings as [congestion_control] (qoslab import opensm "
                            "prints them) and simulate again")
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
    if drawn:
        listed = ", ".join(f"job {name!r} ({_placed(how)})" for name, how in drawn.items())
        warnings.append(f"qos-policy.conf: the port groups of {listed} list the hosts the simulation placed them on, "
                        "not hosts they will run on, so its rules would give their SLs to whatever runs there: give "
                        "these jobs their SL through their environment (env/<job>.env or slurm-taskprolog.sh) and "
                        "leave their qos-policy.conf rules out, or simulate them with placement = \"hosts\" on the "
                        "hosts they will run on")
    sl0 = sl0_share(scenario)
    plans = {job["name"]: deployment(job) for job in jobs}
    mpi_side = [f"job {job['name']!r}: {plans[job['name']].needs}" for job in jobs if plans[job["name"]].needs]
    files = {
        "opensm.conf": conf,
        "qos-policy.conf": qos_policy_text(jobs, scenario, drawn),
        "slurm-taskprolog.sh": taskprolog_text(jobs),
        "README.md": readme_text(jobs, stems, source, notes, base is not None, drawn, sl0),
    }
    files.update({f"env/{stems[job['name']]}.env": env_file_text(job) for job in jobs})
    wrappers = {f"env/{stems[job['name']]}-sl-wrapper.sh": rank_wrapper_text(job) for job in jobs
                if plans[job["name"]].how == RANK_WRAPPER}
    files.update(wrappers)
    (out / "env").mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = out / name
        path.write_text(text)
        written.append(path)
    for name in ["slurm-taskprolog.sh", *wrappers]:
        (out / name).chmod(0o755)
    return Bundle(written, warnings, mpi_side, sl0)


def policy_file_warnings(base: str, base_source: str, policy_file: str) -> list[str]:
    """A base whose qos_policy_file names another file: the export points OpenSM elsewhere, whose
    rules replace the site's policy, and OpenSM takes the new path only when it restarts."""
    site = option_value(base, "qos_policy_file")
    if site is None or site[1] in ("", "(null)", policy_file):
        return []
    line, old = site
    return [f"{base_source}:{line}: qos_policy_file {old} becomes {policy_file}: the exported qos-policy.conf replaces "
            f"the site's policy rules in {old}, it is not merged with them (copy the port groups, QoS levels and "
            f"match rules you keep into it, or merge them and export with --policy-file {old}); OpenSM reads "
            "qos_policy_file only when it starts: restart it, SIGHUP does not take a new path"]


def refuse_unsent(scenario: Scenario, what: str) -> None:
    """Raises ExportError when the tables would never send some traffic (an SL mapped to a VL with
    no weight in either VLArb table: Scenario.unsent_traffic, the rule `qoslab check` warns by):
    OpenSM programs them without a word and the jobs on that SL hang. On a cluster SL 0 always
    carries traffic: everything outside the study sends on it."""
    unsent = scenario.unsent_on_cluster()
    if not unsent:
        return
    listed = "\n".join(f"  {u.key}: SL{u.sl} -> VL{u.vl}, no weight in vlarb_high or vlarb_low; on it: "
                       f"{', '.join(u.users)}" for u in unsent)
    raise ExportError(f"{what}: not exported: traffic would never be sent. A port never sends the packets of a VL "
                      "without weight in either VLArb table: on the fabric this traffic would never leave its port, and "
                      f"a job sending on it would hang:\n{listed}\n"
                      "Give every VL that carries traffic a weight (qos.vlarb_low or qos.vlarb_high; for a study's "
                      "policy, its weights) or map its SL to a weighted VL (qos.sl2vl), then simulate and export "
                      "again.")


def sl0_share(scenario: Scenario) -> str:
    """What SL 0, everyone else's SL, gets from the exported tables at the fabric's MTU (the
    shares `qoslab check` prints), per port type when they differ."""
    arbitration = scenario.vl_arbitration()
    said: dict[str, list[str]] = {}
    ports: tuple[tuple[Literal["ca", "swe"], str], ...] = (("swe", "switch ports"), ("ca", "HCA ports"))
    for port, label in ports:
        tables = scenario.port_qos(port)
        vl = tables["sl2vl"][0]
        row = arbitration[port]["vls"][vl]
        if row["high_weight"]:
            text = (f"VL{vl}, weight {row['high_weight']} in the high-priority table: {percent(row['effective_high_share'])} "
                    f"of the high table's packets, before the low table (high_limit {tables['high_limit']})")
        elif row["low_weight"]:
            text = (f"VL{vl}, weight {row['low_weight']} in the low-priority table: "
                    f"{percent(row['effective_low_share'])} of a saturated port with every low-table VL backlogged"
                    + (" (after the high table's turns)" if tables["vlarb_high"] and any(w for _, w in tables["vlarb_high"])
                       else ""))
        else:
            text = f"VL{vl}, which has no weight"
        said.setdefault(text, []).append(label)
    if len(said) == 1:
        return f"SL 0 is on {next(iter(said))}"
    return "; ".join(f"SL 0 ({' and '.join(labels)}) is on {text}" for text, labels in said.items())


def _placed(how: str) -> str:
    """How a job's hosts were chosen, for messages ("" when the study folder does not record it)."""
    return f'placement = "{how}"' if how else "placement not recorded by the study folder"


def qos_policy_text(jobs: list[dict[str, Any]], scenario: Scenario, drawn: dict[str, str] | None = None) -> str:
    """qos-policy.conf: one port group per job, its SL for paths between its own ports. Names are
    OpenSM quoted strings; a study without jobs has no port-groups section (OpenSM refuses an
    empty one). `drawn`: jobs whose hosts the simulation chose (said in a comment)."""
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
                      f"        port-guid: {guids}", f"        # port-name: {names}"]
            if drawn and job["name"] in drawn:
                lines.append(f"        # {comment(_placed(drawn[job['name']]))}: hosts the simulation chose, not "
                             "where the job will run; give its SL by its environment instead (README.md)")
            lines.append("    end-port-group")
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


def taskprolog_text(jobs: list[dict[str, Any]]) -> str:
    """The Slurm TaskProlog: prints each job's exports when $SLURM_JOB_NAME equals its name. Every
    pattern is a single-quoted literal, so no job name is ever expanded or run. Jobs on SL 0 with
    nothing else to set have no branch (every stack's default is SL 0)."""
    prolog = ["#!/bin/sh", "# Slurm TaskProlog written by qoslab: each line 'export NAME=value' on stdout",
              "# becomes part of the task's environment (slurm.conf TaskProlog=/path/to/this file).",
              "# Job names are matched literally. Any user can name a job, so a name here grants its SL to",
              "# whoever uses it: see README.md.",
              'case "$SLURM_JOB_NAME" in']
    for job in jobs:
        exports = job_exports(job)
        if not exports:
            continue
        prolog.append(f"    {shell_word(job['name'])})")
        prolog += [f"        echo {shell_word(f'export {k}={v}')}" for k, v in exports.items()]
        prolog.append("        ;;")
    prolog += ["esac", ""]
    return "\n".join(prolog)


def readme_text(jobs: list[dict[str, Any]], stems: dict[str, str], source: str, notes: list[str],
                merged: bool, drawn: dict[str, str] | None = None, sl0: str = "") -> str:
    plans = {job["name"]: deployment(job) for job in jobs}
    readme = ["# QoS deployment from qoslab", "", f"Source: {markdown_code(source)}.", ""]
    hard = [job for job in jobs if plans[job["name"]].how == MPI_SUPPORT]
    special = [job for job in jobs if plans[job["name"]].how not in (ENVIRONMENT, MPI_SUPPORT)]
    if hard:
        readme += ["## This policy cannot be deployed by configuration alone", "",
                   "These jobs choose their SLs in a way no opensm.conf, policy file or environment variable "
                   "expresses. The tables below are deployed as simulated, but without the MPI-side change these "
                   "jobs send everything on their base SL, and the result will not be the one simulated:", ""]
        readme += [f"- **{markdown_code(job['name'])}**: {markdown_text(plans[job['name']].needs or '')}" for job in hard]
        readme.append("")
    if special:
        readme += ["## What the MPI side must do", ""]
        readme += [f"- **{markdown_code(job['name'])}**: {markdown_text(plans[job['name']].needs or '')}"
                   for job in special]
        readme.append("")
    readme += ["| job | SL | environment | how |", "|---|---|---|---|"]
    for job in jobs:
        plan = plans[job["name"]]
        how = "environment" if plan.how == ENVIRONMENT else plan.how
        readme.append(f"| {markdown_code(job['name'], table=True)} | {job['sl']} | `env/{stems[job['name']]}.env` | {how} |")
    if sl0:
        readme += ["", "**SL 0 is everyone else's.** Besides the jobs above on SL 0, every job not listed here and every "
                   "service without an SL of its own (IPoIB, storage, SA queries at OpenSM's `sm_sl` 0) sends on SL 0. "
                   f"{sl0}. These tables set what all of them get: re-weighting SL 0's VL changes it for the whole "
                   "fabric, not only for this study's jobs."]
    policy_copy = ("Copy `qos-policy.conf` to the `qos_policy_file` path: it replaces the policy file there, whose "
                   "port groups, QoS levels and match rules are not merged in (copy those you keep into it first).")
    step1 = ("1. `opensm.conf` is your opensm.conf with every QoS option set (`qos TRUE`, `max_op_vls`, the global "
             "`qos_*` and the `qos_ca_*`, `qos_sw0_*`, `qos_swe_*`, `qos_rtr_*` tables): install it in place of "
             f"the old one. {policy_copy}" if merged else
             "1. Merge `opensm.conf` into OpenSM's configuration: it sets every QoS option (`qos TRUE`, "
             "`max_op_vls`, the global `qos_*` and the `qos_ca_*`, `qos_sw0_*`, `qos_swe_*`, `qos_rtr_*` tables). "
             "`qoslab export opensm ... --base /etc/opensm/opensm.conf` does the merge (`opensm -c FILE` writes "
             f"OpenSM's own template to start from). {policy_copy}")
    variables = ", ".join(f"`{v}`" for v in SL_VARIABLES)
    readme += ["", step1,
               "2. If `qos_policy_file` changed, restart OpenSM: it reads that option only when it starts (SIGHUP "
               "does not re-read it). Otherwise send it SIGHUP: it re-reads opensm.conf's QoS options and the policy "
               "file at its path, and sweeps the fabric again. Check with `smpquery sl2vl <lid> <port>` and "
               "`smpquery vlarb <lid> <port>`.",
               f"3. Give each job its SL: source `env/<job>.env` ({variables}; nothing for SL 0, every stack's "
               "default), `srun --export=ALL,UCX_IB_SL=<sl>`, or install `slurm-taskprolog.sh` as TaskProlog "
               "(it matches jobs by name, literally: submit with `sbatch -J <job>` or `srun -J <job>`, since a job's "
               "default name is its script's). Stacks that ask the subnet manager for PathRecords "
               "(rdma_cm, MVAPICH2 with MV2_PATH_SL_QUERY=1) get their SL from `qos-policy.conf` instead.",
               *(["", "**qos-policy.conf names hosts the simulation chose** for "
                  + ", ".join(f"{markdown_code(name)} ({markdown_code(_placed(how))})" for name, how in drawn.items())
                  + ": their port groups list where the simulation placed them, not where they will run, so the rules "
                  "would give their SLs to whatever runs on those hosts. Give these jobs their SL through their "
                  "environment (step 3) and delete their match rules from `qos-policy.conf`, or simulate them with "
                  "`placement = \"hosts\"` on the hosts they will run on."] if drawn else []),
               "", "Matching by job name is a convenience, not access control: any user may name a job like one "
               "of these and get its SL. Where priority must be earned, give SLs by Slurm account or QOS instead.",
               "", "Routing engines that use VLs themselves (dfsssp, nue, lash, torus-2QoS) program SL2VL or SLs "
               "for deadlock freedom and fight these tables: route with ftree, updn, minhop or dor."]
    if notes:
        readme += ["", "## Not expressible in opensm.conf", ""] + [f"- {n}" for n in notes]
    return "\n".join(readme) + "\n"
