"""The self-contained HTML report of a study (figures embedded; reads tables only)."""

from qoslab.report.html import write_report

__all__ = ["write_report"]
