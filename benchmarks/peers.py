"""qoslab against peer simulators on the same fat tree, alternating the two in one sitting.

    python benchmarks/peers.py --booksim PATH --sst PATH --simgrid-driver PATH   # writes benchmarks/peers.json
    QOSLAB_BOOKSIM=... QOSLAB_SST=... QOSLAB_SIMGRID_DRIVER=... python benchmarks/peers.py --rounds 5

The scenario and the peers' inputs are those of ../shared/peers/README.md (`--peers-dir`): a
1024-host 4-ary 5-tree, XGFT(5;4,4,4,4,4;1,4,4,4,4) with 1280 radix-8 switches, uniform random
traffic at load 0.4, 4 KiB packets, 100 Gb/s links, 32 KiB per VL. The peers are built outside
this repository from their own sources (BookSim2, SST core + elements with Merlin, SimGrid with
the README's sg_uniform.cpp driver) and given by path; a peer not given, or whose binary is not
there, is skipped and listed under `skipped` with the reason.

What is measured: simulated time per wall-clock second of the whole process (`os.wait4`'s
accounting, the same as `/usr/bin/time -v`), at steady state: long runs, so that start-up (about
0.5 s of Python import for qoslab, building 1280 routers for SST) is a small part. The runs:

    qoslab   python qrun.py ft45_u04.toml run.duration_us=2048 run.warmup_us=20
    BookSim  booksim ft_ib64.cfg, booksim ft_ib16.cfg   (64 B flits at 5.12 ns a cycle; 256 B at 20.48 ns)
    SST      sst merlin_ib.py --model-options=ft_0.4_204.8
    SimGrid  sg_uniform ft1024.xml 128 4096 1

and each peer's simulated time is what it prints (BookSim's "Time taken is N cycles" times its
cycle, SST's "simulated time", SimGrid's simulated_time_s). SimGrid's driver is closed-loop (one
message in flight per host) and runs far below load 0.4, so its simulated time is not the same
work: its ratio is taken on 4 KiB messages delivered per wall-clock second (qoslab's delivered
packets, each a 4 KiB message), and the simulated-time ratio is recorded beside it.

Why alternating: this machine (2 shared cores) drifts 2x in speed within minutes, so only ratios
taken side by side mean anything. Each round runs qoslab then the peer, A B A B ..., and the
round's ratio is qoslab's speed over the peer's from that pair; the report gives each round's
figures and the ratio's min, median and max. CPU seconds (user + sys) are recorded too, with the
ratio they give, since other work on the machine takes wall-clock time from both sides unevenly.
Re-run after an engine change with the same command; the figures land in benchmarks/peers.json.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PEERS_DIR = ROOT.parent / "shared" / "peers"
LINK_GBPS = 100.0
PACKET_BYTES = 4096


def whole_process(cmd: list[str], cwd: Path, timeout: float) -> dict[str, Any]:
    """Run `cmd` to the end; its output, wall-clock seconds and the kernel's accounting of it."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > t0 + timeout:
                timed_out = True
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    return {"text": text, "returncode": proc.returncode, "timed_out": timed_out,
            "wall_seconds": wall, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_bytes": usage.ru_maxrss * 1024}


def parse_qoslab(text: str) -> dict[str, Any]:
    line = next(ln for ln in reversed(text.splitlines()) if ln.startswith("{"))
    s = json.loads(line)
    return {"simulated_us": s["sim_time_ns"] / 1e3, "packets_delivered": s["packets_delivered"],
            "engine_wall_seconds": s["engine_wall_s"], "import_parse_seconds": s["import_parse_s"],
            "accepted_load": s["accepted_load"], "latency_mean_ns": s["latency_mean_ns"], "status": s["status"]}


def booksim_parser(config: Path) -> Callable[[str], dict[str, Any]]:
    flits = int(re.search(r"^\s*packet_size\s*=\s*(\d+)", config.read_text(), re.M).group(1))  # type: ignore[union-attr]
    cycle_ns = PACKET_BYTES / flits * 8 / LINK_GBPS

    def parse(text: str) -> dict[str, Any]:
        cycles = int(re.findall(r"Time taken is (\d+) cycles", text)[-1])
        accepted = re.findall(r"Accepted flit rate average\s*=\s*([\d.]+)", text)
        return {"simulated_us": cycles * cycle_ns / 1e3, "cycles": cycles, "cycle_ns": cycle_ns,
                "flit_bytes": PACKET_BYTES // flits, "accepted_flit_rate": float(accepted[-1]) if accepted else None}
    return parse


SI = {"": 1e6, "m": 1e3, "u": 1.0, "µ": 1.0, "n": 1e-3, "p": 1e-6, "f": 1e-9}


def parse_sst(text: str) -> dict[str, Any]:
    value, prefix = re.findall(r"simulated time:\s*([\d.eE+-]+)\s*([munpfµ]?)s", text)[-1]
    return {"simulated_us": float(value) * SI[prefix]}


def parse_simgrid(text: str) -> dict[str, Any]:
    fields = dict(re.findall(r"(\S+?)=(\S+)", text.strip().splitlines()[-1]))
    return {"simulated_us": float(fields["simulated_time_s"]) * 1e6, "packets_delivered": int(fields["msgs"]),
            "setup_wall_seconds": float(fields["setup_wall_s"]), "run_wall_seconds": float(fields["run_wall_s"])}


def tool_output(cmd: list[str]) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout + done.stderr).strip() or None


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def find_binary(given: str | None) -> Path | None:
    if not given:
        return None
    found = shutil.which(given)
    return Path(found).resolve() if found else None


def measure(run: dict[str, Any], parse: Callable[[str], dict[str, Any]], ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    if run["returncode"] not in ok or run["timed_out"]:
        sys.exit(f"benchmarks/peers.py: exit {run['returncode']}{' (timed out)' if run['timed_out'] else ''}:\n"
                 f"{run['text'][-3000:]}")
    figures = parse(run["text"])
    figures.update({k: run[k] for k in ("returncode", "wall_seconds", "cpu_seconds", "peak_rss_bytes")})
    figures["simulated_us_per_wall_second"] = figures["simulated_us"] / run["wall_seconds"]
    figures["simulated_us_per_cpu_second"] = figures["simulated_us"] / run["cpu_seconds"]
    if "packets_delivered" in figures:
        figures["packets_per_wall_second"] = figures["packets_delivered"] / run["wall_seconds"]
        figures["packets_per_cpu_second"] = figures["packets_delivered"] / run["cpu_seconds"]
    return figures


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    env = os.environ.get
    parser.add_argument("--booksim", default=env("QOSLAB_BOOKSIM"), help="BookSim2 binary (env QOSLAB_BOOKSIM)")
    parser.add_argument("--booksim-configs", default="ft_ib64.cfg,ft_ib16.cfg",
                        help="BookSim configs in --peers-dir, each raced as its own peer")
    parser.add_argument("--booksim-version", default=env("QOSLAB_BOOKSIM_VERSION", ""),
                        help="what the BookSim binary was built from (BookSim prints no version)")
    parser.add_argument("--sst", default=env("QOSLAB_SST"), help="SST core's `sst` binary, Merlin registered (env QOSLAB_SST)")
    parser.add_argument("--sst-us", type=float, default=204.8, help="SST's simulated µs (README: 204.8)")
    parser.add_argument("--sst-version", default=env("QOSLAB_SST_VERSION", ""), help="sst-core / sst-elements revisions")
    parser.add_argument("--simgrid-driver", default=env("QOSLAB_SIMGRID_DRIVER"),
                        help="sg_uniform built from --peers-dir/sg_uniform.cpp (env QOSLAB_SIMGRID_DRIVER)")
    parser.add_argument("--simgrid-messages", type=int, default=128, help="messages per host (README: 128)")
    parser.add_argument("--simgrid-version", default=env("QOSLAB_SIMGRID_VERSION", ""))
    parser.add_argument("--peers-dir", default=env("QOSLAB_PEERS_DIR", str(DEFAULT_PEERS_DIR)),
                        help="the shared peer-race directory (README, configs, qrun.py)")
    parser.add_argument("--qoslab-us", type=float, default=2048.0, help="qoslab's simulated µs (README: 2048)")
    parser.add_argument("--rounds", type=int, default=3, help="A B pairs per peer (at least 3)")
    parser.add_argument("--only", default="", help="comma-separated peer names to race (default: all given)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed for one run")
    parser.add_argument("--out", default=str(Path(__file__).with_name("peers.json")))
    parser.add_argument("--update", action="store_true",
                        help="keep the entries in --out of peers not raced this time (each entry carries its date)")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error("--rounds must be at least 3")
    peers_dir = Path(args.peers_dir).resolve()
    if not (peers_dir / "qrun.py").is_file():
        sys.exit(f"benchmarks/peers.py: no qrun.py in {peers_dir} (give --peers-dir)")

    qoslab_cmd = [sys.executable, str(peers_dir / "qrun.py"), "ft45_u04.toml",
                  f"run.duration_us={args.qoslab_us:g}", f"run.warmup_us={min(20.0, args.qoslab_us / 10):g}"]
    qoslab_version = {
        "commit": tool_output(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "dirty": bool(tool_output(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])),
        "python": platform.python_version(),
    }

    # (name, binary option, command after the binary, parser, what it was built from, how its ratio is taken)
    candidates: list[tuple[str, str | None, list[str], Callable[[str], dict[str, Any]], dict[str, Any], str]] = []
    for config in filter(None, args.booksim_configs.split(",")):
        path = peers_dir / config
        flits = re.search(r"^\s*packet_size\s*=\s*(\d+)", path.read_text(), re.M) if path.is_file() else None
        flit_bytes = PACKET_BYTES // int(flits.group(1)) if flits else 0
        candidates.append((f"booksim2-{flit_bytes}B-flits", args.booksim, [config], booksim_parser(path),
                           {"built_from": args.booksim_version}, "simulated_time"))
    candidates.append(("sst-merlin", args.sst, ["merlin_ib.py", f"--model-options=ft_0.4_{args.sst_us:g}"], parse_sst,
                       {"built_from": args.sst_version}, "simulated_time"))
    candidates.append(("simgrid", args.simgrid_driver,
                       ["ft1024.xml", str(args.simgrid_messages), str(PACKET_BYTES), "1"], parse_simgrid,
                       {"built_from": args.simgrid_version}, "packets"))
    only = set(filter(None, args.only.split(",")))

    started = datetime.datetime.now(datetime.UTC)
    load_at_start = os.getloadavg()
    peers: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for name, given, rest, parse, version, ratio_on in candidates:
        if only and name not in only:
            skipped[name] = "not in --only"
            continue
        binary = find_binary(given)
        if binary is None:
            skipped[name] = f"binary {given!r} not found" if given else "no binary given"
            continue
        if name.startswith("sst"):
            version["sst --version"] = tool_output([str(binary), "--version"])
        if name == "simgrid":
            ldd = tool_output(["ldd", str(binary)]) or ""
            version["libsimgrid"] = next((ln.split()[0] for ln in ldd.splitlines() if "simgrid" in ln), None)
            version["pkg-config"] = tool_output(["pkg-config", "--modversion", "simgrid"])
        version["binary"] = str(binary)
        version["binary_sha256_16"] = sha256(binary)
        peer_cmd = [str(binary), *rest]
        rounds = []
        for round_ in range(args.rounds):
            a = measure(whole_process(qoslab_cmd, peers_dir, args.timeout), parse_qoslab)
            # BookSim's main returns -1 when the simulation succeeded (exit status 255).
            b = measure(whole_process(peer_cmd, peers_dir, args.timeout), parse, (0, 255) if "booksim" in name else (0,))
            key = "packets" if ratio_on == "packets" else "simulated_us"
            ratio = a[f"{key}_per_wall_second"] / b[f"{key}_per_wall_second"]
            ratio_cpu = a[f"{key}_per_cpu_second"] / b[f"{key}_per_cpu_second"]
            ratio_sim = a["simulated_us_per_wall_second"] / b["simulated_us_per_wall_second"]
            rounds.append({"qoslab": a, "peer": b, "ratio": ratio, "ratio_cpu": ratio_cpu,
                           "ratio_simulated_time": ratio_sim})
            print(f"{name} round {round_ + 1}: qoslab {a['simulated_us']:.1f} µs in {a['wall_seconds']:.1f} s, "
                  f"peer {b['simulated_us']:.1f} µs in {b['wall_seconds']:.1f} s; qoslab/peer {ratio:.3g} "
                  f"(cpu {ratio_cpu:.3g})", flush=True)
        peers[name] = {
            "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "qoslab_commit": qoslab_version["commit"],
            "version": version,
            "command": " ".join([Path(peer_cmd[0]).name, *rest]),
            "binary": str(binary),
            "ratio_measure": "4 KiB packets delivered per wall-clock second" if ratio_on == "packets"
            else "simulated µs per wall-clock second",
            "rounds": rounds,
            "ratio": spread([r["ratio"] for r in rounds]),
            "ratio_cpu": spread([r["ratio_cpu"] for r in rounds]),
            "ratio_simulated_time": spread([r["ratio_simulated_time"] for r in rounds]),
        }
        print(f"{name}: qoslab/peer median {peers[name]['ratio']['median']:.3g} "
              f"(min {peers[name]['ratio']['min']:.3g}, max {peers[name]['ratio']['max']:.3g})", flush=True)

    previous = json.loads(Path(args.out).read_text()) if args.update and Path(args.out).is_file() else {}
    for name, entry in previous.get("peers", {}).items():
        if name not in peers:
            peers[name] = entry
            skipped.pop(name, None)
    report = {
        "what": "qoslab's speed over each peer's on ../shared/peers' 1024-host 4-ary 5-tree, uniform load 0.4, "
                "4 KiB packets; whole processes alternated qoslab, peer, qoslab, peer ...; ratio > 1: qoslab faster",
        "date_utc": started.isoformat(timespec="seconds"),
        "finished_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average_at_start": load_at_start,
                    "load_average_at_end": os.getloadavg()},
        "qoslab": {"version": qoslab_version, "command": "python qrun.py " + " ".join(qoslab_cmd[2:])},
        "peers_dir": str(peers_dir),
        "rounds": args.rounds,
        "peers": peers,
        "skipped": skipped,
        "rerun": "python benchmarks/peers.py --booksim BOOKSIM --sst SST --simgrid-driver SG_UNIFORM "
                 "(or QOSLAB_BOOKSIM, QOSLAB_SST, QOSLAB_SIMGRID_DRIVER)",
    }
    Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}; skipped: {skipped or 'none'}")


if __name__ == "__main__":
    main()
