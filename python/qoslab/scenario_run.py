"""The scenario's ``[[traffic]]`` and ``[run]`` tables: open-loop traffic sources (pattern, hosts,
load, message size, SL, arrivals) and the run's length and optional outputs, whose defaults
depend on whether the scenario has jobs (``Run.resolve``, which the Scenario calls).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from qoslab.errors import problem, show
from qoslab.host_lists import Hosts
from qoslab.host_lists import is_int as _is_int
from qoslab.scenario_files import _Table

# ----------------------------------------------------------------------------------------------
# [[traffic]]

def _parse_load(value: Any) -> float | str:
    if value == "saturate":
        return value
    if (_is_int(value) or isinstance(value, float)) and 0 < value <= 1:
        return float(value)
    raise problem(f'expected a fraction in (0, 1] of link_gbps or "saturate", got {show(value)}')


Load = Annotated[float | Literal["saturate"], BeforeValidator(_parse_load)]


class Traffic(_Table):
    pattern: Literal["uniform", "permutation", "shift", "hotspot", "incast"] = "uniform"
    hosts: Hosts = "all"
    destinations: Hosts = "all"
    load: Load  # no default: a source without a rate is an oversight
    message_bytes: Annotated[int, Field(ge=1, lt=2**64)] = 4096
    sl: Annotated[int, Field(ge=0, le=15)] = 0
    arrival: Literal["poisson", "periodic"] = "poisson"
    shift: int | None = None  # None: half the number of destinations
    hotspot_hosts: list[Annotated[int, Field(ge=0)]] = Field(default_factory=lambda: [0])
    hotspot_fraction: Annotated[float, Field(ge=0, le=1)] = 0.5
    saturate_depth: Annotated[int, Field(ge=1, lt=2**32)] = 2
    max_queued_messages: Annotated[int, Field(ge=1, lt=2**32)] = 64

    @field_validator("hotspot_hosts")
    @classmethod
    def _distinct_hotspots(cls, hosts: list[int]) -> list[int]:
        # A host listed twice would silently take twice its share of the hotspot traffic.
        seen: set[int] = set()
        for host in hosts:
            if host in seen:
                raise ValueError(f"host {host} listed twice")
            seen.add(host)
        return hosts

    def unread_keys(self) -> list[tuple[str, str, str]]:
        """(key, what this table has, what would read the key) for each key set here to other than
        its default that the table's pattern or load never reads (a `shift` on a uniform pattern).
        `shift` is left to the Scenario, whose default depends on the destinations' count."""
        saturating = self.load == "saturate"
        pattern = f'pattern = "{self.pattern}"'
        load = 'load = "saturate"' if saturating else f"load = {self.load:g}"
        readers = {  # key: (read here, what this table has, what would read it)
            "hotspot_hosts": (self.pattern == "hotspot", pattern, 'pattern = "hotspot"'),
            "hotspot_fraction": (self.pattern == "hotspot", pattern, 'pattern = "hotspot"'),
            "saturate_depth": (saturating, load, 'load = "saturate"'),
            "max_queued_messages": (not saturating, load, "a fractional load"),
            "arrival": (not saturating, load, "a fractional load"),
        }
        return [(key, has, reader) for key, (read, has, reader) in readers.items()
                if not read and key in self.model_fields_set
                and getattr(self, key) != type(self).model_fields[key].get_default(call_default_factory=True)]


# ----------------------------------------------------------------------------------------------
# [run]


# Without jobs the run lasts duration_us; with jobs it ends when every job has completed once,
# and duration_us is only the limit (1 simulated second unless given).
OPEN_LOOP_DURATION_US = 500.0
OPEN_LOOP_WARMUP_US = 50.0
JOBS_TIME_LIMIT_US = 1_000_000.0


class Run(_Table):
    # None: resolved by the Scenario, which knows whether there are jobs (see above).
    duration_us: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    warmup_us: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    messages: bool = False  # write messages.parquet (one row per message)
    interference: bool = False  # charge waits at output ports to who caused them (interference.parquet)
    port_counters: bool = False  # perfquery's counters per port (port_counters.parquet and .txt)
    cc_trace: bool = False  # congestion control's CCTI changes and FECN marks (ccti.parquet, cc_marks.parquet)

    def resolve(self, with_jobs: bool) -> None:
        """Fills the defaults that depend on whether there are jobs, without marking them set."""
        if self.duration_us is None:
            self.__dict__["duration_us"] = JOBS_TIME_LIMIT_US if with_jobs else OPEN_LOOP_DURATION_US
        if self.warmup_us is None:
            self.__dict__["warmup_us"] = 0.0 if with_jobs else OPEN_LOOP_WARMUP_US

    def resolved(self) -> tuple[float, float]:
        """(duration_us, warmup_us), which `resolve` has filled once the scenario is valid."""
        assert self.duration_us is not None and self.warmup_us is not None
        return self.duration_us, self.warmup_us

    def check(self) -> None:
        duration_us, warmup_us = self.resolved()
        if warmup_us >= duration_us:
            # Say which side is a default: a user who set only duration_us never wrote warmup_us.
            warmup = f"{self.warmup_us:g}" + ("" if "warmup_us" in self.model_fields_set else
                                             " (the default for open-loop traffic; set run.warmup_us)")
            duration = f"{self.duration_us:g}" + ("" if "duration_us" in self.model_fields_set else ", the default")
            raise problem(f"expected less than run.duration_us ({duration}), got {warmup}", "run.warmup_us")
