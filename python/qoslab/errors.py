"""User-facing errors: a bad scenario is reported by file, key path and what was expected."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

try:  # the compiled engine is optional at import time (scenario validation needs no engine)
    from qoslab._engine import ConfigError, EngineError
except ImportError:  # pragma: no cover - depends on whether the engine is built

    class ConfigError(ValueError):  # type: ignore[no-redef]
        """Stands in for the engine's ConfigError until the engine is built."""

    class EngineError(RuntimeError):  # type: ignore[no-redef]
        """Stands in for the engine's EngineError until the engine is built."""


__all__ = [
    "ConfigError",
    "DamagedRun",
    "Deadlock",
    "EngineError",
    "FolderError",
    "Interrupted",
    "ScenarioError",
    "from_engine_config_error",
    "from_validation_error",
    "problem",
]


class ScenarioError(ValueError):
    """A scenario that cannot be run; one ``(key, message)`` problem per line."""

    def __init__(self, problems: Sequence[tuple[str, str]], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"{self.source}: " if self.source else ""
        lines = [f"{where}{key}: {message}" if key else f"{where}{message}" for key, message in self.problems]
        return "\n".join(lines)

    def with_source(self, source: str | None) -> ScenarioError:
        return ScenarioError(self.problems, source)

    # Pickled whole (a worker process's error reaches its caller as the same error): exceptions
    # pickle their str() args by default, which this __init__ does not take.
    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.problems, self.source)


class FileLineError(ValueError):
    """A file qoslab cannot use, by file and line (0: the file as a whole)."""

    def __init__(self, source: str, line: int, message: str):
        self.source, self.line, self.message = source, line, message
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.source, self.line, self.message)


class FolderError(ValueError):
    """An --out folder a study may not write to, and why (sweep/folder.py)."""


class DamagedRun(ValueError):
    """A stored run folder that cannot be read (edited, truncated, half-copied), named."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped (Ctrl-C); ``result`` holds what was measured until then. A
    KeyboardInterrupt, as the Ctrl-C it stands for: the engine takes the signal, and whatever
    stops on Ctrl-C (a study between its runs, `qoslab validate`) stops on this, where an
    ``except Exception`` had taken it for one failed run and gone on."""

    def __init__(self, result: Any):
        self.result = result
        super().__init__("run interrupted; partial results are in .result")


class Deadlock(Exception):
    """The jobs can never finish (receives no send will match); ``result`` holds the partial
    result and the message names the blocked ranks."""

    def __init__(self, result: Any, message: str):
        self.result = result
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.result, str(self))


def problem(message: str, key: str = "") -> PydanticCustomError:
    """An error raised inside a validator. ``key`` is appended to the validator's location, so a
    model-level check can still name the exact field (``"vl_buffer_bytes"``, ``"traffic[2].hosts"``)."""
    # The message travels in the context, not the template, so braces in it are safe.
    return PydanticCustomError("qoslab", "{message}", {"message": message, "key": key})


def key_path(loc: Iterable[Any]) -> str:
    """('traffic', 0, 'load') -> 'traffic[0].load'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith("["):
            out += part
        else:
            out += f".{part}" if out else part
    return out


def show(value: Any, limit: int = 60) -> str:
    """A value as the user wrote it (TOML-ish: strings quoted, true/false)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_TYPE_WORDS = {
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "tuple_type": "a list",
    "finite_number": "a finite number",
}


