"""The source policy (product spec 004): each source the operation installs from is held to
the platform's deny list (the site settings' `sources.deny`, which nothing overrides), then to
the project's overlay (the request's `source_policy.allow`, which only narrows); an artifact
is taken only by its checksum. A refusal names the source, the rule and the layer, at the
request's field that made the operation need the source."""

from driver.apps import adapter_for
from driver.apps.sources import NeededSource
from driver.request_check.rules import Rules
from driver.site import Site


def source_policy(rules: Rules, site: Site) -> list[NeededSource]:
    """The operation's sources, each finding added to `rules`; the sources either way."""
    request = rules.request
    needed = adapter_for(request.instance.app_slug).sources(request, rules.version, site)
    overlay = request.source_policy
    for item in needed:
        source = item.source
        named = f"{source.name} ({source.kind}, {source.location})"
        denied = next((r for r in site.sources.deny if r.matches(source)), None)
        if denied is not None:
            rules.add(
                "source-denied",
                item.needed_by,
                f"{named} is refused by the platform's rule {{{denied.said()}}} (layer: the "
                "global deny list, which no project overlay overrides)",
            )
        elif overlay is not None and not any(rule.matches(source) for rule in overlay.allow):
            host = f", host {source.host}" if source.host else ""
            rules.add(
                "source-not-allowed",
                item.needed_by,
                f"{named} matches no rule of source_policy.allow (layer: the project overlay): "
                f"expected a rule that matches name {source.name}, kind {source.kind}{host}",
            )
        if source.kind == "artifact" and source.checksum is None:
            rules.add(
                "source-unpinned",
                item.needed_by,
                f"{named} has no sha256 (layer: the bundle's rule, an artifact is taken only "
                "by its checksum): expected the site settings to pin it",
            )
    return needed
