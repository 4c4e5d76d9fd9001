"""Lab errors, importable without the docker SDK (the CLI parses lab options before it)."""


class LabError(Exception):
    """The lab cannot do what was asked; the message says why and what to do."""
