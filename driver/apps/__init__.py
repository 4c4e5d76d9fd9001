"""One adapter per bundled app: what the driver knows of it beyond its manifest."""

from driver.apps.base import AppAdapter
from driver.apps.open_ondemand import OpenOnDemand
from driver.apps.slurm import SlurmReference

ADAPTERS: dict[str, AppAdapter] = {
    adapter.slug: adapter for adapter in (SlurmReference(), OpenOnDemand())
}


def adapter_for(slug: str) -> AppAdapter:
    """The app's adapter; an app without one gets the defaults (manifest only)."""
    return ADAPTERS.get(slug) or AppAdapter()
