"""Reading scenario files: the TOML itself (every failure a ScenarioError naming the file and
line), relative paths read from the file's folder, the strict table every scenario model derives
from, and ``--set KEY=VALUE`` overrides applied to the keys before they are validated. Shared by
scenario.py and its table modules; the underscored names are theirs, not a public interface.
"""

from __future__ import annotations

import contextlib
import re
import sys
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from qoslab.errors import ScenarioError

# Relative paths in a scenario (fabric files, routing dumps) are read from the scenario file's
# folder; this holds that folder while a file is validated.
_BASE_DIR: ContextVar[Path | None] = ContextVar("qoslab_scenario_dir", default=None)


@contextlib.contextmanager
def _relative_to(source: str | None):
    token = _BASE_DIR.set(Path(source).parent if source else None)
    try:
        yield
    finally:
        _BASE_DIR.reset(token)


def _resolve_path(value: str) -> Path:
    path = Path(value).expanduser()
    base = _BASE_DIR.get()
    return path if path.is_absolute() or base is None else base / path


class _Table(BaseModel):
    # strict: a TOML file has real types; "8" for an integer is a mistake, not a convenience.
    # frozen: a scenario is checked, and its jobs placed, when it is made; a key changed afterwards
    # would run unchecked (s.seed = 2 kept the placements of seed 1).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):
            raise AttributeError(f"{type(self).__name__}.{name}: a scenario's keys are read-only once it is checked "
                                 f"(its jobs are placed then); make a changed copy with "
                                 f"scenario.with_overrides([\"{name}=...\"]) (the key's full path)")
        super().__setattr__(name, value)


# Scenario and study files are a few KB; traces, dumps and host lists are read by their own readers.
MAX_TOML_BYTES = 64 << 20


def read_toml(path: str | Path) -> dict[str, Any]:
    """Reads a TOML file; every failure is a ScenarioError naming the file (and line)."""
    source = str(path)
    try:
        with Path(path).open("rb") as file:  # at most the cap: a device or a huge file is not read whole
            data = file.read(MAX_TOML_BYTES + 1)
        if len(data) > MAX_TOML_BYTES:
            raise ScenarioError([("", f"larger than {MAX_TOML_BYTES >> 20} MiB: not a scenario or study file")], source)
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ScenarioError([("", "file not found")], source) from None
    except IsADirectoryError:
        raise ScenarioError([("", "is a directory, expected a TOML file")], source) from None
    except UnicodeDecodeError:
        raise ScenarioError([("", "not a text file (expected UTF-8 TOML)")], source) from None
    except OSError as error:
        raise ScenarioError([("", f"cannot read: {error.strerror or error}")], source) from None
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ScenarioError([("", "TOML nested too deeply to read")], source) from None
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        match = re.match(r"^(.*) \(at line (\d+), column (\d+)\)$", message)
        if match:
            where = f"line {match[2]}, column {match[3]}"
            raise ScenarioError([(where, f"TOML syntax error: {match[1]}")], source) from None
        raise ScenarioError([("", f"TOML syntax error: {message}")], source) from None
    except ValueError:  # Python's own limit on integer digits, said plainly
        message = f"a number of more than {sys.get_int_max_str_digits()} digits: too long to read"
        raise ScenarioError([("", message)], source) from None


def _parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except ValueError:  # not TOML (a bare word), or an integer beyond Python's 4300 digits: text
        return raw


_KEY_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*|\d+)((?:\[\d+\])*)$")


def _key_steps(key: str) -> list[str | int] | None:
    """"traffic[0].load" (or "traffic.0.load") -> ["traffic", 0, "load"]; None if malformed."""
    steps: list[str | int] = []
    for part in key.split("."):
        match = _KEY_PART.match(part.strip())
        if not match:
            return None
        name = match[1]
        steps.append(int(name) if name.isdigit() else name)
        steps.extend(int(i) for i in re.findall(r"\[(\d+)\]", match[2]))
    return steps


def _assign(data: dict[str, Any], key: str, value: Any, source: str | None, origin: str = "--set") -> None:
    """Sets data[key path] = value, creating tables on the way; lists must already hold the index.
    Errors name `origin` (the option or study key the path came from) and the path."""
    steps = _key_steps(key)

    def fail(message: str) -> ScenarioError:
        return ScenarioError([(f"{origin} {key}", message)], source)

    if not steps or isinstance(steps[0], int):
        raise fail('expected a key path like "fabric.data_vls" or "traffic[0].load"')
    node: Any = data
    for depth, step in enumerate(steps):
        last = depth == len(steps) - 1
        if isinstance(step, int):
            if not isinstance(node, list):
                raise fail(f"{_path(steps[:depth])} is not a list")
            if step >= len(node):
                raise fail(f"{_path(steps[:depth])} has {len(node)} entries, no index {step}")
        elif not isinstance(node, dict):
            raise fail(f"{_path(steps[:depth])} is a value, not a table")
        if last:
            node[step] = value
        else:
            if isinstance(node, dict) and step not in node:
                node[step] = [] if isinstance(steps[depth + 1], int) else {}
            node = node[step]


def _path(steps: list[str | int]) -> str:
    out = ""
    for step in steps:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


def _same_key(problem_key: str, overridden: list[str]) -> bool:
    normal = _path(_key_steps(problem_key) or [])
    return any(normal == _path(_key_steps(k) or []) for k in overridden)
