"""One address policy for every address a request makes a host or the driver contact:
allocations, the controller a typed task reaches, and the URLs and mail relays of an app's
config (an alert webhook, an SMTP smarthost, an OIDC issuer). None may reach the machine
itself, a cloud's instance-metadata service (which hands out the platform's credentials),
nothing at all or everyone at once; before a run, a DNS name must not resolve there either.
"""

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from driver.apps import adapter_for
from driver.apps.base import AppAdapter
from driver.documents import Document, LinePath
from driver.findings import Finding
from driver.models.request import OperationRequest
from driver.request_check.rules import Rules

# Names that reach the machine itself or a cloud's instance-metadata service rather than a
# host of the tenant's.
RESERVED_NAMES = frozenset(
    {
        "localhost",
        "metadata",
        "metadata.google.internal",
        "metadata.azure.internal",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
ODD_SPELLING = (
    "expected an IPv4 address as four decimal numbers (a.b.c.d), an IPv6 address or a DNS "
    "name; shorthand, octal and hex spellings are refused"
)
RESERVED = (
    "expected a routable host address, not loopback, link-local (cloud metadata), unspecified "
    "or multicast"
)
RESOLVES_RESERVED = (
    "the name resolves to a loopback, link-local, unspecified or multicast address; expected "
    "a routable host"
)


def canonical_address(address: str) -> str:
    """One spelling per host: an IP address in its standard form (an IPv4-mapped IPv6
    address as the IPv4 one), a DNS name in lower case without the root's trailing dot."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address.lower().removesuffix(".")
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip)


def odd_ipv4_spelling(address: str) -> bool:
    """Shorthand, decimal, octal or hex IPv4 (127.1, 2130706433, 0177.0.0.1, 0x7f000001):
    what inet_aton, and so ssh, curl and Go's resolver-less dialers, read as an address, but
    ipaddress does not."""
    try:
        socket.inet_aton(address)
    except OSError:
        return False
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        return True
    return False


def reserved_ip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast


def reserved_address(address: str) -> bool:
    canonical = canonical_address(address)
    if canonical in RESERVED_NAMES or canonical.endswith(".localhost"):
        return True
    try:
        return reserved_ip(ipaddress.ip_address(canonical))
    except ValueError:
        return False  # a DNS name: resolved before a run (resolves_reserved)


def address_problem(address: str) -> str | None:
    """Why the policy refuses this host (an address or a DNS name), or None."""
    if odd_ipv4_spelling(address):
        return ODD_SPELLING
    if reserved_address(address):
        return RESERVED
    return None


def resolves_reserved(address: str) -> bool:
    """A DNS name that resolves to an address the policy refuses; an address, or a name
    that does not resolve (left to the run), is not."""
    name = canonical_address(address)
    try:
        ipaddress.ip_address(name)
        return False
    except ValueError:
        pass
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(name, None)}
    except (OSError, UnicodeError):
        return False
    return any(reserved_ip(ipaddress.ip_address(ip.split("%", 1)[0])) for ip in resolved)


def url_host(url: str) -> str:
    """The host a URL names ('' when it names none)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def relay_host(smarthost: str) -> str:
    """The host of a mail relay given as host:port."""
    return smarthost.rsplit(":", 1)[0]


# Host names become inventory names and Slurm NodeNames: none may be an Ansible pattern or
# group, or a Slurm keyword (`NodeName=DEFAULT` sets defaults for every later node).
RESERVED_HOSTNAMES = frozenset({"default", "all", "ungrouped", "localhost"})


def config_hosts(
    adapter: AppAdapter, config: dict[str, Any], base: LinePath
) -> Iterator[tuple[LinePath, str]]:
    """(path, host) of each address field the app's config sets (its adapter's
    `address_fields`)."""
    for path, written in adapter.address_fields:
        value: Any = config
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str):
            yield (*base, *path), url_host(value) if written == "url" else relay_host(value)


def tenant_source_hosts(request: OperationRequest) -> Iterator[tuple[LinePath, str]]:
    """(path, host) of each source of the tenant's own: the hosts fetch from it."""
    registry = request.tenant_npm_registry
    if registry is not None:
        yield ("tenant_sources", "npm_registry", "url"), url_host(registry.url)


def allocation_names(rules: Rules) -> None:
    """No reserved host name, no address that points back at a machine itself."""
    for index, allocation in enumerate(rules.request.allocations):
        if allocation.hostname.lower() in RESERVED_HOSTNAMES:
            rules.add(
                "reserved-name",
                ("allocations", index, "hostname"),
                "expected a host name that is neither a Slurm keyword (DEFAULT) nor an "
                f"Ansible name ({', '.join(sorted(RESERVED_HOSTNAMES - {'default'}))})",
            )
        problem = address_problem(allocation.address)
        if problem is not None:
            rules.add("reserved-address", ("allocations", index, "address"), problem)


def config_addresses(rules: Rules) -> None:
    """The hosts the app's config and the tenant's sources make its hosts contact, under the
    same policy."""
    adapter = adapter_for(rules.request.instance.app_slug)
    hosts = config_hosts(adapter, rules.request.instance.config, ("instance", "config"))
    for path, host in [*hosts, *tenant_source_hosts(rules.request)]:
        problem = address_problem(host)
        if problem is not None:
            rules.add("reserved-address", path, f"{host}: {problem}")


def check_names(doc: Document, request: OperationRequest) -> list[Finding]:
    """DNS names among the addresses a run contacts (allocations, the config's URLs and mail
    relays) must not resolve to loopback, link-local (cloud metadata), unspecified or
    multicast addresses; run before acting. A name that does not resolve is left to the run
    (host_unreachable, or the service's own error)."""
    adapter = adapter_for(request.instance.app_slug)
    hosts: list[tuple[LinePath, str]] = [
        (("allocations", index, "address"), allocation.address)
        for index, allocation in enumerate(request.allocations)
    ]
    hosts += list(config_hosts(adapter, request.instance.config, ("instance", "config")))
    hosts += list(tenant_source_hosts(request))
    return [
        doc.finding("reserved-address", path, RESOLVES_RESERVED)
        for path, host in hosts
        if resolves_reserved(host)
    ]
