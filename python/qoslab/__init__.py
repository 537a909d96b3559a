"""qoslab: packet-level InfiniBand fabric simulation with real QoS semantics."""

from typing import TYPE_CHECKING, Any

from qoslab._version import __version__
from qoslab.errors import ConfigError, Deadlock, EngineError, Interrupted, ScenarioError
from qoslab.scenario import Scenario
from qoslab.simulate import RunResult, describe, simulate

if TYPE_CHECKING:  # what type checkers see of the names loaded on first use (below)
    from qoslab.study import load_study
    from qoslab.study.model import Study
    from qoslab.study.tail_model import TailStudy

__all__ = [
    "ConfigError",
    "Study",
    "TailStudy",
    "load_study",
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


def __getattr__(name: str) -> Any:
    """The study API loads on first use: `qoslab run` does not pay for the study models."""
    if name in ("Study", "TailStudy", "load_study"):
        from qoslab.study import load_study
        from qoslab.study.model import Study
        from qoslab.study.tail_model import TailStudy

        return {"Study": Study, "TailStudy": TailStudy, "load_study": load_study}[name]
    raise AttributeError(f"module 'qoslab' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The lazily loaded names too, for tab completion.
    return sorted(set(globals()) | set(__all__))