def _describe(err: dict[str, Any], allowed: list[str] | None) -> tuple[str, str]:
    """One pydantic error -> (key path, readable message)."""
    kind = err["type"]
    loc = list(err["loc"])
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if kind == "qoslab":
        sub = ctx.get("key", "")
        key = key_path(loc)
        if sub:
            key = f"{key}{sub}" if sub.startswith("[") or not key else f"{key}.{sub}"
        return key, ctx["message"]
    key = key_path(loc)
    if kind == "extra_forbidden":
        hint = f" (expected one of: {', '.join(allowed)})" if allowed else ""
        return key, f"unknown key{hint}"
    if kind == "missing":
        return key, "required key is missing"
    if kind == "union_tag_not_found":
        return f"{key}.kind" if key else "kind", "required key is missing"
    if kind == "union_tag_invalid":
        return f"{key}.kind" if key else "kind", f"expected one of {ctx['expected_tags']}, got {show(ctx['tag'])}"
    if kind in _TYPE_WORDS:
        return key, f"expected {_TYPE_WORDS[kind]}, got {show(value)}"
    if kind == "too_short":
        least = ctx.get("min_length", 1)
        return key, f"expected at least {least} {'entry' if least == 1 else 'entries'}, got {show(value)}"
    message = err["msg"]
    message = message.replace("Input should be", "expected").replace("Value error, ", "")
    if isinstance(value, dict):
        message += ", got a table"
    elif value is not None:
        message += f", got {show(value)}"
    return key, message


_UNION_BRANCH = re.compile(r"^(dict|list|set|frozenset|tuple|literal|nullable|union|tagged-union|chain|model|"
                           r"lax-or-strict|json-or-python|is-instance|definition-ref|function-[a-z]+)\[")


def from_validation_error(
    error: ValidationError,
    source: str | None = None,
    *,
    skip_loc: Iterable[tuple[str, str]] = (),
    allowed: Callable[[tuple[Any, ...]], list[str] | None] | None = None,
) -> ScenarioError:
    """Converts pydantic's report into a ScenarioError, one line per problem.

    ``skip_loc`` lists (parent, element) pairs to drop from locations: pydantic puts the tag of a
    discriminated union into the path (``topology.xgft.m``), which is not a key the user wrote.
    ``allowed`` gives a table's keys from its location as pydantic reports it, for "unknown key" hints.
    """
    skips = set(skip_loc)
    described: list[tuple[tuple[Any, ...], int | None, tuple[str, str]]] = []
    for err in error.errors(include_url=False):
        loc = list(err["loc"])
        keys = allowed(tuple(loc[:-1])) if allowed and err["type"] == "extra_forbidden" else None
        cleaned: list[Any] = []
        branch_at = None  # where a plain union's branch was named, as the cleaned path's length
        for part in loc:
            if cleaned and (str(cleaned[-1]), str(part)) in skips:
                continue
            # ("[]", tag): a union tag inside a list of tables (policies[0].per-rank.fraction)
            if cleaned and isinstance(cleaned[-1], int) and ("[]", str(part)) in skips:
                continue
            # A plain union names the branch it tried (`dict[str,constrained-int]`, `literal['all']`):
            # a type, not a key the user wrote (a quoted key such as a job named "a[1]" may hold a
            # bracket, but not after one of pydantic's type names).
            if isinstance(part, str) and _UNION_BRANCH.match(part):
                branch_at = len(cleaned)
                continue
            cleaned.append(part)
        details: dict[str, Any] = {**err, "loc": tuple(cleaned)}
        described.append((tuple(cleaned), branch_at, _describe(details, keys)))
    # Of a union's branches, the one the value's shape fitted failed inside it (a key of the table):
    # the others only say the value is not their type ("expected 'all', got a table"), which misleads.
    fitted = {path[:at] for path, at, _ in described if at is not None and len(path) > at}
    problems: list[tuple[str, str]] = []
    for path, at, entry in described:
        if at is not None and len(path) == at and path in fitted:
            continue
        if entry not in problems:
            problems.append(entry)
    return ScenarioError(problems, source)


def from_engine_config_error(error: Exception, source: str | None = None) -> ScenarioError:
    """The engine's ConfigError reads "key: message" (and may carry .key/.message)."""
    key = getattr(error, "key", None)
    message = getattr(error, "message", None)
    if key is None or message is None:
        text = str(error)
        key, sep, message = text.partition(": ")
        if not sep:
            key, message = "", text
    return ScenarioError([(key, message)], source)
