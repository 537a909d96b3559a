"""The search for the best policy, Q_opt (Jokanovic et al.): over mappings of jobs to VLs and a
list of weight sets, the candidate with the least objective (total contention by default).

Exhaustive when the space fits the budget; otherwise Optuna's TPE sampler (seeded, so the search
is repeatable), asked for a batch of candidates at a time so the batch runs in parallel. With
equal weights, VLs are interchangeable, so mappings are enumerated up to relabelling.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Any, Callable, Literal, Sequence

from pydantic import Field, model_validator

from qoslab.errors import problem
from qoslab.policies.base import NEEDS_ALONE, Policy, PolicyContext, PolicyError
from qoslab.policies.per_job import PerJob

Candidate = tuple[tuple[int, ...], int]  # (VL of each job, in job order; index of the weight set)
EQUAL_WEIGHT = 64
CANDIDATE_MARK = "/candidate["  # in a candidate's policy name: "q-opt/candidate[a=0 b=1; w=64:64]"
MAX_EXHAUSTIVE = 5000


class Search(Policy):
    kind: Literal["search"]
    name: str | None = "q-opt"
    vls: Annotated[int, Field(ge=1, le=15)] | None = None  # None: every data VL
    weight_sets: Annotated[
        list[Literal["equal"] | Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1, max_length=15)]],
        Field(min_length=1),
    ] = Field(default_factory=lambda: ["equal"])
    objective: Literal["total-contention", "worst-slowdown", "mean-slowdown"] = "total-contention"
    budget: Annotated[int, Field(ge=1, le=10000)] = 32  # candidates simulated at most
    method: Literal["auto", "exhaustive", "tpe"] = "auto"
    seed: Annotated[int, Field(ge=0)] = 0

    needs = frozenset({NEEDS_ALONE})

    @model_validator(mode="after")
    def _weight_lengths(self) -> "Search":
        lengths = {len(w) for w in self.weight_sets if w != "equal"}
        if len(lengths) > 1 or (self.vls is not None and lengths and lengths != {self.vls}):
            want = f"{self.vls}" if self.vls is not None else "the same number of"
            raise problem(f"every weight set needs {want} weights (one per VL), got lengths {sorted(lengths)}", "weight_sets")
        return self

    def describe(self) -> str:
        how = {"auto": "exhaustive or TPE", "exhaustive": "exhaustive", "tpe": "Optuna TPE"}[self.method]
        return f"best job-to-VL mapping and weights by {self.objective} ({how}, at most {self.budget} candidates)"

    def count(self, data_vls: int) -> int:
        explicit = [w for w in self.weight_sets if w != "equal"]
        return len(explicit[0]) if explicit else (self.vls or data_vls)

    def weights(self, index: int, data_vls: int) -> list[int]:
        chosen = self.weight_sets[index]
        return [EQUAL_WEIGHT] * self.count(data_vls) if chosen == "equal" else list(chosen)

    def check(self, jobs: list[str], ranks: dict[str, int], data_vls: int) -> None:
        n = self.count(data_vls)
        if n > data_vls:
            raise PolicyError("vls", f"{n} VLs, but the ports operate {self.operated(data_vls)}")
        for i in range(len(self.weight_sets)):
            PerJob(kind="per-job", assignment={}, weights=self.weights(i, data_vls))  # expressible?
        if self.method == "exhaustive" and self.space_size(len(jobs), data_vls) > MAX_EXHAUSTIVE:
            raise PolicyError(
                "method", f"the space has {self.space_size(len(jobs), data_vls)} candidates; exhaustive search "
                f"is limited to {MAX_EXHAUSTIVE} (use \"tpe\" with a budget)"
            )

    def space_size(self, jobs: int, data_vls: int) -> int:
        n = self.count(data_vls)
        total = 0
        for i in range(len(self.weight_sets)):
            if len(set(self.weights(i, data_vls))) == 1:
                total += sum(_stirling2(jobs, k) for k in range(1, min(n, jobs) + 1))
            else:
                total += n**jobs
        return total

    def space(self, jobs: int, data_vls: int) -> list[Candidate]:
        n = self.count(data_vls)
        out: list[Candidate] = []
        for i in range(len(self.weight_sets)):
            symmetric = len(set(self.weights(i, data_vls))) == 1
            mappings = _partitions(jobs, n) if symmetric else itertools.product(range(n), repeat=jobs)
            out.extend((tuple(m), i) for m in mappings)
        return out

    def candidate(self, mapping: Candidate, jobs: list[str], data_vls: int) -> PerJob:
        vls, weight_index = mapping
        weights = self.weights(weight_index, data_vls)
        assignment = dict(zip(jobs, vls))
        listed = " ".join(f"{j}={v}" for j, v in assignment.items())
        return PerJob(
            kind="per-job",
            assignment=assignment,
            weights=weights,
            data_vls=self.data_vls,  # candidates run on the VLs the search operates
            name=f"{self.label()}{CANDIDATE_MARK}{listed}; w={':'.join(map(str, weights))}]",
        )

    def optimise(
        self,
        jobs: list[str],
        data_vls: int,
        batch: int,
        evaluate: Callable[[Sequence[PerJob]], list[float]],
    ) -> list[tuple[PerJob, float]]:
        """Evaluates candidates (`evaluate` simulates a batch and returns their objectives, lower
        is better, inf for a failed one) and returns every (candidate, objective), best first."""
        size = self.space_size(len(jobs), data_vls)
        exhaustive = self.method == "exhaustive" or (self.method == "auto" and size <= self.budget)
        if exhaustive:
            space = self.space(len(jobs), data_vls)
            policies = [self.candidate(c, jobs, data_vls) for c in space]
            scores = evaluate(policies)
            results = list(zip(policies, scores))
        else:
            results = self._tpe(jobs, data_vls, batch, evaluate)
        return sorted(results, key=lambda r: (r[1], r[0].label()))

    def _tpe(self, jobs: list[str], data_vls: int, batch: int, evaluate: Callable[[Sequence[PerJob]], list[float]]) -> list[tuple[PerJob, float]]:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        n = self.count(data_vls)
        study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=self.seed))
        seen: dict[Candidate, tuple[PerJob, float]] = {}
        asked = 0
        while len(seen) < self.budget and asked < self.budget * 4:
            trials = []
            for _ in range(max(1, min(batch, self.budget - len(seen)))):
                trial = study.ask()
                vls = tuple(trial.suggest_int(f"vl[{job}]", 0, n - 1) for job in jobs)
                weights = trial.suggest_int("weight_set", 0, len(self.weight_sets) - 1)
                trials.append((trial, (vls, weights)))
                asked += 1
            fresh = list(dict.fromkeys(c for _, c in trials if c not in seen))
            policies = [self.candidate(c, jobs, data_vls) for c in fresh]
            for c, policy, score in zip(fresh, policies, evaluate(policies) if policies else []):
                seen[c] = (policy, score)
            for trial, c in trials:
                score = seen[c][1]
                study.tell(trial, score if math.isfinite(score) else None,
                           state=None if math.isfinite(score) else optuna.trial.TrialState.FAIL)
        return list(seen.values())

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        raise PolicyError("", "a search is run by the study runner, not applied directly")


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
