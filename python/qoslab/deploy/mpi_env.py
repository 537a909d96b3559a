"""How each job of a policy gets its service level on a real cluster, stack by stack, and what a
policy needs beyond configuration. Every variable is named with the library that reads it and
where that is documented (docs/real-fabrics.md, "MPI environment", lists the sources):

- UCX reads UCX_IB_SL (Open MPI 5, whose InfiniBand path is the ucx PML; MPICH and MVAPICH 3
  built on ch4:ucx; HPC-X; Intel MPI with FI_PROVIDER=mlx). Its default is `auto`, which picks
  the SL matching UCX_IB_AR_ENABLE (adaptive routing), so it is written only for a job whose SL
  is not 0: writing 0 would override that choice for nothing.
- MVAPICH2 reads MV2_DEFAULT_SERVICE_LEVEL, MVAPICH 3's CH3 channel MVP_DEFAULT_SERVICE_LEVEL;
  both spread connections over SLs 0..N-1 with MV2_USE_QOS/MVP_USE_QOS and MV2_NUM_SLS/MVP_NUM_SLS.
- NCCL reads NCCL_IB_SL.
- Open MPI up to 4.x reads OMPI_MCA_btl_openib_ib_service_level when it uses the openib BTL
  (removed in Open MPI 5).
SL 0 is every stack's default, so a job on SL 0 needs nothing set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qoslab.deploy.names import comment, shell_word

# The stacks, and for each the variable that sets a connection's SL.
SL_VARIABLES = {
    "UCX_IB_SL": "UCX: Open MPI 5 (pml ucx), MPICH/MVAPICH 3 on ch4:ucx, HPC-X, Intel MPI with FI_PROVIDER=mlx",
    "MV2_DEFAULT_SERVICE_LEVEL": "MVAPICH2",
    "MVP_DEFAULT_SERVICE_LEVEL": "MVAPICH 3 (CH3 channel)",
    "NCCL_IB_SL": "NCCL",
    "OMPI_MCA_btl_openib_ib_service_level": "Open MPI 4.x and older with the openib BTL",
}

# How a job's SL rule is deployed, from the simplest to what no configuration can do.
ENVIRONMENT = "environment"  # one SL per job: environment variables (or PathRecords)
RANK_WRAPPER = "rank-wrapper"  # one SL per rank: a generated wrapper sets it before exec
MVAPICH_QOS = "mvapich-qos"  # connections spread over SLs 0..N-1: MVAPICH's own QoS mode only
MPI_SUPPORT = "mpi-support"  # chosen per message or at run time: needs the MPI library changed


@dataclass(frozen=True)
class Deployment:
    how: str
    needs: str | None  # what must happen on the MPI side, None for ENVIRONMENT

    @property
    def by_configuration(self) -> bool:
        """Deployable with standard MPI settings (environment variables alone)."""
        return self.how == ENVIRONMENT


def deployment(job: dict[str, Any]) -> Deployment:
    """How `job` (a resolved scenario's job) gets its SLs on a cluster."""
    policy = job.get("sl_policy") or {"kind": "job"}
    kind = policy["kind"]
    if kind == "job":
        return Deployment(ENVIRONMENT, None)
    if kind == "ranks" and policy["match"] == "source":
        return Deployment(RANK_WRAPPER, f"ranks {_ranks(policy['ranks'])} send on SL {policy['sl']}, the rest on SL "
                          f"{job['sl']}: start every rank through the generated wrapper (env/<job>-sl-wrapper.sh), "
                          "which sets the SL from the rank number before exec")
    if kind == "ranks":
        return Deployment(MPI_SUPPORT, f"messages {'to' if policy['match'] == 'destination' else 'to or from'} ranks "
                          f"{_ranks(policy['ranks'])} go on SL {policy['sl']}: a rank's SL is its own connections', so "
                          "choosing it by the receiver needs the MPI library to pick the SL per destination")
    if kind == "slowest-ranks":
        return Deployment(MPI_SUPPORT, f"the slowest {policy['fraction']:.0%} of ranks ({policy['metric']}, measured after "
                          f"{policy['after_iterations']} iterations) move to SL {policy['sl']}: this needs the MPI "
                          "library to measure its ranks and re-create connections on the new SL; a static alternative "
                          "is a per-rank policy for the ranks a profiling run found slow")
    if kind == "spread":
        sls = list(policy["sls"])
        if policy["by"] == "connection" and sls == list(range(len(sls))):
            return Deployment(MVAPICH_QOS, f"connections spread over SLs 0..{len(sls) - 1}: MVAPICH2 and MVAPICH 3 (CH3) "
                              f"do this with MV2_USE_QOS=1 MV2_NUM_SLS={len(sls)} (MVP_USE_QOS, MVP_NUM_SLS), taking the "
                              "next SL round robin at each connection set-up call, as the study simulated for connections "
                              "made on demand (keep MV2_ON_DEMAND_THRESHOLD below the job's size); connections set up "
                              "together at start-up share one call's SL, which was not simulated; UCX, NCCL and Open MPI "
                              "cannot spread one job over SLs and would send it all on one SL")
        return Deployment(MPI_SUPPORT, f"messages spread over SLs {sls} by {policy['by']}: the MPI library must open "
                          "one connection per SL and choose among them per message; no environment variable does it")
    if kind == "latency-history":
        return Deployment(MPI_SUPPORT, f"each message's SL is chosen from the latency of earlier ones (SLs "
                          f"{policy['sls']}, lowest priority first: the ratio of the exponential average of earlier "
                          "latencies to the best one, per sender, destination and size class, reaching more of the "
                          f"thresholds {policy['thresholds']} moves a message up the tiers (direction \"promote\") or "
                          "down them (\"demote\"), and high_bytes_cap bounds the top tier's share of the bytes; "
                          f"here direction {policy.get('direction', 'promote')}, see docs/jobs.md): this needs MPI-side support (one QP per SL and the selection logic); no environment variable does it")
    return Deployment(MPI_SUPPORT, f"SL policy {kind!r}: needs MPI-side support")


def _ranks(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:12]))
    return f"[{shown}{', ...' if len(ranks) > 12 else ''}] ({len(ranks)})" if len(ranks) > 12 else f"[{shown}]"


