"""The open-ondemand companion app."""

from typing import ClassVar

from driver.apps.base import AppAdapter

PORTAL_ISSUE = "the open_ondemand role does not exist yet (Open OnDemand issue)"


class OpenOnDemand(AppAdapter):
    slug = "open-ondemand"
    pending_config: ClassVar[dict[str, str]] = {
        name: PORTAL_ISSUE for name in ("portal_title", "interactive_apps", "server_name", "oidc")
    }
