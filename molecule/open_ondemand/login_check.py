"""Drive a browser's OIDC login through the portal's Apache (mod_auth_openidc) and the
scenario's provider, with requests, and assert each step. Prints what it saw as JSON.

usage: login_check.py PORTAL_ADDRESS TEST_DIR (good|wrong-secret) [ACCOUNT]
                      [--page PATH --marker TEXT] [--refused PATH ...]
                      [--form ACTION FIELD VALUE MARKER [--xsrf NAME VALUE]]

ACCOUNT (default alice) is a cluster user the provider knows as subject sub-ACCOUNT, in the
portal's allowed group; sub-outsider-ACCOUNT has the same name in another project's group.
PATH (default /portal/, the bundle's own page when Open OnDemand is not installed) is the
protected page the login starts at; with --marker, the signed-in user must see TEXT there
(e.g. a session on a node behind OOD's /node/ proxy). Each --refused PATH must give the
signed-in user neither a page nor anything of the marker. --form posts FIELD=VALUE to ACTION
as the signed-in user (an app's own login behind the proxy) and expects MARKER on the page
it leads to. With --xsrf, the form is first posted without NAME and must be refused (403: the
app's xsrf check is on), then posted as the app's view does it: the cookie NAME=VALUE set for
the origin's root (replacing the app's own), and NAME=VALUE in the form.
"""

import argparse
import json
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import requests

SESSION_COOKIE = "mod_auth_openidc_session"
# The portal's certificate is self-signed (users reach it through the platform's proxy); passed
# on every request, since a session's default loses to REQUESTS_CA_BUNDLE.
PORTAL_TLS = False


