"""Drive a browser's OIDC login through the portal's Apache (mod_auth_openidc) and the
scenario's provider, with requests, and assert each step. Prints what it saw as JSON.

usage: login_check.py PORTAL_ADDRESS TEST_DIR (good|wrong-secret) [ACCOUNT]

ACCOUNT (default alice) is a cluster user the provider knows as subject sub-ACCOUNT, in the
portal's allowed group; sub-outsider-ACCOUNT has the same name in another project's group.
"""

import json
import sys
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import requests

SESSION_COOKIE = "mod_auth_openidc_session"
# The portal's certificate is self-signed (users reach it through the platform's proxy); passed
# on every request, since a session's default loses to REQUESTS_CA_BUNDLE.
PORTAL_TLS = False


def login(portal: str, ca: str, subject: str) -> tuple[requests.Session, requests.Response]:
    """Unauthenticated -> provider -> consent as `subject` -> back to the portal's /oidc."""
    browser = requests.Session()
    first = browser.get(
        f"https://{portal}/portal/", verify=PORTAL_TLS, allow_redirects=False, timeout=20
    )
    assert first.status_code == 302, (first.status_code, first.text[:500])
    authorize = first.headers["Location"]
    form = browser.get(authorize, verify=ca, timeout=20)
    assert form.status_code == 200, form.text[:500]
    consent = browser.post(
        authorize, data={"sub": subject}, verify=ca, allow_redirects=False, timeout=20
    )
    assert consent.status_code == 302, (consent.status_code, consent.text[:500])
    callback = consent.headers["Location"]
    assert callback.startswith(f"https://{portal}/oidc?"), callback
    back = browser.get(callback, verify=PORTAL_TLS, allow_redirects=False, timeout=20)
    return browser, back


def main() -> None:
    portal, test_dir, mode = sys.argv[1:4]
    account = sys.argv[4] if len(sys.argv) > 4 else "alice"
    ca = str(Path(test_dir) / "ca.crt")
    issuer = (Path(test_dir) / "issuer").read_text().strip()
    requests.packages.urllib3.disable_warnings()  # type: ignore[attr-defined]
    seen: dict[str, object] = {}

    anonymous = requests.get(
        f"https://{portal}/portal/", verify=PORTAL_TLS, allow_redirects=False, timeout=20
    )
    seen["unauthenticated"] = {
        "status": anonymous.status_code,
        "location": anonymous.headers.get("Location"),
    }
    assert anonymous.status_code == 302
    assert anonymous.headers["Location"].startswith(f"{issuer}/oauth2/authorize?"), (
        anonymous.headers
    )
    query = parse_qs(urlsplit(anonymous.headers["Location"]).query)
    assert query["scope"] == ["openid profile email"], query

    browser, back = login(portal, ca, f"sub-{account}")
    if mode == "wrong-secret":
        # the provider refuses the code exchange (invalid_client): mod_auth_openidc answers
        # with an error page (400 Bad Request on Debian 13's 2.4.17; DESIGN records 200 for
        # Debian 12's 2.4.12) and sets no session
        seen["wrong_secret"] = {"status": back.status_code, "cookies": sorted(browser.cookies)}
        assert back.status_code in (200, 400), back.status_code
        assert "Bad Request" in back.text or "Error" in back.text, back.text[:500]
        assert SESSION_COOKIE not in browser.cookies
        again = browser.get(
            f"https://{portal}/portal/", verify=PORTAL_TLS, allow_redirects=False, timeout=20
        )
        assert again.status_code == 302 and again.headers["Location"].startswith(issuer)
        print(json.dumps(seen))
        return

    assert back.status_code == 302, (back.status_code, back.text[:800])
    assert SESSION_COOKIE in browser.cookies, browser.cookies.keys()
    page = browser.get(
        urljoin(f"https://{portal}/", back.headers["Location"]), verify=PORTAL_TLS, timeout=20
    )
    seen[account] = {"status": page.status_code}
    assert page.status_code == 200, page.text[:500]
    assert f'<strong id="remote-user">{account}</strong>' in page.text, page.text
    assert f'<strong id="cluster-account">{account}</strong>' in page.text, page.text

    # a login that is no cluster account: OOD's user-map failure page, not a server error
    stranger, back = login(portal, ca, "sub-mallory")
    assert back.status_code == 302, back.status_code
    refused = stranger.get(
        f"https://{portal}/portal/", verify=PORTAL_TLS, allow_redirects=False, timeout=20
    )
    seen["mallory"] = {"status": refused.status_code, "location": refused.headers.get("Location")}
    assert refused.status_code == 302, refused.status_code
    assert refused.headers["Location"].endswith("/public/slurm-app/no-cluster-account.html")
    explained = stranger.get(
        urljoin(f"https://{portal}/", refused.headers["Location"]), verify=PORTAL_TLS, timeout=20
    )
    assert explained.status_code == 200 and "No account on the" in explained.text

    # a user of another project with the account's very name: the group check refuses them
    outsider, back = login(portal, ca, f"sub-outsider-{account}")
    assert back.status_code == 302, back.status_code
    kept_out = outsider.get(
        f"https://{portal}/portal/", verify=PORTAL_TLS, allow_redirects=False, timeout=20
    )
    seen["outsider"] = {"status": kept_out.status_code}
    assert kept_out.status_code == 401, (kept_out.status_code, kept_out.text[:500])
    assert "remote-user" not in kept_out.text

    # logout ends the session: the next request goes to the provider again
    out = browser.get(
        f"https://{portal}/logout", verify=PORTAL_TLS, allow_redirects=False, timeout=20
    )
    assert out.status_code in (301, 302), out.status_code
    local = browser.get(
        urljoin(f"https://{portal}/", out.headers["Location"]),
        verify=PORTAL_TLS,
        allow_redirects=False,
        timeout=20,
    )
    seen["logout"] = {"status": local.status_code, "location": local.headers.get("Location")}
    # mod_auth_openidc ends the local session and sends the browser to the provider's logout
    assert local.status_code == 302, local.status_code
    assert local.headers["Location"].startswith(f"{issuer}/oauth2/end_session?"), local.headers
    after = browser.get(
        f"https://{portal}/portal/", verify=PORTAL_TLS, allow_redirects=False, timeout=20
    )
    assert after.status_code == 302 and after.headers["Location"].startswith(issuer), after.headers
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
