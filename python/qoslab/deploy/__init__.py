"""`qoslab export opensm`: a QoS policy as the files a cluster deploys (bundle.py), every name and
value in them written exactly or refused (names.py), each job's SLs by MPI stack (mpi_env.py), and
which of a study's policies to export (study_policy.py)."""

from qoslab.deploy.bundle import FILES, Bundle, export_opensm
from qoslab.deploy.mpi_env import deployment, job_exports
from qoslab.deploy.names import ExportError
from qoslab.deploy.study_policy import study_scenario

__all__ = ["FILES", "Bundle", "ExportError", "deployment", "export_opensm", "job_exports", "study_scenario"]
