"""Secrets: none inline in a request, and every credential file it names private and inside
the instance's own credentials folder, never the key the driver connects with."""

import os
import re
import stat
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from driver.catalog import instance_credentials_dir
from driver.documents import Document, LinePath
from driver.findings import Finding
from driver.models.request import OperationRequest

# Key names that announce a secret; allowed only as references (paths or names).
_SECRET_KEY = re.compile(
    r"(secret|password|passwd|passphrase|private_?key|token|munge_?key|"
    r"api_?key)",
    re.IGNORECASE,
)
_REFERENCE_SUFFIXES = ("_file", "_ref", "_dir", "_id", "_ids")
_PEM_MARKER = "-----BEGIN"


@lru_cache(maxsize=1024)
def _names_a_secret(key: str) -> bool:
    """Cached: a 10,000-worker request repeats the same few keys 130,000 times."""
    return bool(_SECRET_KEY.search(key)) and not key.endswith(_REFERENCE_SUFFIXES)


def inline_secrets(data: Any, path: LinePath = ()) -> Iterator[tuple[LinePath, str]]:
    if isinstance(data, dict):
        for key, value in data.items():
            key_path = (*path, key)
            if isinstance(key, str) and _names_a_secret(key) and value not in (None, "", {}, []):
                yield key_path, f"{key!r} looks like an inline secret"
            else:
                yield from inline_secrets(value, key_path)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from inline_secrets(item, (*path, index))
    elif isinstance(data, str) and _PEM_MARKER in data:
        yield path, "value contains a PEM key or certificate block"


def secret_refs(config: Any, path: LinePath) -> Iterator[tuple[LinePath, str]]:
    if isinstance(config, dict):
        for key, value in config.items():
            if key.endswith("secret_ref") and isinstance(value, str):
                yield (*path, key), value
            else:
                yield from secret_refs(value, (*path, key))


def request_secret_refs(request: OperationRequest) -> Iterator[tuple[LinePath, str]]:
    """Every secret reference of a request: its config's and its tenant sources'."""
    yield from secret_refs(request.instance.config, ("instance", "config"))
    if request.tenant_sources is not None:
        tenant = request.tenant_sources.model_dump(exclude_none=True)
        yield from secret_refs(tenant, ("tenant_sources",))


# A secret reference names a file directly inside secrets_dir: no path, no hidden file.
SECRET_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


# Where a request's credential files must lie, as findings say it.
_FOLDER_RULE = (
    "the instance's credentials folder <credentials root>/<project_id>/<instance.id> "
    "(SLURM_APP_CREDENTIALS_ROOT)"
)


def private_file(
    doc: Document,
    path: LinePath,
    file: Path,
    what: str,
    inside: Path,
    inside_name: str = _FOLDER_RULE,
) -> list[Finding]:
    """`file` must resolve (symlinks followed) to a regular file inside `inside`, owned by the
    driver's user, readable by it alone (0600 or 0400): the role copies it to hosts where the
    customer is root, so nothing else the driver can read may be named here."""
    try:
        real = file.resolve(strict=True)
        info = real.stat()
    except (OSError, RuntimeError):
        return [doc.finding("secret-file", path, f"{what} does not exist or cannot be read")]
    if not real.is_relative_to(inside.resolve()):
        return [doc.finding("secret-file", path, f"{what} resolves outside {inside_name}")]
    if not stat.S_ISREG(info.st_mode):
        return [doc.finding("secret-file", path, f"{what} is not a regular file")]
    if info.st_uid != os.geteuid():
        return [doc.finding("secret-file", path, f"{what} is not owned by the driver's user")]
    if info.st_mode & 0o777 not in (0o600, 0o400):
        mode = f"{info.st_mode & 0o777:o}"
        return [doc.finding("secret-file", path, f"{what} has mode {mode}; expected 600 or 400")]
    return []


def check_files(doc: Document, request: OperationRequest) -> list[Finding]:
    """Secret files exist, are private and lie inside the instance's own credentials folder
    (`<root>/<project_id>/<instance_id>/`); run before acting, optional for dry checks.
    Messages never name a secret reference's value."""
    creds = request.credentials
    folder = instance_credentials_dir(request.project_id, request.instance.id)
    ssh_key = Path(creds.ssh_private_key_file)
    findings = private_file(
        doc, ("credentials", "ssh_private_key_file"), ssh_key, "the SSH private key", folder
    )
    if creds.munge_key_file:
        findings += private_file(
            doc,
            ("credentials", "munge_key_file"),
            Path(creds.munge_key_file),
            "the munge key",
            folder,
        ) or _not_the_ssh_key(
            doc, ("credentials", "munge_key_file"), Path(creds.munge_key_file), ssh_key
        )
    if not creds.secrets_dir:
        return findings
    secrets_dir = Path(creds.secrets_dir)
    if not secrets_dir.resolve().is_relative_to(folder.resolve()) or not secrets_dir.is_dir():
        return [
            *findings,
            doc.finding(
                "secret-file",
                ("credentials", "secrets_dir"),
                f"secrets_dir must be a folder inside {_FOLDER_RULE}",
            ),
        ]
    if _same_file(secrets_dir, ssh_key.parent):
        return [
            *findings,
            doc.finding(
                "secret-file",
                ("credentials", "secrets_dir"),
                "secrets_dir holds the SSH private key the driver connects with; expected a "
                "folder of the secrets the config names, apart from the driver's own files",
            ),
        ]
    for path, name in request_secret_refs(request):
        if not SECRET_REF.fullmatch(name):
            findings.append(
                doc.finding(
                    "secret-file",
                    path,
                    "expected the bare name of a file in secrets_dir (letters, digits, . _ -)",
                )
            )
            continue
        findings += private_file(
            doc,
            path,
            secrets_dir / name,
            "the secret file this field names",
            secrets_dir,
            "secrets_dir",
        ) or _not_the_ssh_key(doc, path, secrets_dir / name, ssh_key)
    return findings


def _same_file(one: Path, other: Path) -> bool:
    try:
        return one.samefile(other)
    except OSError:
        return False


def _not_the_ssh_key(doc: Document, path: LinePath, file: Path, ssh_key: Path) -> list[Finding]:
    """A secret reference names a secret, never the key the driver connects with (a hard link
    to it included): the roles copy secrets to hosts the customer is root on."""
    if not _same_file(file, ssh_key):
        return []
    return [
        doc.finding(
            "secret-file",
            path,
            "names the SSH private key the driver connects with; expected a secret of the app's",
        )
    ]
