"""slurm_common's filter for the converge check (`slurm_converge_reading`).

A member's reading (slurm_common's probe script: its output the managed files' checksums,
packages, units, users and, where asked, the last record after a marker line) is turned into
what converged.yml compares and slurm_files' `converged` records. A filter rather than a fact
set on each member: the cluster's decision reads every member's registered reading in one step,
and a set_fact would be a step on every member, twice per deploy.
"""

from hashlib import sha256
from typing import Any


def slurm_converge_reading(
    reading: dict[str, Any], inputs: str, marker: str | None = None
) -> dict[str, str]:
    """fingerprint: the request's digest and the reading's, as the record holds them (empty
    where the member could not be read: it is not converged, and gets no record); recorded: the
    last record, as read after the marker (empty without one, or where no marker is given: a
    reading made to be recorded, which asked for no record)."""
    stdout = str(reading.get("stdout", ""))
    reading_part, _, recorded = stdout.partition("\n" + marker) if marker else (stdout, "", "")
    fingerprint = ""
    if reading.get("rc") == 0:
        fingerprint = f"{inputs} {sha256(reading_part.encode()).hexdigest()}"
    return {"fingerprint": fingerprint, "recorded": recorded.strip()}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"slurm_converge_reading": slurm_converge_reading}
