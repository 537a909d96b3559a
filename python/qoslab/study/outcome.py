"""How a finished study shows itself in a terminal and a notebook: a one-line `repr` (where its
results are, how many runs, which tables) and an HTML view (its summary table and first figure)."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The table a study's HTML view shows, by kind of study: the first one present.
SUMMARY_TABLES = ("policies", "tail_correlations", "slowdown", "sweep")
# The figure it embeds: the first present in figures/.
SUMMARY_FIGURES = ("slowdown.png", "tail_cdfs.png", "sweep.png")
HTML_ROWS = 30


class OutcomeView:
    """Mixed into StudyOutcome and TailOutcome (dataclasses with out, tables, runs_total,
    runs_reused, failed)."""

    out: Path
    tables: Mapping[str, Any]
    runs_total: int
    runs_reused: int
    failed: list[dict[str, Any]]

    @property
    def figures(self) -> list[Path]:
        """The PNG figures written to figures/, by name."""
        return sorted((self.out / "figures").glob("*.png"))

    @property
    def report(self) -> Path | None:
        report = self.out / "report.html"
        return report if report.is_file() else None

    def _counts(self) -> str:
        return f"{self.runs_total} runs ({self.runs_reused} reused, {len(self.failed)} not completed)"

    def __repr__(self) -> str:
        names = ", ".join(sorted(self.tables))
        return f"{type(self).__name__}(out={str(self.out)!r}, {self._counts()}, tables: {names})"

    def _repr_html_(self) -> str:
        parts = [f"<b>{html.escape(type(self).__name__)}</b> in <code>{html.escape(str(self.out))}</code>: "
                 f"{html.escape(self._counts())}; tables: {html.escape(', '.join(sorted(self.tables)))}"]
        table = next((self.tables[name] for name in SUMMARY_TABLES if self.tables.get(name) is not None), None)
        if table is not None and len(table):
            more = f"<p>first {HTML_ROWS} of {len(table)} rows</p>" if len(table) > HTML_ROWS else ""
            parts.append(table.head(HTML_ROWS).to_html(index=False, float_format=lambda v: f"{v:.4g}") + more)
        figure = next((self.out / "figures" / n for n in SUMMARY_FIGURES if (self.out / "figures" / n).is_file()), None)
        if figure is not None:
            data = base64.b64encode(figure.read_bytes()).decode("ascii")
            parts.append(f'<img alt="{html.escape(figure.name)}" style="max-width:100%" '
                         f'src="data:image/png;base64,{data}"/>')
        if self.report is not None:
            parts.append(f"<p>report: <code>{html.escape(str(self.report))}</code></p>")
        return "<div>" + "".join(f"<div>{p}</div>" for p in parts) + "</div>"
