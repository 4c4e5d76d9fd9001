"""The monitoring role's variables from a cluster config's `monitoring`."""

from pathlib import Path
from typing import Any

from driver.models.request import OperationRequest
from driver.site import load_site
from driver.site import role_vars as site_role_vars


def monitoring_vars(request: OperationRequest, monitoring: dict[str, Any]) -> dict[str, Any]:
    """The monitoring role's variables: the config's, the site's package sources, and the
    Grafana OIDC client secret as a file inside secrets_dir (request_check proved it there)."""
    role_vars: dict[str, Any] = {
        "monitoring_enabled": monitoring["enabled"],
        "monitoring_prometheus_retention_time": monitoring["retention_time"],
        "monitoring_prometheus_retention_size": monitoring["retention_size"],
        "monitoring_prometheus_scrape_interval": monitoring["scrape_interval"],
        **site_role_vars(load_site(), ("grafana", "dcgm_exporter")),
    }
    oidc = (monitoring.get("grafana") or {}).get("oidc")
    if oidc and request.credentials.secrets_dir:
        role_vars["monitoring_grafana_oidc"] = {
            "issuer_url": oidc["issuer_url"],
            "client_id": oidc["client_id"],
            "client_secret_src": str(
                Path(request.credentials.secrets_dir) / oidc["client_secret_ref"]
            ),
            "scopes": oidc.get("scopes", ["openid", "profile", "email"]),
            "admin_role": oidc.get("admin_role", "slurm-admin"),
            "allowed_groups": oidc["allowed_groups"],
            "groups_claim": oidc.get("groups_claim", "groups"),
            "claims_from": oidc.get("claims_from", "access_token"),
        }
    root_url = (monitoring.get("grafana") or {}).get("root_url")
    if root_url:
        role_vars["monitoring_grafana_root_url"] = root_url
    role_vars.update(_alerting_vars(request, monitoring.get("alerting") or {}))
    return role_vars


def _alerting_vars(request: OperationRequest, alerting: dict[str, Any]) -> dict[str, Any]:
    """Alertmanager's receivers and intervals; a secret reference becomes its file inside
    secrets_dir (request_check proved it there)."""
    secrets_dir = Path(request.credentials.secrets_dir or "")
    role_vars: dict[str, Any] = {
        f"monitoring_alertmanager_{key}": alerting[key]
        for key in ("group_wait", "group_interval", "repeat_interval")
        if key in alerting
    }
    if webhook := alerting.get("webhook"):
        role_vars["monitoring_alertmanager_webhook"] = {
            "url": webhook["url"],
            **(
                {"bearer_token_src": str(secrets_dir / webhook["bearer_token_secret_ref"])}
                if webhook.get("bearer_token_secret_ref")
                else {}
            ),
        }
    if email := alerting.get("email"):
        role_vars["monitoring_alertmanager_email"] = {
            key: email[key]
            for key in ("to", "from", "smarthost", "require_tls", "auth_username")
            if key in email
        } | (
            {"auth_password_src": str(secrets_dir / email["auth_password_secret_ref"])}
            if email.get("auth_password_secret_ref")
            else {}
        )
    return role_vars
