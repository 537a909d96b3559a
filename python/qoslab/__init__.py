"""qoslab: packet-level InfiniBand fabric simulation with real QoS semantics."""

from qoslab._version import __version__
from qoslab.errors import ConfigError, Deadlock, EngineError, Interrupted, ScenarioError
from qoslab.scenario import Scenario
from qoslab.simulate import RunResult, describe, simulate

__all__ = [
    "ConfigError",
    "Deadlock",
    "EngineError",
    "Interrupted",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "__version__",
    "describe",
    "simulate",
]
