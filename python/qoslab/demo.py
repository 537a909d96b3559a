"""The built-in demonstration (until the study runner lands): a victim flow alone, then sharing a
fat tree with a saturating incast flood on 1 VL, on 2 VLs with equal weights, and on 2 VLs with the
victim's VL in the high-priority table. Scenarios are built in code; tune the parameters below."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from qoslab.scenario import Scenario
from qoslab.simulate import simulate

# ---- parameters -------------------------------------------------------------------------------

# XGFT(2; 8,4; 1,2): 4 leaves of 8 hosts, 2 spines; each leaf has 8 down and 2 up links (4:1).
TOPOLOGY = {"kind": "xgft", "m": [8, 4], "w": [1, 2]}
RUN = {"duration_us": 300.0, "warmup_us": 50.0}
SEED = 1

VICTIM = {  # latency-sensitive: leaf 0 -> leaf 1, light load
    "pattern": "uniform",
    "hosts": "0-7",
    "destinations": "8-15",
    "load": 0.2,
    "message_bytes": 4096,
    "sl": 0,
    "arrival": "poisson",
}
AGGRESSOR = {  # leaves 2 and 3 flood one host on leaf 1: a congestion tree over the victim's path
    "pattern": "incast",
    "hosts": "16-31",
    "destinations": [8],
    "load": "saturate",
    "message_bytes": 4096,
    "sl": 1,
}

ONE_VL = {"sl2vl": [0] * 16, "vlarb_low": "0:255"}
TWO_VLS = {"sl2vl": [0, 1] + [0] * 14, "vlarb_low": "0:255,1:255"}
TWO_VLS_VICTIM_HIGH = {"sl2vl": [0, 1] + [0] * 14, "vlarb_high": "0:255", "vlarb_low": "1:255", "high_limit": 255}

CASES: list[dict[str, Any]] = [
    {"case": "victim alone", "slug": "victim-alone", "data_vls": 2, "qos": TWO_VLS, "aggressor": False},
    {"case": "shared, 1 VL", "slug": "shared-1vl", "data_vls": 1, "qos": ONE_VL, "aggressor": True},
    {"case": "shared, 2 VLs, equal weights", "slug": "shared-2vl", "data_vls": 2, "qos": TWO_VLS, "aggressor": True},
    {
        "case": "shared, 2 VLs, victim high priority",
        "slug": "shared-2vl-high",
        "data_vls": 2,
        "qos": TWO_VLS_VICTIM_HIGH,
        "aggressor": True,
    },
]

# ---- running ----------------------------------------------------------------------------------


def scenario_for(case: dict[str, Any]) -> Scenario:
    traffic = [VICTIM] + ([AGGRESSOR] if case["aggressor"] else [])
    return Scenario(
        name=f"demo: {case['case']}",
        seed=SEED,
        fabric={"data_vls": case["data_vls"]},
        topology=TOPOLOGY,
        qos=case["qos"],
        traffic=[dict(t) for t in traffic],
        run=RUN,
    )


def flow_figures(summary: dict[str, Any], index: int, sl: int) -> dict[str, Any]:
    """Figures of one traffic table: per table if the engine reports it, else its SL's."""
    per_table = summary.get("by_traffic") or []
    figures = per_table[index] if index < len(per_table) else (summary.get("by_sl") or {}).get(str(sl), {})
    latency = figures.get("latency_ns") or {}
    return {"p50_ns": latency.get("p50"), "p99_ns": latency.get("p99"), "accepted_load": figures.get("accepted_load")}


def run_demo(out_dir: str | Path, console: Console | None = None) -> list[dict[str, Any]]:
    console = console or Console()
    out = Path(out_dir)
    rows = []
    for case in CASES:
        console.print(f"running: {case['case']}")
        result = simulate(scenario_for(case))
        result.save(out / case["slug"])
        victim = flow_figures(result.summary, 0, VICTIM["sl"])
        aggressor = flow_figures(result.summary, 1, AGGRESSOR["sl"]) if case["aggressor"] else {}
        rows.append(
            {
                "case": case["case"],
                "dir": case["slug"],
                "victim_p50_us": _us(victim["p50_ns"]),
                "victim_p99_us": _us(victim["p99_ns"]),
                "victim_accepted_load": victim["accepted_load"],
                "aggressor_accepted_load": aggressor.get("accepted_load"),
                "wall_seconds": result.summary.get("wall_seconds"),
            }
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo.json").write_text(json.dumps(rows, indent=2) + "\n")
    console.print(_table(rows))
    console.print(f"wrote demo.json and one folder per case to {out}/")
    return rows


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1000.0


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table(
        title="victim latency and accepted load under a saturating flood", caption="load: accepted, per sending host"
    )
    table.add_column("case", no_wrap=True)
    for column in ("victim p50 us", "victim p99 us", "victim load", "flood load"):
        table.add_column(column, justify="right")
    show = lambda v, fmt: "-" if v is None else format(v, fmt)  # noqa: E731
    for row in rows:
        table.add_row(
            row["case"],
            show(row["victim_p50_us"], ".2f"),
            show(row["victim_p99_us"], ".2f"),
            show(row["victim_accepted_load"], ".3f"),
            show(row["aggressor_accepted_load"], ".3f"),
        )
    return table
