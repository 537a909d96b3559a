"""The real InfiniBand tools the real-tool tests run (test_real_tools.py, test_real_tools_cc.py):
an ibsim fabric, tools attached to it through libumad2sim, every process stopped by its pid.
`.ci/run` installs opensm, ibsim-utils and infiniband-diags (scripts/install-ib-tools); where they
are missing the tests skip, saying so.

One ibsim at a time: ibsim binds the fixed socket name "sim:ctl", and a second one cannot start
while the first runs (the tools would then attach to the first one's fabric). Module-scoped
fixtures live until their module ends, so a fabric starting its ibsim first closes any other this
process still has running (pytest runs a fixture's tests together, so the one closed is done),
and start_ibsim fails, saying so, when ibsim cannot bind its socket (another ibsim on the machine)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

UMAD2SIM = Path("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so")
TOOLS = ("ibsim", "opensm", "ibnetdiscover", "smpquery", "ibroute")
missing = [t for t in TOOLS if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
requires_ib_tools = pytest.mark.skipif(
    bool(missing) or not UMAD2SIM.exists(),
    reason=f"the real InfiniBand tools are not installed ({', '.join(missing) or UMAD2SIM}): "
           "apt-get install opensm ibsim-utils infiniband-diags",
)


def tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


RUNNING: list[Fabric] = []  # the fabrics whose ibsim this process started and has not closed


class Fabric:
    """An ibsim fabric with OpenSM run once over it; tools run against it by LD_PRELOAD."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.env = {**os.environ, "LD_PRELOAD": str(UMAD2SIM), "OSM_TMP_DIR": str(folder),
                    "OSM_CACHE_DIR": str(folder)}
        self.procs: list[subprocess.Popen] = []

    def start_ibsim(self, net: Path, *flags: str) -> None:
        """`flags`: more of ibsim's options (-v -v -v: every MAD it receives dumped to ibsim.log)."""
        for other in list(RUNNING):
            other.close()
        RUNNING.append(self)
        log = open(self.folder / "ibsim.log", "w")  # noqa: SIM115 - the daemon writes it for its lifetime
        proc = subprocess.Popen([tool("ibsim"), "-s", *flags, str(net)], stdin=subprocess.PIPE, stdout=log,
                                stderr=subprocess.STDOUT, cwd=self.folder, start_new_session=True)
        self.procs.append(proc)
        # ibsim listens once it has read the net file; a tool run before then cannot attach.
        for _ in range(100):
            if "sim>" in (self.folder / "ibsim.log").read_text():
                # It prompts before binding its socket: one already bound (another ibsim on this
                # machine) ends it, and the tools would attach to the other one's fabric.
                time.sleep(0.2)
                text = (self.folder / "ibsim.log").read_text()
                if proc.poll() is not None or "ibpanic" in text:
                    raise AssertionError(f"ibsim could not start (another ibsim running?): {text[-500:]}")
                return
            if proc.poll() is not None:
                raise AssertionError(f"ibsim exited: {(self.folder / 'ibsim.log').read_text()}")
            time.sleep(0.05)
        raise AssertionError("ibsim did not start")

    def run(self, *args: str, timeout: float = 60) -> str:
        proc = subprocess.Popen([tool(args[0]), *args[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.env, cwd=self.folder, text=True, start_new_session=True)
        self.procs.append(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            self.stop(proc)
        assert proc.returncode == 0, f"{args}: exit {proc.returncode}: {err}"
        return out

    def start(self, *args: str) -> subprocess.Popen:
        """A tool left running (OpenSM as the subnet's master), stopped by close()."""
        proc = subprocess.Popen([tool(args[0]), *args[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=self.env, cwd=self.folder, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen) -> None:
        """Ends the process and its group: SIGTERM, then SIGKILL if it has not gone within 5 s
        (an OpenSM whose ibsim is gone can hang in its shutdown and outlive the tests)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=5)
                return
            except subprocess.TimeoutExpired:
                continue

    def close(self) -> None:
        for proc in reversed(self.procs):
            self.stop(proc)
        if self in RUNNING:
            RUNNING.remove(self)


def export_to_ibsim(folder: Path, scenario, base: str | None = None) -> tuple[Path, Path]:
    """The scenario's fabric as ibsim's net file and its `qoslab export opensm` (merged into
    `base` if given) under `folder/export`; returns (net file, exported opensm.conf)."""
    from qoslab.deploy import export_opensm
    from qoslab.io.ibnetdiscover import write_ibsim

    net = folder / "fabric.net"
    net.write_text(write_ibsim(scenario.tool_fabric()))
    export_opensm(scenario, folder / "export", policy_file=str(folder / "export" / "qos-policy.conf"), base=base)
    return net, folder / "export" / "opensm.conf"


def lids(topo: str) -> tuple[dict[str, int], dict[str, int]]:
    switch = {m[1]: int(m[2]) for m in re.finditer(r'Switch\s+\d+\s+"S-[0-9a-f]+"\s+# "([^"]+)" base port 0 lid (\d+)', topo)}
    hosts = {}
    for m in re.finditer(r'Ca\s+\d+\s+"H-[0-9a-f]+"\s+# "([^"]+)"\n\[1\]\([0-9a-f]+\)\s+"S-[0-9a-f]+"\[\d+\]\s+# lid (\d+)', topo):
        hosts[m[1]] = int(m[2])
    return switch, hosts


def sl2vl_rows(text: str) -> list[list[int]]:
    return [[int(v) for v in row.split("|")[1:-1]] for row in re.findall(r"ports: in\s+\d+, out\s+\d+: (\|.*\|)", text)]
