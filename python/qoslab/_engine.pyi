"""The compiled engine (crates/qoslab-py): what qoslab.simulate calls. Configs are JSON strings
(Scenario.to_engine_config); tables come back as {name: (numpy dtype, little-endian bytes)}."""

from collections.abc import Callable
from typing import Any

class ConfigError(ValueError):
    """A scenario the engine cannot build; names the key."""

class EngineError(RuntimeError):
    """A broken invariant inside the engine (a bug)."""

__all__ = ["run", "validate", "describe", "fabric", "bench_event_queue", "write_parquet", "version", "ConfigError",
           "EngineError"]

_Traces = dict[int, tuple[bytes, ...]]

def run(
    config_json: str, traces: _Traces | None = None, progress: Callable[[float, float, int], object] | None = None
) -> dict[str, Any]: ...
def validate(config_json: str) -> None: ...
def describe(config_json: str, traces: _Traces | None = None) -> dict[str, Any]: ...
def fabric(topology_json: str, routing_json: str | None = None) -> dict[str, Any]: ...
def bench_event_queue(pending: int, operations: int, seed: int = 1) -> dict[str, Any]: ...
def write_parquet(path: str, columns: list[tuple[str, str, str, bytes, Any]]) -> None: ...
def version() -> str: ...
