"""A local OIDC provider for the portal's tests (Molecule `open_ondemand`, tests/e2e):
oidc-provider-mock over TLS, with client registration required (its default accepts any client
and secret), and a cluster user and a stranger to log in as.

  oidc_provider.py start HOST PORT DIR REDIRECT_URI
      makes a CA and the provider's certificate in DIR, starts the provider in the background
      on HOST:PORT, registers a client for REDIRECT_URI and writes DIR/issuer, DIR/client_id,
      DIR/client_secret (0600) and DIR/ca.crt
  oidc_provider.py stop DIR
  oidc_provider.py serve HOST PORT CERT KEY      (what start runs)
"""

import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# Cluster accounts (alice in Molecule's project; labuser, labpeer and the Debian 12 lab's late
# in the lab's), a login of both projects that is no cluster account (mallory: the user-map
# failure page), and, for each account, a user of another project with the same name
# (outsider-<name>: refused by the group check). Each logs in as subject sub-<name>.
PROJECTS = {
    "alice": "molecule-project",
    "labuser": "lab-project",
    "labpeer": "lab-project",
    "late": "lab-project",
}
USERS = (
    *(
        (f"sub-{name}", {"preferred_username": name, "email": f"{name}@example.org", "groups": [p]})
        for name, p in PROJECTS.items()
    ),
    (
        "sub-mallory",
        {"preferred_username": "mallory", "email": "m@example.org", "groups": [*PROJECTS.values()]},
    ),
    *(
        (
            f"sub-outsider-{name}",
            {"preferred_username": name, "email": f"{name}@other.example", "groups": ["other"]},
        )
        for name in PROJECTS
    ),
)


def serve(host: str, port: str, cert: str, key: str) -> None:
    import uvicorn
    from oidc_provider_mock import User, app

    users = [User(sub=sub, claims=claims) for sub, claims in USERS]
    uvicorn.run(
        app(require_client_registration=True, require_nonce=True, user_claims=users),
        interface="wsgi",
        host=host,
        port=int(port),
        ssl_certfile=cert,
        ssl_keyfile=key,
        log_level="warning",
    )


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)


def certificates(folder: Path, host: str) -> None:
    """A CA (ca.crt) and a server certificate for the address `host` (provider.crt and .key),
    with the extensions a strict verifier (Python 3.13, Debian 13's Ansible modules, Go)
    demands of both. The e2e tests' alert webhook serves its TLS with them too."""
    _openssl(
        folder, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=slurm-app-test-ca", "-keyout", "ca.key", "-out", "ca.crt",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
    )  # fmt: skip
    _openssl(
        folder, "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={host}",
        "-keyout", "provider.key", "-out", "provider.csr",
    )  # fmt: skip
    (folder / "provider.ext").write_text(
        f"subjectAltName=IP:{host}\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )
    _openssl(
        folder, "x509", "-req", "-in", "provider.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "provider.ext", "-out", "provider.crt",
    )  # fmt: skip


def start(host: str, port: str, folder: Path, redirect_uri: str) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    certificates(folder, host)
    log = (folder / "provider.log").open("w")
    process = subprocess.Popen(
        [sys.executable, __file__, "serve", host, port, "provider.crt", "provider.key"],
        cwd=folder,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    (folder / "provider.pid").write_text(f"{process.pid}\n")
    issuer = f"https://{host}:{port}"
    context = ssl.create_default_context(cafile=str(folder / "ca.crt"))
    for _ in range(60):
        try:
            urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration", context=context)
            break
        except OSError:
            time.sleep(0.5)
    registration = urllib.request.Request(
        f"{issuer}/oauth2/clients",
        data=json.dumps({"redirect_uris": [redirect_uri]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    client = json.load(urllib.request.urlopen(registration, context=context))
    (folder / "issuer").write_text(issuer)
    (folder / "client_id").write_text(client["client_id"])
    secret = folder / "client_secret"
    secret.write_text(client["client_secret"])
    secret.chmod(0o600)


def stop(folder: Path) -> None:
    pid_file = folder / "provider.pid"
    if pid_file.is_file():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
        pid_file.unlink()


def main() -> None:
    command, *args = sys.argv[1:]
    if command == "serve":
        serve(*args)
    elif command == "start":
        start(args[0], args[1], Path(args[2]), args[3])
    elif command == "stop":
        stop(Path(args[0]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
