"""The search for the best policy, Q_opt (Jokanovic et al.): over mappings of jobs to VLs and a
list of weight sets, the candidate with the least objective (total contention by default).

Exhaustive when the space fits the budget; otherwise Optuna's TPE sampler (seeded, so the search
is repeatable), asked for a batch of candidates at a time so the batch runs in parallel. With
equal weights, VLs are interchangeable, so mappings are enumerated up to relabelling.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from qoslab.errors import problem
from qoslab.extras import require
from qoslab.policies.arbitration import (
    DEFAULT_SHARE_TOLERANCE,
    Arbitration,
    Shares,
    ShareTolerance,
)
from qoslab.policies.base import NEEDS_ALONE, Policy, PolicyContext, PolicyError, QosVls, stated
from qoslab.policies.per_job import PerJob
from qoslab.vlarb import Granularity

Candidate = tuple[tuple[int, ...], int]  # (VL of each job, in job order; index of the weight set)
EQUAL_WEIGHT = 64
CANDIDATE_MARK = "/candidate["  # in a candidate's policy name: "q-opt/candidate[a=0 b=1; w=64:64]"


def is_candidate(policy: object) -> bool:
    """Whether a run's policy is a search candidate's: scored, not compared, so one that does not
    complete (a deadlock, the time limit) only loses the search (its objective is inf); it leaves
    the study's comparison whole."""
    return isinstance(policy, str) and CANDIDATE_MARK in policy
MAX_EXHAUSTIVE = 5000


WeightSet = Literal["equal"] | Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1, max_length=15)]


def _equal_only() -> list[WeightSet]:
    return ["equal"]


