"""One look per policy, the same in every figure of a report: a colour with a line style (lines),
a hatch (bars) and, past 36 policies, a marker. The baseline and the alone runs keep fixed,
neutral looks so they read as references."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# matplotlib's tab10 without its grey, which the default policy uses.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
LINESTYLES = ("-", "--", "-.", ":")
HATCHES = ("", "//", "\\\\", "..")  # the same variant index as LINESTYLES: bars differ where lines do
MARKERS = (None, "o", "s", "^", "D", "v", "x", "+")


@dataclass(frozen=True)
class PolicyStyle:
    colour: str
    linestyle: str
    hatch: str
    marker: str | None

    def line(self) -> dict[str, Any]:
        """Keyword arguments for Axes.plot / Axes.step."""
        marks = {"marker": self.marker, "markevery": 0.1, "markersize": 4} if self.marker else {}
        return {"color": self.colour, "linestyle": self.linestyle, **marks}

    def bar(self) -> dict[str, Any]:
        """Keyword arguments for Axes.bar / Axes.barh."""
        return {"color": self.colour, "hatch": self.hatch, "edgecolor": "white" if self.hatch else self.colour}


REFERENCES = {
    "alone": PolicyStyle("#000000", ":", "", None),
    "default": PolicyStyle("#555555", "-", "", None),
}


def policy_styles(policies: list[str]) -> dict[str, PolicyStyle]:
    """A distinct style for each of `policies` (in their order; 288 combinations before any
    repeats). Call it once with every policy of the study and pass the result to each figure."""
    styles: dict[str, PolicyStyle] = {}
    index = 0
    for policy in dict.fromkeys(policies):
        if policy in REFERENCES:
            styles[policy] = REFERENCES[policy]
            continue
        variant = index // len(COLOURS)
        styles[policy] = PolicyStyle(COLOURS[index % len(COLOURS)], LINESTYLES[variant % len(LINESTYLES)],
                                     HATCHES[variant % len(HATCHES)], MARKERS[(variant // len(LINESTYLES)) % len(MARKERS)])
        index += 1
    return styles