def login(
    portal: str, ca: str, subject: str, page: str
) -> tuple[requests.Session, requests.Response]:
    """Unauthenticated -> provider -> consent as `subject` -> back to the portal's /oidc."""
    browser = requests.Session()
    first = browser.get(
        f"https://{portal}{page}", verify=PORTAL_TLS, allow_redirects=False, timeout=20
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
    parser = argparse.ArgumentParser()
    parser.add_argument("portal")
    parser.add_argument("test_dir")
    parser.add_argument("mode", choices=["good", "wrong-secret"])
    parser.add_argument("account", nargs="?", default="alice")
    parser.add_argument("--page", default="/portal/")
    parser.add_argument("--marker")
    parser.add_argument("--refused", action="append", default=[])
    parser.add_argument("--form", nargs=4, metavar=("ACTION", "FIELD", "VALUE", "MARKER"))
    parser.add_argument("--xsrf", nargs=2, metavar=("NAME", "VALUE"))
    args = parser.parse_args()
    portal, test_dir, mode, account, page = (
        args.portal,
        args.test_dir,
        args.mode,
        args.account,
        args.page,
    )
    ca = str(Path(test_dir) / "ca.crt")
    issuer = (Path(test_dir) / "issuer").read_text().strip()
    requests.packages.urllib3.disable_warnings()  # type: ignore[attr-defined]
    seen: dict[str, object] = {}

    anonymous = requests.get(
        f"https://{portal}{page}", verify=PORTAL_TLS, allow_redirects=False, timeout=20
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

    browser, back = login(portal, ca, f"sub-{account}", page)
    if mode == "wrong-secret":
        # the provider refuses the code exchange (invalid_client): mod_auth_openidc answers
        # with an error page (400 Bad Request on Debian 13's 2.4.17; DESIGN records 200 for
        # Debian 12's 2.4.12) and sets no session
        seen["wrong_secret"] = {"status": back.status_code, "cookies": sorted(browser.cookies)}
        assert back.status_code in (200, 400), back.status_code
        assert "Bad Request" in back.text or "Error" in back.text, back.text[:500]
        assert SESSION_COOKIE not in browser.cookies
        again = browser.get(
            f"https://{portal}{page}", verify=PORTAL_TLS, allow_redirects=False, timeout=20
        )
        assert again.status_code == 302 and again.headers["Location"].startswith(issuer)
        print(json.dumps(seen))
        return

    assert back.status_code == 302, (back.status_code, back.text[:800])
    assert SESSION_COOKIE in browser.cookies, browser.cookies.keys()
    shown = browser.get(
        urljoin(f"https://{portal}/", back.headers["Location"]), verify=PORTAL_TLS, timeout=20
    )
    seen[account] = {"status": shown.status_code}
    assert shown.status_code == 200, shown.text[:500]
    if args.marker is None:
        assert f'<strong id="remote-user">{account}</strong>' in shown.text, shown.text
        assert f'<strong id="cluster-account">{account}</strong>' in shown.text, shown.text
    else:
        assert args.marker in shown.text, shown.text[:500]
    if args.form is not None:
        action, field, value, marker = args.form
        data = {field: value}
        if args.xsrf is not None:
            name, token = args.xsrf
            bare = browser.post(
                f"https://{portal}{action}", data=data, verify=PORTAL_TLS, timeout=30
            )
            seen["form_without_xsrf"] = bare.status_code
            assert bare.status_code == 403, (bare.status_code, bare.text[:500])
            # where the app's own cookie is (Jupyter's: the origin's root), so it replaces it
            browser.cookies.set(name, token, domain=portal, path="/", secure=True)
            data[name] = token
        posted = browser.post(f"https://{portal}{action}", data=data, verify=PORTAL_TLS, timeout=30)
        seen["form"] = {"status": posted.status_code, "url": posted.url}
        assert posted.status_code == 200, (
            posted.status_code,
            [r.status_code for r in posted.history],
            posted.url,
            sorted((c.name, c.path) for c in browser.cookies),
            posted.text[-500:],
        )
        assert marker in posted.text, posted.text[:1000]
    for path in args.refused:
        elsewhere = browser.get(
            f"https://{portal}{path}", verify=PORTAL_TLS, allow_redirects=False, timeout=20
        )
        seen.setdefault("refused", {})[path] = elsewhere.status_code
        assert elsewhere.status_code in (403, 404), (path, elsewhere.status_code)
        assert args.marker is None or args.marker not in elsewhere.text, elsewhere.text[:500]

    # a login that is no cluster account: OOD's user-map failure page (mod_ood_proxy adds
    # ?redir=), not a server error
    stranger, back = login(portal, ca, "sub-mallory", page)
    assert back.status_code == 302, back.status_code
    refused = stranger.get(
        f"https://{portal}{page}", verify=PORTAL_TLS, allow_redirects=False, timeout=20
    )
    seen["mallory"] = {"status": refused.status_code, "location": refused.headers.get("Location")}
    assert refused.status_code == 302, refused.status_code
    location = refused.headers["Location"].split("?")[0]
    assert location.endswith("/public/slurm-app/no-cluster-account.html"), location
    explained = stranger.get(
        urljoin(f"https://{portal}/", refused.headers["Location"]), verify=PORTAL_TLS, timeout=20
    )
    assert explained.status_code == 200 and "No account on the" in explained.text

    # a user of another project with the account's very name: the group check refuses them
    outsider, back = login(portal, ca, f"sub-outsider-{account}", page)
    assert back.status_code == 302, back.status_code
    kept_out = outsider.get(
        f"https://{portal}{page}", verify=PORTAL_TLS, allow_redirects=False, timeout=20
    )
    seen["outsider"] = {"status": kept_out.status_code}
    assert kept_out.status_code == 401, (kept_out.status_code, kept_out.text[:500])
    assert "remote-user" not in kept_out.text
    assert args.marker is None or args.marker not in kept_out.text

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
        f"https://{portal}{page}", verify=PORTAL_TLS, allow_redirects=False, timeout=20
    )
    assert after.status_code == 302 and after.headers["Location"].startswith(issuer), after.headers
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
