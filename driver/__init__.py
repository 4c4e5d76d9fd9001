"""Driver for the Slurm reference app bundle: validates platform requests and runs playbooks."""

__version__ = "0.1.0"