def sl_exports(sl: int) -> dict[str, str]:
    """The variables that put a process's connections on `sl`, every stack at once; none for SL
    0, every stack's default (UCX's `auto` then still follows adaptive routing)."""
    return {} if sl == 0 else {name: str(sl) for name in SL_VARIABLES}


MVAPICH_QOS_VARIABLES = {"MV2_USE_QOS": "MVAPICH2", "MV2_NUM_SLS": "MVAPICH2", "MVP_USE_QOS": "MVAPICH 3 (CH3)",
                         "MVP_NUM_SLS": "MVAPICH 3 (CH3)"}


def job_exports(job: dict[str, Any]) -> dict[str, str]:
    """Every variable a job's processes get (the same for all its ranks; a rank wrapper adds the
    per-rank ones)."""
    exports = sl_exports(job["sl"])
    if deployment(job).how == MVAPICH_QOS:
        count = str(len(job["sl_policy"]["sls"]))
        exports.update({"MV2_USE_QOS": "1", "MV2_NUM_SLS": count, "MVP_USE_QOS": "1", "MVP_NUM_SLS": count})
    return exports


def env_file_text(job: dict[str, Any]) -> str:
    """A job's environment as a file to source."""
    plan = deployment(job)
    lines = [f"# job {comment(job['name'])}: SL {job['sl']}"]
    if plan.needs:
        lines.append(f"# MPI side ({plan.how}): {comment(plan.needs)}")
    exports = job_exports(job)
    if job["sl"] == 0:
        lines.append("# SL 0 is every MPI stack's default: no SL variable is set (UCX_IB_SL stays 'auto').")
    for name, value in exports.items():
        lines += [f"# {SL_VARIABLES.get(name) or MVAPICH_QOS_VARIABLES[name]}", f"export {name}={value}"]
    return "\n".join(lines) + "\n"


def rank_wrapper_text(job: dict[str, Any]) -> str:
    """A wrapper that starts one rank of `job` with the SL the policy gives it: `srun wrapper
    ./app` (or mpirun ... wrapper ./app). The rank comes from whichever launcher started it."""
    policy = job["sl_policy"]
    ranks = " ".join(str(r) for r in sorted(set(policy["ranks"])))
    high = sl_exports(policy["sl"]) or {"UCX_IB_SL": "0"}
    low = sl_exports(job["sl"]) or {}
    lines = ["#!/bin/sh", f"# qoslab per-rank SL wrapper for job {comment(job['name'])}: ranks listed below send on "
             f"SL {policy['sl']}, the others on SL {job['sl']}.",
             "# Usage: srun env/<job>-sl-wrapper.sh ./app args (or: mpirun ... env/<job>-sl-wrapper.sh ./app args)",
             "# The MPI launcher's own rank first: under mpirun inside an allocation every process",
             "# inherits the batch step's SLURM_PROCID (0), which only srun sets per rank.",
             'rank="${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${MV2_COMM_WORLD_RANK:-${SLURM_PROCID:-}}}}}"',
             'if [ -z "$rank" ]; then echo "qoslab sl wrapper: cannot tell this process\'s rank" >&2; exit 1; fi',
             f"case \" {ranks} \" in",
             '    *" $rank "*)']
    lines += [f"        export {name}={shell_word(value)}" for name, value in high.items()]
    lines += ["        ;;", "    *)"]
    lines += [f"        export {name}={shell_word(value)}" for name, value in low.items()] or ["        :"]
    lines += ["        ;;", "esac", 'exec "$@"', ""]
    return "\n".join(lines)