class Search(Policy):
    kind: Literal["search"]
    name: str | None = "q-opt"
    vls: Annotated[int, Field(ge=1, le=15)] | None = None  # None: every VL QoS may use (QosVls)
    weight_sets: Annotated[list[WeightSet], Field(min_length=1)] = Field(default_factory=_equal_only)
    # Shares of a saturated port to try as well (after the weight sets), realised at the fabric's MTU.
    share_sets: list[Shares] = Field(default_factory=list)
    share_tolerance: ShareTolerance = DEFAULT_SHARE_TOLERANCE
    objective: Literal["total-contention", "worst-slowdown", "mean-slowdown"] = "total-contention"
    budget: Annotated[int, Field(ge=1, le=10000)] = 32  # candidates simulated at most
    # TPE candidates asked for before any is told its result: fixed, so that the search takes the
    # same path whatever the number of workers (who run each batch in parallel).
    batch: Annotated[int, Field(ge=1, le=1000)] = 8
    method: Literal["auto", "exhaustive", "tpe"] = "auto"
    seed: Annotated[int, Field(ge=0)] = 0

    needs = frozenset({NEEDS_ALONE})

    @model_validator(mode="after")
    def _weight_lengths(self) -> Search:
        if self.share_sets and "weight_sets" not in self.model_fields_set:
            self.weight_sets = []  # only the shares given: the default "equal" set is not wanted
        lengths = {len(w) for w in self.weight_sets if w != "equal"} | {len(s) for s in self.share_sets}
        if len(lengths) > 1 or (self.vls is not None and lengths and lengths != {self.vls}):
            want = f"{self.vls}" if self.vls is not None else "the same number of"
            raise problem(f"every weight and share set needs {want} values (one per VL), got lengths {sorted(lengths)}",
                          "share_sets" if self.share_sets else "weight_sets")
        for i, shares in enumerate(self.share_sets):
            try:
                Arbitration(shares=list(shares), share_tolerance=self.share_tolerance)
            except ValueError as error:  # a pydantic error: re-raised under this set's key
                raise problem(_message(error), f"share_sets[{i}]") from None
        return self

    def describe(self, granularity: Granularity | None = None) -> str:
        how = {"auto": f"exhaustive if the space has at most {self.budget} candidates, else Optuna TPE on {self.budget}",
               "exhaustive": "exhaustive: every candidate of the space",
               "tpe": f"Optuna TPE, at most {self.budget} candidates"}[self.method]
        return f"best job-to-VL mapping and weights by {self.objective} ({how})"

    def exhaustive(self, size: int) -> bool:
        """Whether a space of `size` candidates is enumerated (else TPE samples `budget` of it)."""
        return self.method == "exhaustive" or (self.method == "auto" and size <= self.budget)

    def simulated(self, size: int) -> str:
        """How many of a space of `size` candidates are simulated, for the study's description."""
        if self.exhaustive(size):
            return f"the space has {size} candidates, all simulated"
        return f"the space has {size} candidates, at most {self.budget} simulated (TPE)"

    def count(self, qos_vls: int) -> int:
        explicit = [w for w in self.weight_sets if w != "equal"] + list(self.share_sets)
        return len(explicit[0]) if explicit else (self.vls or qos_vls)

    def set_count(self) -> int:
        return len(self.weight_sets) + len(self.share_sets)

    def stated(self, index: int, qos_vls: int) -> dict[str, Any]:
        """Set `index` (weight sets first, then share sets) as PerJob keys."""
        if index >= len(self.weight_sets):
            return {"shares": list(self.share_sets[index - len(self.weight_sets)]), "share_tolerance": self.share_tolerance}
        chosen = self.weight_sets[index]
        return {"weights": [EQUAL_WEIGHT] * self.count(qos_vls) if chosen == "equal" else list(chosen)}

    def set_key(self, index: int) -> str:
        if index >= len(self.weight_sets):
            return f"share_sets[{index - len(self.weight_sets)}]"
        return f"weight_sets[{index}]"

    def symmetric(self, index: int, qos_vls: int) -> bool:
        """Equal weights (or shares): the VLs are interchangeable."""
        values = self.stated(index, qos_vls)
        return len(set(values.get("weights") or values["shares"])) == 1

    def arbitrations(self, qos_vls: int) -> list[tuple[str, Arbitration]]:
        return [(self.set_key(i), PerJob(kind="per-job", assignment={}, **self.stated(i, qos_vls)).arbitration())
                for i in range(self.set_count())]

    def check(self, jobs: list[str], ranks: dict[str, int], vls: QosVls) -> None:
        qos_vls = vls.count
        n = self.count(qos_vls)
        if n > qos_vls:
            explicit_weights = any(w != "equal" for w in self.weight_sets)
            key = "vls" if self.vls is not None else "weight_sets" if explicit_weights else "share_sets"
            raise PolicyError(key, f"{n} VLs, but {vls.why()}")
        for i in range(self.set_count()):
            PerJob(kind="per-job", assignment={}, **self.stated(i, qos_vls))  # expressible?
        size = self.space_size(len(jobs), qos_vls)
        if self.method == "exhaustive" and size > MAX_EXHAUSTIVE:
            raise PolicyError(
                "method", f"the space has {size} candidates; exhaustive search is limited to {MAX_EXHAUSTIVE} (use "
                "\"tpe\" with a budget)"
            )
        if self.method == "exhaustive" and "budget" in self.model_fields_set and size > self.budget:
            # An exhaustive search simulates the whole space; a budget it would not keep is refused.
            raise PolicyError(
                "budget", f"{self.budget}, but method = \"exhaustive\" simulates every candidate of the space, "
                f"{size} here: raise budget to {size} (or leave it out), or use method \"tpe\" to simulate "
                f"{self.budget} of them"
            )

    def space_size(self, jobs: int, qos_vls: int) -> int:
        n = self.count(qos_vls)
        total = 0
        for i in range(self.set_count()):
            if self.symmetric(i, qos_vls):
                total += sum(_stirling2(jobs, k) for k in range(1, min(n, jobs) + 1))
            else:
                total += n**jobs
        return total

    def space(self, jobs: int, qos_vls: int) -> list[Candidate]:
        n = self.count(qos_vls)
        out: list[Candidate] = []
        for i in range(self.set_count()):
            symmetric = self.symmetric(i, qos_vls)
            mappings = _partitions(jobs, n) if symmetric else itertools.product(range(n), repeat=jobs)
            out.extend((tuple(m), i) for m in mappings)
        return out

    def candidate(self, mapping: Candidate, jobs: list[str], qos_vls: int) -> PerJob:
        vls, set_index = mapping
        values = self.stated(set_index, qos_vls)
        assignment = dict(zip(jobs, vls))
        listed = " ".join(f"{j}={v}" for j, v in assignment.items())
        shown = stated(values.get("weights"), values.get("shares"))
        return PerJob(
            kind="per-job",
            assignment=assignment,
            name=f"{self.label()}{CANDIDATE_MARK}{listed}; {'w=' if 'weights' in values else ''}{shown}]",
            data_vls=self.data_vls,  # candidates run on the VLs the search operates
            **values,
        )

    def optimise(
        self,
        jobs: list[str],
        qos_vls: int,
        batch: int,
        evaluate: Callable[[Sequence[PerJob]], list[float]],
    ) -> list[tuple[PerJob, float]]:
        """Evaluates candidates (`evaluate` simulates a batch and returns their objectives, lower
        is better, inf for a failed one) and returns every (candidate, objective), best first."""
        if self.exhaustive(self.space_size(len(jobs), qos_vls)):
            space = self.space(len(jobs), qos_vls)
            policies = [self.candidate(c, jobs, qos_vls) for c in space]
            scores = evaluate(policies)
            results = list(zip(policies, scores))
        else:
            results = self._tpe(jobs, qos_vls, batch, evaluate)
        return sorted(results, key=lambda r: (r[1], r[0].label()))

    def _tpe(self, jobs: list[str], qos_vls: int, batch: int, evaluate: Callable[[Sequence[PerJob]], list[float]]) -> list[tuple[PerJob, float]]:
        optuna = require("optuna", "the policy search's TPE sampler (method \"tpe\", or \"auto\" beyond the budget)")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        n = self.count(qos_vls)
        study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=self.seed))
        seen: dict[Candidate, tuple[PerJob, float]] = {}
        asked = 0
        while len(seen) < self.budget and asked < self.budget * 4:
            trials = []
            for _ in range(max(1, min(batch, self.budget - len(seen)))):
                trial = study.ask()
                vls = tuple(trial.suggest_int(f"vl[{job}]", 0, n - 1) for job in jobs)
                weights = trial.suggest_int("weight_set", 0, self.set_count() - 1)
                trials.append((trial, (vls, weights)))
                asked += 1
            fresh = list(dict.fromkeys(c for _, c in trials if c not in seen))
            policies = [self.candidate(c, jobs, qos_vls) for c in fresh]
            for c, policy, score in zip(fresh, policies, evaluate(policies) if policies else []):
                seen[c] = (policy, score)
            for trial, c in trials:
                score = seen[c][1]
                study.tell(trial, score if math.isfinite(score) else None,
                           state=None if math.isfinite(score) else optuna.trial.TrialState.FAIL)
        return list(seen.values())

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        raise PolicyError("", "a search is run by the study runner, not applied directly")


def _message(error: ValueError) -> str:
    """The readable part of a pydantic error raised by a nested model."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        first = errors(include_url=False)[0]
        return str((first.get("ctx") or {}).get("message") or first["msg"])
    return str(error)


def _stirling2(n: int, k: int) -> int:
    return sum((-1) ** i * math.comb(k, i) * (k - i) ** n for i in range(k + 1)) // math.factorial(k)


def _partitions(jobs: int, labels: int) -> list[tuple[int, ...]]:
    """Assignments of `jobs` items to at most `labels` interchangeable labels, one per partition
    (restricted growth strings: each item takes a used label or the next new one)."""
    out: list[tuple[int, ...]] = []

    def grow(prefix: list[int], used: int) -> None:
        if len(prefix) == jobs:
            out.append(tuple(prefix))
            return
        for label in range(min(used + 1, labels)):
            grow(prefix + [label], max(used, label + 1))

    grow([], 0)
    return out
