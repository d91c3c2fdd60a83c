"""deploy: push the benchmark binary, models and app to every device, benchmark, record and report."""

from .bench import BenchOptions
from .orchestrate import DeployResult, deploy
from .plan import DeploySettings, project_name
from .summary import device_tables

__all__ = ["BenchOptions", "DeployResult", "DeploySettings", "deploy", "device_tables", "project_name"]
