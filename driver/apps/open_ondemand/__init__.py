"""The open-ondemand companion app: a portal attached to a slurm-reference instance."""

from driver.apps.open_ondemand.adapter import APP_RUNTIMES, OpenOnDemand

__all__ = ["APP_RUNTIMES", "OpenOnDemand"]
