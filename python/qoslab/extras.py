"""Optional dependencies: which `pip install 'qoslab[...]'` extra provides each, and the error
that names it. The core install (run, check, validate, local studies, export/import, report)
needs none of them; a feature that does imports its package through `require`."""

from __future__ import annotations

import importlib
from types import ModuleType

# Module -> the extra that installs it (pyproject.toml's [project.optional-dependencies]).
EXTRA_OF = {
    "distributed": "dask",
    "dask_jobqueue": "slurm",
    "cryptography": "slurm",  # the temporary TLS credentials of the Slurm workers
    "optuna": "search",
    "otf2": "traces",
    "scipy": "tail",
}


class MissingExtra(ImportError):
    """A feature whose optional dependency is not installed; the message says what to install."""


def require(module: str, feature: str) -> ModuleType:
    """`module` imported, or MissingExtra naming `feature` and the extra that provides it."""
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError as error:
        if error.name is not None and error.name.split(".")[0] != top:
            raise  # the package is there but one of its own imports failed: not a missing extra
        extra = EXTRA_OF[top]
        raise MissingExtra(f"{feature} needs the optional package '{top}', which is not installed: "
                           f"pip install 'qoslab[{extra}]' (or 'qoslab[all]')") from None
