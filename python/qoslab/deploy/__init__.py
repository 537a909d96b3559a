"""`qoslab export opensm`: a QoS policy as the files a cluster deploys (bundle.py), every name and
value in them written exactly or refused (names.py)."""

from qoslab.deploy.bundle import FILES, export_opensm, job_environment, mpi_side, study_scenario
from qoslab.deploy.names import ExportError

__all__ = ["FILES", "ExportError", "export_opensm", "job_environment", "mpi_side", "study_scenario"]
