"""A single-node Slurm on this machine for the tests (docs: ../shared/reference/platform-notes.md
in the project's history): munged, slurmctld and slurmd from Debian's packages, a generated
slurm.conf on localhost only, every file in one scratch folder, and every daemon stopped by the
PID its pid file holds, even when the test fails."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue")


def missing() -> str | None:
    """Why a Slurm cannot be started here, or None."""
    absent = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} not found; scripts/install-slurm installs it)"
    if os.geteuid() != 0:
        return "the test Slurm runs its daemons as root (SlurmUser=root) and this user is not root"
    return None


def _tool(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node() -> tuple[int, int]:
    """CPUs and memory (MB) of this machine, as slurmd -C sees them."""
    done = subprocess.run([_tool("slurmd"), "-C"], capture_output=True, text=True, check=True)
    fields = dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
    return int(fields["CPUs"]), int(fields["RealMemory"])


def _stop(pid_file: Path) -> None:
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(pid, 0)  # raises ProcessLookupError once it has gone
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def single_node_slurm(scratch: Path) -> Iterator[dict[str, str]]:
    """Starts the daemons in `scratch`; yields the environment client commands need (SLURM_CONF)."""
    scratch.mkdir(parents=True, exist_ok=True)
    for sub in ("munge", "state", "spool", "log"):
        (scratch / sub).mkdir(exist_ok=True)
    os.chmod(scratch, 0o755)
    os.chmod(scratch / "munge", 0o755)  # munged refuses a socket folder that is not 755
    munge_socket = scratch / "munge" / "munge.socket"
    key = scratch / "munge" / "munge.key"
    pids = {name: scratch / f"{name}.pid" for name in ("munged", "slurmctld", "slurmd")}
    cpus, memory = _node()
    host = socket.gethostname()
    controller_port, node_port = _free_port(), _free_port()
    conf = scratch / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=qoslabtest",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={controller_port}",
        f"SlurmdPort={node_port}",
        "SlurmUser=root",
        "AuthType=auth/munge", "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory", "DefMemPerCPU=1024",
        "MpiDefault=none", "ReturnToService=2", "SchedulerType=sched/backfill",
        "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
        f"StateSaveLocation={scratch / 'state'}", f"SlurmdSpoolDir={scratch / 'spool'}",
        f"SlurmctldPidFile={pids['slurmctld']}", f"SlurmdPidFile={pids['slurmd']}",
        f"SlurmctldLogFile={scratch / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={scratch / 'log' / 'slurmd.log'}",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} State=UNKNOWN",
        f"PartitionName=debug Nodes={host} Default=YES MaxTime=60 State=UP",
        "",
    ]))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run([_tool("mungekey"), "--create", f"--keyfile={key}", "--force"], check=True, capture_output=True)
        subprocess.run([_tool("munged"), f"--key-file={key}", f"--socket={munge_socket}",
                        f"--pid-file={pids['munged']}", f"--log-file={scratch / 'log' / 'munged.log'}",
                        f"--seed-file={scratch / 'munge' / 'seed'}", "--force"], check=True, capture_output=True, env=env)
        subprocess.run([_tool("slurmctld")], check=True, capture_output=True, env=env)
        subprocess.run([_tool("slurmd")], check=True, capture_output=True, env=env)
        _wait_idle(env, scratch)
        yield env
    finally:
        for name in ("slurmd", "slurmctld", "munged"):
            _stop(pids[name])


def _wait_idle(env: dict[str, str], scratch: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env)
        state = done.stdout.strip()
        if done.returncode == 0 and state.startswith("idle"):
            return
        time.sleep(0.5)
    logs = "\n".join(p.read_text()[-1500:] for p in (scratch / "log").glob("*.log"))
    raise RuntimeError(f"the test Slurm did not become idle in {timeout} s (sinfo: {state!r})\n{logs}")
