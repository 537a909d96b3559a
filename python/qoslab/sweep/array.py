"""Job-array mode for very large studies: each task of a Slurm job array runs its share of the
runs straight into the study's run store (study/stages.py `task_of` splits them), and
`qoslab study ... --collect` builds the tables afterwards. No scheduler process stays up."""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qoslab.sweep.executors import walltime_seconds


def parse_array_task(text: str, env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(index, count) from "I/N" (0 <= I < N) or "slurm" (the array task Slurm started)."""
    env = os.environ if env is None else env
    if text == "slurm":
        try:
            task_id, low = int(env["SLURM_ARRAY_TASK_ID"]), int(env.get("SLURM_ARRAY_TASK_MIN", "0"))
            count = int(env.get("SLURM_ARRAY_TASK_COUNT") or int(env["SLURM_ARRAY_TASK_MAX"]) - low + 1)
        except (KeyError, ValueError):
            raise ValueError("--array-task slurm: not inside a Slurm array task (SLURM_ARRAY_TASK_ID and "
                             "SLURM_ARRAY_TASK_COUNT or SLURM_ARRAY_TASK_MAX are not set)") from None
        index = task_id - low
    else:
        index_text, _, count_text = text.partition("/")
        try:
            index, count = int(index_text), int(count_text)
        except ValueError:
            raise ValueError(f"--array-task: expected I/N (task I of N, from 0) or 'slurm', got {text!r}") from None
    if not 0 <= index < count:
        raise ValueError(f"--array-task: expected 0 <= I < N, got task {index} of {count}")
    return index, count


# sbatch's --mem: a whole number, in megabytes unless a unit follows (K, M, G or T).
_SLURM_MEMORY = re.compile(r"^\d+([KMGT]B?)?$", re.IGNORECASE)

SBATCH_OPTIONS = (("queue", "--partition"), ("account", "--account"), ("walltime", "--time"), ("memory", "--mem"))


def _sbatch_word(value: str, what: str) -> str:
    """`value` for an `#SBATCH --flag=value` line: sbatch splits those at white space, and a line
    break would start a line of the script (a command)."""
    if not value or any(ch.isspace() or not ch.isprintable() for ch in value):
        raise ValueError(f"{what} {value!r}: an #SBATCH option of the array script: expected one word, without "
                         "white space or control characters")
    return value


def array_script(study_file: Path | None, out: Path, tasks: int, slurm: dict[str, Any]) -> str:
    """An sbatch script for a job array of `tasks` tasks running `study_file` into `out`, each
    on `cores` cores (one run per core). Raises ValueError for a value the script cannot carry."""
    cores = int(slurm.get("cores", 1))
    logs = _sbatch_word(str(out.resolve() / "array-logs" / "%A_%a.out"), "--out")
    if study_file is not None and not str(study_file.resolve()).isprintable():
        raise ValueError(f"{str(study_file)!r}: the study file's path has control characters, which the array "
                         "script cannot carry")
    lines = ["#!/bin/bash", "#SBATCH --job-name=qoslab-study", f"#SBATCH --array=0-{tasks - 1}",
             "#SBATCH --ntasks=1", f"#SBATCH --cpus-per-task={cores}", f"#SBATCH --output={logs}"]
    lines += [f"#SBATCH {flag}={_sbatch_word(str(slurm[key]), '--partition' if key == 'queue' else '--' + key)}"
              for key, flag in SBATCH_OPTIONS if slurm.get(key) is not None]
    # Checked here, as the Slurm executor checks them, rather than by sbatch when the array is submitted.
    if slurm.get("walltime") is not None:
        try:
            walltime_seconds(str(slurm["walltime"]))
        except ValueError as error:
            raise ValueError(f"--walltime {slurm['walltime']!r}: an #SBATCH --time of the array script: {error}") from None
    if slurm.get("memory") is not None and not _SLURM_MEMORY.match(str(slurm["memory"])):
        raise ValueError(f"--memory {slurm['memory']!r}: an #SBATCH --mem of the array script: expected a Slurm "
                         "memory size (a whole number, with K, M, G or T; megabytes without)")
    command = [sys.executable, "-m", "qoslab.cli", "study"]
    command += [str(study_file.resolve())] if study_file is not None else []
    command += ["--out", str(out.resolve()), "--array-task", "slurm", "--workers", str(cores)]
    lines += ["", "# Each task runs its share of every stage and skips runs already stored; a task that finds",
              "# a stage waiting for other tasks' runs ends at once (run the array again for such stages).",
              "# Afterwards: " + shlex.join([*command[:-6], "--out", str(out.resolve()), "--collect"]),
              shlex.join(command), ""]
    return "\n".join(lines)
