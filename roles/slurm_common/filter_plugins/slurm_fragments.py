"""slurm_common's filter that assembles a configuration file from its fragments in memory
(`slurm_assembled`), the way ansible.builtin.assemble does on the host.

A check run (--check) renders no fragment on the host, so assemble would compare the file with
itself: the controller role shows the slurm.conf and gres.conf this run would write from the
fragments on the host and the ones it renders in memory instead.
"""

from typing import Any


def slurm_assembled(on_host: dict[str, str], rendered: dict[str, str | None], folder: str) -> str:
    """The fragments under `folder` (a prefix of the keys, e.g. `slurm.conf.d/`), this run's
    rendering taking the place of the host's (None: the run removes that fragment), joined in
    file-name order with a newline after each fragment that lacks one, as assemble joins them."""
    fragments = {
        name: content
        for name, content in {**on_host, **rendered}.items()
        if name.startswith(folder) and content is not None
    }
    parts: list[str] = []
    for name in sorted(fragments):
        if parts and not parts[-1].endswith("\n"):
            parts.append("\n")
        parts.append(fragments[name])
    return "".join(parts)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"slurm_assembled": slurm_assembled}
