"""Driver for the Slurm reference app bundle: validates platform requests and runs playbooks."""

__version__ = "1.1.0"
