"""Debian's headless Chromium, driven by its chromedriver through Selenium: a page of the portal
opened with the portal session's cookie, waited on until it is drawn, kept as a screenshot.
The flags are the ones a closed network needs (nothing fetched in the background)."""

import json
import os
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# where the screenshots are kept for a person to look at
ARTIFACTS = Path(
    os.environ.get("SLURM_APP_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts")
)


def keep_timing(what: str, seconds: float | None) -> None:
    """A measured time, printed (pytest -s) and appended to ARTIFACTS/timings.jsonl: with
    xdist, as CI runs, a worker's prints are not shown, and the closing notes quote these."""
    print(f"{what}: {seconds} s")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / "timings.jsonl").open("a") as timings:
        timings.write(json.dumps({"what": what, "seconds": seconds}) + "\n")


def available() -> bool:
    return Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()


def screenshot(
    origin: str,
    cookies: dict[str, str],
    page: str,
    drawn: str,
    name: str,
    settle_seconds: float = 3.0,
    timeout: float = 60.0,
) -> tuple[Path, float]:
    """Open `origin` + `page` with `cookies` set for the origin, wait until the JavaScript
    expression `drawn` is true, let the page settle and keep a PNG in ARTIFACTS/`name`.
    Returns the file and the seconds from opening the page until `drawn`."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        for flag in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--ignore-certificate-errors",
            "--window-size=1280,900",
            f"--user-data-dir={profile}",
        ):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            # a cookie is set for the page's origin: any page of it first (a 404 is enough)
            driver.get(f"{origin}/favicon.ico")
            for cookie_name, value in cookies.items():
                driver.add_cookie(
                    {"name": cookie_name, "value": value, "path": "/", "secure": True}
                )
            started = time.monotonic()
            driver.get(origin + page)
            while not driver.execute_script(f"return Boolean({drawn});"):
                if time.monotonic() - started > timeout:
                    raise TimeoutError(f"{page}: not drawn after {timeout} s ({drawn})")
                time.sleep(0.25)
            seconds = time.monotonic() - started
            time.sleep(settle_seconds)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            path = ARTIFACTS / name
            driver.save_screenshot(str(path))
            return path, seconds
        finally:
            driver.quit()
