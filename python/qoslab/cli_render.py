"""The qoslab command line's terminal output: the consoles, and the tables and lines each command
prints (run summaries, study results, plans, `check`'s description of a scenario), with the
run's progress line. No command logic: cli.py decides what to show, this module shows it."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

from rich.console import Console
from rich.table import Table
from rich.text import Text

from qoslab.scenario import Scenario

# Off a terminal (a log file, a pipe, CI) there is no width to respect, and rich's default of 80
# columns folded policy names and figures inside the study table's cells; COLUMNS still decides.
OFF_TERMINAL_WIDTH = 400
console = Console(highlight=False)
if not console.is_terminal and "COLUMNS" not in os.environ:
    console.width = OFF_TERMINAL_WIDTH
err_console = Console(stderr=True, soft_wrap=True, highlight=False)


@contextmanager
def progress_display(scenario: Scenario) -> Iterator[Callable[[float, float, int], None] | None]:
    """On a terminal, a status line on stderr while the run lasts: simulated time, events and,
    for open-loop runs (which end at run.duration_us), about how long is left."""
    if not err_console.is_terminal:
        yield None
        return
    start = time.monotonic()
    with err_console.status("simulating") as status:

        def report(now_us: float, end_us: float, events: int) -> None:
            text = f"simulated {now_us:,.1f} µs, {events / 1e6:,.1f} M events"
            if not scenario.jobs and now_us > 0:
                text += f", about {(time.monotonic() - start) * (end_us - now_us) / now_us:,.0f} s left"
            status.update(text)

        yield report


def fmt(value: Any, scale: float = 1.0, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float) and value != value:  # NaN: not defined (e.g. % of a zero baseline)
        return "-"
    if isinstance(value, float):
        return f"{value / scale:.{digits}g}" if abs(value / scale) < 10 ** digits else f"{value / scale:,.0f}"
    return str(value)


def print_summary(summary: dict[str, Any], title: str) -> None:
    latency = summary.get("latency_ns") or {}
    wall = summary.get("wall_seconds") or 0.0
    hops_per_s = summary.get("packet_hops", 0) / wall if wall > 0 else None
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold", overflow="fold")
    table.add_column(justify="right", overflow="fold")
    rows = [
        ("hosts / switches / links", " / ".join(fmt(summary.get(k)) for k in ("hosts", "switches", "links"))),
        ("simulated time (us)", fmt(summary.get("sim_time_ns"), 1e3, 4)),
        ("offered load", fmt(summary.get("offered_load"))),
        ("accepted load", fmt(summary.get("accepted_load"))),
        ("latency p50 / p99 (us)", f"{fmt(latency.get('p50'), 1e3)} / {fmt(latency.get('p99'), 1e3)}"),
        ("events", fmt(summary.get("events"))),
        ("wall time (s)", fmt(wall)),
        ("packet-hops per second", fmt(hops_per_s)),
    ]
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)

    by_sl = summary.get("by_sl") or {}
    if by_sl:
        per_sl = Table(title="per service level", title_justify="left")
        for column in ("SL", "offered load", "accepted load", "p50 (us)", "p99 (us)", "max (us)"):
            per_sl.add_column(column, justify="right", overflow="fold")
        for sl, figures in sorted(by_sl.items(), key=lambda item: int(item[0])):
            lat = figures.get("latency_ns") or {}
            per_sl.add_row(
                sl,
                fmt(figures.get("offered_load")),
                fmt(figures.get("accepted_load")),
                fmt(lat.get("p50"), 1e3),
                fmt(lat.get("p99"), 1e3),
                fmt(lat.get("max"), 1e3),
            )
        console.print(per_sl)
    jobs = summary.get("jobs") or {}
    if jobs:
        per_job = Table(title="jobs", title_justify="left")
        for column in ("job", "ranks", "runtime us", "runs", "iters", "iter p50/p99 us", "in MPI", "MiB sent"):
            per_job.add_column(column, justify="right", overflow="fold")
        for name, job in jobs.items():
            it = job.get("rank_iteration_ns") or {}
            per_job.add_row(
                name, fmt(job.get("ranks")), fmt(job.get("runtime_us")), fmt(job.get("runs_completed")),
                fmt(job.get("iterations")), f"{fmt(it.get('p50'), 1e3)} / {fmt(it.get('p99'), 1e3)}",
                f"{100 * job.get('mpi_wait_fraction', 0.0):.0f}%", fmt(job.get("bytes_sent", 0) / 2**20),
            )
        console.print(per_job)
    print_congestion_control(summary)
    if summary.get("interrupted"):
        console.print(Text("the run was interrupted: figures cover the simulated time only", style="yellow"))


def print_congestion_control(summary: dict[str, Any]) -> None:
    """With congestion control on: the whole run's CC counts, and per traffic table and job what
    was marked, notified back and held back (whole-run counts, like the engine's)."""
    cc = summary.get("congestion_control")
    if not cc:
        return
    table = Table(title="congestion control (whole run)", title_justify="left")
    for column in ("class", "FECN marked", "BECNs received", "throttled (us)"):
        table.add_column(column, justify="right", overflow="fold")
    classes = [(f"traffic[{i}]", t) for i, t in enumerate(summary.get("by_traffic") or [])]
    classes += [(name, job.get("network") or {}) for name, job in (summary.get("jobs") or {}).items()]
    for name, figures in classes:
        table.add_row(name, fmt(figures.get("fecn_marked_packets")), fmt(figures.get("becn_received")),
                      fmt(None if figures.get("cc_throttle_ps") is None else float(figures["cc_throttle_ps"]), 1e6))
    table.caption = (f"marks: {fmt(cc.get('marks_root'))} as root, {fmt(cc.get('marks_victim'))} as victim; "
                     f"CNPs {fmt(cc.get('cnp_packets'))} ({fmt(cc.get('cnp_wire_bytes'))} wire bytes); "
                     f"highest CCT index {fmt(cc.get('max_ccti'))}; throttled: summed over send queues")
    console.print(table)


def print_study(outcome: Any) -> None:
    from qoslab.study.results import policy_table

    rows = policy_table(outcome.tables, outcome.policies)
    table = Table(title="policies (mean over repetitions)", title_justify="left")
    if rows.empty:
        console.print(Text("no policy has a complete set of runs to compare", style="yellow"))
    else:
        for column in rows.columns:
            if column == "policy":
                table.add_column(column, overflow="fold")  # names are the point: wrap, never cut
            else:
                table.add_column(column, justify="right", overflow="fold")
        for row in ([fmt(v) for v in record] for record in rows.itertuples(index=False)):
            table.add_row(*(Text(cell) for cell in row))  # Text: policy names hold [brackets]
        console.print(table)
        _warn_identical_repetitions(outcome.tables.get("policies"))
    reused = f" ({outcome.runs_reused} reused from an earlier run)" if outcome.runs_reused else ""
    console.print(f"{outcome.runs_total} runs{reused}; wrote {', '.join(p.name for p in outcome.written)} to {outcome.out}/")
    for note in getattr(outcome, "notes", []):
        print_warning(note)
    if outcome.report_error:
        err_console.print(Text(f"warning: the analysis or report could not be written (a bug, please report it): "
                               f"{outcome.report_error}; the run tables are in {outcome.out}/", style="yellow"))
    warn_failed(outcome.failed)


def print_warning(message: str) -> None:
    """One warning on stderr, as plain text (messages hold [brackets], which are not markup)."""
    err_console.print(Text(f"warning: {message}", style="yellow"))


def _warn_identical_repetitions(policies: Any) -> None:
    """policies.parquet's rows (or a sweep's, with their point) whose repetitions were all alike."""
    if policies is None or "identical_repetitions" not in policies or not policies["identical_repetitions"].any():
        return
    same = policies[policies["identical_repetitions"].astype(bool)]
    points = same["point"] if "point" in same else [None] * len(same)
    named = ", ".join(f"{'' if point is None else f'point {point} '}{policy} ({int(n)})"
                      for point, policy, n in zip(points, same["policy"], same["complete_repetitions"]))
    err_console.print(Text(
        f"warning: the repetitions of {named} gave identical results (a fixed placement and no random traffic, "
        "or a fabric on which every placement is alike), so each is one sample and says nothing of the "
        "variation over placements", style="yellow"))


def warn_failed(rows: list[dict[str, Any]]) -> None:
    """A warning for each run that did not complete (with its sweep point, in a sweep)."""
    for row in rows:
        label = f"{row['alone_job']} alone" if isinstance(row["alone_job"], str) else row["policy"]
        point = f"point {row['point']}, " if "point" in row else ""
        err_console.print(Text(f"warning: {point}run {row['run_id']} ({label}, repetition {row['repetition']}): "
                               f"{row['status']}: {row['error']}", style="yellow"))


def print_sweep(outcome: Any) -> None:
    """Per sweep point and policy: total contention and the change against default."""
    sweep = outcome.tables["sweep"]
    table = Table(title="sweep: per point and policy (mean over repetitions)", title_justify="left")
    columns = ["point", *outcome.keys, "policy", "total_contention_us", "worst_slowdown", "vs_default_pct"]
    columns = [c for c in columns if c in sweep.columns]
    for column in columns:
        table.add_column(column, overflow="fold", justify="left" if column == "policy" else "right")
    for record in sweep[columns].itertuples(index=False):
        table.add_row(*(Text(fmt(v)) for v in record))
    console.print(table)
    _warn_identical_repetitions(sweep)
    gpcnet = outcome.tables.get("sweep_gpcnet")
    if gpcnet is not None and len(gpcnet):
        from qoslab.analysis.gpcnet import impact_by_point

        wide = impact_by_point(gpcnet, outcome.keys)
        cif = Table(title="GPCNeT congestion impact, average / 99% as GPCNeT prints them (> 1: congestion hurts)",
                    title_justify="left")
        for column in wide.columns:
            cif.add_column(str(column), overflow="fold", justify="left" if column in ("test", "policy") else "right")
        for record in wide.itertuples(index=False):
            cif.add_row(*(Text(str(v)) for v in record))
        console.print(cif)
    reused = f" ({outcome.runs_reused} reused from an earlier run)" if outcome.runs_reused else ""
    extra = "sweep_gpcnet.parquet, " if gpcnet is not None and len(gpcnet) else ""
    console.print(f"{len(outcome.tables['sweep_points'])} points, {outcome.runs_total} runs{reused}; wrote sweep.parquet, "
                  f"sweep_slowdown.parquet, {extra}and report.html to {outcome.out}/, each point's results to "
                  f"{outcome.out}/points/point=N/")
    for note in outcome.notes:
        print_warning(note)
    for point, error in outcome.report_errors.items():
        err_console.print(Text(f"warning: point {point}: the analysis or report could not be written (a bug, please "
                               f"report it): {error}", style="yellow"))
    warn_failed(outcome.failed)


def placement_rows(scenario: Scenario) -> list[dict[str, Any]]:
    """Each job's placement: name, workload, nodes, ranks, SL, Dragonfly+ groups or tree leaves
    (where the topology has them) and hosts."""
    groups = scenario.host_groups()
    names = scenario.host_names()
    per_leaf = scenario.hosts_per_leaf() if scenario.topology.kind in ("xgft", "single-switch", "dragonfly-plus") else None
    rows = []
    for job, name, hosts in zip(scenario.jobs, scenario.job_names(), scenario.placements()):
        row: dict[str, Any] = {"job": name, "workload": job.workload.kind, "nodes": len(hosts),
                               "ranks": len(hosts) * job.ranks_per_node, "sl": job.sl}
        if groups is not None:
            row["groups"] = sorted({groups[h] for h in hosts})
        if per_leaf:
            row["leaves"] = len({h // per_leaf for h in hosts})
        row["hosts"] = list(hosts)
        if names is not None:  # an imported fabric: the nodes an administrator knows them by
            row["host_names"] = [names[h] for h in hosts]
        rows.append(row)
    return rows


def _cell(column: str, value: Any) -> str:
    from qoslab.host_lists import compact

    if column in ("groups", "hosts"):
        return compact(value)
    if column == "host_names":  # compacted as a Slurm hostlist where the names allow it
        import hostlist

        try:
            return str(hostlist.collect_hostlist(value))
        except hostlist.BadHostlist:  # a name with ',', '[' or ']' in it: listed as it is
            return ", ".join(value)
    return str(value)


def print_placements(scenario: Scenario) -> None:
    table = Table(title="jobs", title_justify="left")
    rows = placement_rows(scenario)
    columns = [c for c in ("job", "workload", "nodes", "ranks", "sl", "groups", "leaves", "hosts", "host_names")
               if c in rows[0]]
    for column in columns:
        table.add_column({"sl": "SL", "host_names": "host names"}.get(column, column), overflow="fold")
    for row in rows:
        table.add_row(*(_cell(column, row[column]) for column in columns))
    console.print(table)


def print_description(fabric: dict[str, Any]) -> None:
    """Whatever the engine describes: scalars in one table, lists of records as their own tables."""
    scalars = Table(title="fabric", show_header=False, title_justify="left")
    scalars.add_column(style="bold", overflow="fold")
    scalars.add_column(overflow="fold")
    records: list[tuple[str, list[dict[str, Any]]]] = []
    for key, value in fabric.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            records.append((key, value))
        elif isinstance(value, (dict, list)):
            scalars.add_row(key, json.dumps(value))
        else:
            scalars.add_row(key, fmt(value))
    console.print(scalars)
    for key, rows in records:
        columns = list(dict.fromkeys(k for row in rows for k in row))
        table = Table(title=key, title_justify="left")
        for column in columns:
            table.add_column(column, justify="right", overflow="fold")
        for row in rows:
            table.add_row(*(fmt(row.get(c)) for c in columns))
        console.print(table)


def print_buffers(scenario: Scenario) -> None:
    from qoslab.scenario import CREDIT_BYTES

    f = scenario.fabric
    per_vl = f.buffer_per_vl()
    share = f"{per_vl:,} bytes ({per_vl // CREDIT_BYTES} credits) per VL"
    if f.vl_buffer_bytes is None:
        text = f"{f.port_buffer_bytes:,} bytes per port (fabric.port_buffer_bytes), divided among {f.data_vls} data VLs: {share}"
    else:
        text = f"{share} (fabric.vl_buffer_bytes), {per_vl * f.data_vls:,} bytes per port with {f.data_vls} data VLs"
    console.print(Text.assemble(("input buffers: ", "bold"), text))


def print_qos(scenario: Scenario) -> None:
    title = f"QoS ({scenario.fabric.data_vls} data VLs)"
    layers, step = scenario.routing.vls or 1, scenario.qos_vls()
    if layers > 1:
        title += (f": routing uses {layers} VL layers, so QoS has VL0..VL{step - 1} and VL v + {step} "
                  f"carries VL v's traffic on the next layer, with its weight")
    table = Table(title=title, title_justify="left")
    for column in ("ports", "SL2VL (SL0..15)", "VLArb high", "VLArb low", "high_limit"):
        table.add_column(column, overflow="fold")
    for port, label in (("ca", "HCA"), ("swe", "switch")):
        q = scenario.port_qos(cast(Literal["ca", "swe"], port))
        table.add_row(
            label, _sl2vl(q["sl2vl"]), _arb(q["vlarb_high"]), _arb(q["vlarb_low"]), str(q["high_limit"])
        )
    console.print(table)


def print_arbitration(arbitration: dict[str, Any]) -> None:
    """What the VLArb tables give at the MTU: per VL, the weights and the share of a saturated
    port with every VL of the table backlogged (port types with the same tables share rows)."""
    ports = {"ca": "HCA", "swe": "switch"}
    if arbitration["ca"] == arbitration["swe"]:
        groups = [("HCA, switch", arbitration["ca"])]
    else:
        groups = [(label, arbitration[port]) for port, label in ports.items()]
    has_high = any(row["high_weight"] for _, port in groups for row in port["vls"])
    title = (f"VL arbitration at MTU {arbitration['mtu_bytes']} ({arbitration['packet_credits']} credits per packet): "
             f"shares of a saturated port, every VL of the table backlogged")
    table = Table(title=title, title_justify="left")
    columns = ["ports", "VL"] + (["high weight", "high share"] if has_high else []) + [
        "low weight", "packets per round", "low share"]
    for column in columns:
        table.add_column(column, justify="left" if column == "ports" else "right", overflow="fold")
    for label, port in groups:
        for row in port["vls"]:
            cells = [label, str(row["vl"])]
            if has_high:
                cells += [str(row["high_weight"]), _share(row["effective_high_share"], row["high_weight"])]
            cells += [str(row["low_weight"]), str(row["low_packets_per_round"]),
                      _share(row["effective_low_share"], row["low_weight"])]
            table.add_row(*cells)
            label = ""
    console.print(table)
    for label, port in groups:
        if not has_high or not any(row["high_weight"] for row in port["vls"]):
            continue
        per_low = port["high_packets_per_low_packet"]
        if per_low is None:
            text = "the low table waits until the high table is idle (high_limit 255)"
        else:
            text = (f"the high table sends {per_low} packet{'s' if per_low > 1 else ''} per low-table packet when both "
                    f"are backlogged (high_limit {port['high_limit']})")
        console.print(f"{label}: {text}")


def _share(share: float, weight: int) -> str:
    from qoslab.vlarb import percent

    return percent(share) if weight else "-"


def _sl2vl(table: list[int]) -> str:
    # Groups of four so that a narrow terminal wraps between groups, not inside numbers.
    return " ".join(",".join(map(str, table[i : i + 4])) for i in range(0, len(table), 4))


def _arb(entries: list[tuple[int, int]]) -> str:
    return ", ".join(f"{vl}:{weight}" for vl, weight in entries) or "-"


def print_plan(size: dict[str, Any], out: Path) -> None:
    """`qoslab study --plan`: the study's size, once plan.json is written."""
    console.print(f"study [bold]{size['study']}[/bold]: {size['runs']} runs on {size['hosts']} hosts")
    table = Table(title="jobs", title_justify="left")
    for column in ("job", "nodes", "ranks per node", "ranks"):
        table.add_column(column, justify="left" if column == "job" else "right", overflow="fold")
    for name, job in size["jobs"].items():
        table.add_row(name, str(job["nodes"]), str(job["ranks_per_node"]), str(job["ranks"]))
    console.print(table)
    if "alone_runs" in size:
        searches = "".join(f", search {k}: at most {v}" for k, v in size["search_runs"].items())
        points = size.get("sweep_points")
        each = f" in all over {points} sweep points ({size['sweep_mode']} of {', '.join(size['sweep_keys'])}; jobs " \
               "as at the first point)" if points else ""
        console.print(f"{size['repetitions']} repetition(s): {size['alone_runs']} alone runs, "
                      f"{size['shared_runs']} shared runs ({len(size['policies'])} policies){searches}{each}")
    else:
        low, high = size["background_jobs"]
        targets = f" x {len(size['targets'])} targets" if len(size["targets"]) > 1 else ""
        console.print(f"{size['snapshots']} background snapshots{targets} x {len(size['localities'])} localities x "
                      f"{len(size['routings'])} routings ({size['not_placed']} with no room for the measured job); "
                      f"{low} to {high} background jobs per run")
    for warning in size.get("warnings", []):
        err_console.print(Text(f"warning: {warning}", style="yellow"))
    console.print(f"wrote {out}/plan.json (nothing simulated)")


def print_tail_study(outcome: Any, several_targets: bool, out: Path) -> None:
    """`qoslab study` on a tail-latency study: iteration latency per group, the b correlations
    (several targets), the runs that failed, and where the report is."""
    import math

    from qoslab.analysis.tail import compare_groups
    from qoslab.report.tail import BY, with_background_label

    iterations = outcome.tables["tail_iterations"]
    by = ["target", *BY] if several_targets else BY  # one [target]: the table it always printed
    if len(iterations):
        summary = compare_groups(with_background_label(iterations), by=by)
        table = Table(title="iteration latency (ns)", title_justify="left")
        for column in by + ["runs' iterations", "p50", "p99", "p99/p50", "bimodal"]:
            table.add_column(column, overflow="fold")
        for row in summary.to_dict("records"):
            table.add_row(*(str(row[k]) for k in by), f"{row['count']:.0f}", f"{row['p50']:,.0f}", f"{row['p99']:,.0f}",
                          f"{row['p99_over_p50']:.2f}", str(row["bimodal"]))
        console.print(table)
    correlations = outcome.tables.get("tail_correlations")
    if correlations is not None and several_targets and len(correlations):
        table = Table(title="b against each run's median latency", title_justify="left")
        for column in ("target", "locality", "routing", "runs", "Pearson r", "Spearman rho"):
            table.add_column(column, overflow="fold")
        for row in correlations.to_dict("records"):
            table.add_row(row["target"], row["locality"], row["routing"], str(row["runs"]),
                          *("-" if math.isnan(row[k]) else f"{row[k]:.2f}" for k in ("pearson_r", "spearman_rho")))
        console.print(table)
    for row in outcome.failed:
        who = f"{row['target']} " if several_targets else ""
        err_console.print(Text(f"warning: {who}snapshot {row['snapshot']} {row['locality']}/{row['routing'] if isinstance(row['routing'], str) else 'any routing'}: "
                               f"{row['status']}: {row['error']}", style="yellow"))
    for note in getattr(outcome, "notes", []):
        print_warning(note)
    if outcome.report_error:
        err_console.print(Text(f"warning: the report could not be written ({outcome.report_error}); the tables are "
                               f"in {out}/", style="yellow"))
    console.print(f"{outcome.runs_total} runs ({outcome.runs_reused} reused); report: {out}/report.html")


def print_validation(checks: list[Any]) -> None:
    """`qoslab validate`: each check, expected against measured, and whether its threshold is a
    closed form or was set from measurement."""
    table = Table(title="validation against closed forms (and a few bounds set from measurement, marked)")
    for column in ("check", "expected", "measured", "basis", "result"):
        table.add_column(column, overflow="fold")
    for c in checks:
        table.add_row(c.name, f"{c.expected:.4f} {c.unit}", f"{c.measured:.4f} {c.unit}", c.basis,
                      "pass" if c.ok else "[red]FAIL[/red]")
    console.print(table)


def print_counter_comparison(table: Any, out: Path) -> None:
    """`qoslab compare-counters`: per port, measured against simulated, once the files are written."""
    shown = Table(title="per port: measured against simulated", title_justify="left")
    for column in ("node", "port", "lid", "real util", "sim util", "real wait", "sim wait"):
        shown.add_column(column, justify="left" if column == "node" else "right", overflow="fold")
    for r in table.itertuples(index=False):
        shown.add_row(str(r.node), str(r.port), str(r.lid), f"{r.real_utilisation:.3f}", f"{r.simulated_utilisation:.3f}",
                      f"{r.real_wait:.3f}", f"{r.simulated_wait:.3f}")
    console.print(shown)
    console.print(f"wrote {out}/comparison.csv and {out}/comparison.png")
