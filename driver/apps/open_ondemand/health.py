"""The portal's health from what its role reported."""

from typing import Any


def portal_health(portal: dict[str, Any]) -> dict[str, Any]:
    """failed: Apache does not run; degraded: a login or a job would fail (the provider's
    metadata does not answer, the Slurm client cannot reach the controller, munge or sackd
    stopped); healthy otherwise."""
    services: dict[str, str] = portal.get("services") or {}
    fatal = (
        [f"{portal.get('host')}: apache2 is {services.get('apache2', 'absent')}"]
        if services.get("apache2") != "running"
        else []
    )
    problems = [
        f"{portal.get('host')}: {unit} is {state}"
        for unit, state in sorted(services.items())
        if unit != "apache2" and state != "running"
    ]
    metadata = portal.get("oidc_metadata") or {}
    if str(metadata.get("status")) != "200":
        problems.append(
            f"the OIDC provider's metadata ({metadata.get('url')}) does not answer from the "
            f"portal: {metadata.get('error') or metadata.get('status')}"
        )
    if not portal.get("slurm_client_answers"):
        problems.append(f"{portal.get('host')}: the Slurm client cannot reach the controller")
    return {
        "classification": "failed" if fatal else "degraded" if problems else "healthy",
        "problems": fatal + problems,
        "services": {str(portal.get("host")): services},
    }
