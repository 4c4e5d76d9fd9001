"""The slurm-reference app: its adapter and the pieces it is made of."""

from driver.apps.slurm.adapter import SlurmReference

__all__ = ["SlurmReference"]
