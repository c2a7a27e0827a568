"""A real browser for the pages people open: headless Chromium (Debian's `chromium` and `chromium-driver`,
which .ci/run installs) driven by Selenium, against the live server. It records what the page's console
says and every Content-Security-Policy violation, from before the page's first script runs."""

import shutil
from dataclasses import dataclass

import pytest

from tests.markets.test_traces import issued_tokens  # noqa: F401  (fixture)
from tests.markets.test_worker_crash import short_timeouts  # noqa: F401  (fixture)

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)
# Registered on every new document before its own scripts: collects the policy violations the page meets.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__cspViolations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' ' + (e.sourceFile || ''));
});
"""


def chromium_paths() -> tuple[str | None, str | None]:
    return (shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver"))


@dataclass
class Browser:
    driver: object
    base: str

    def open(self, path: str):
        self.driver.get(self.base + path)
        return self.driver

    def problems(self) -> list[str]:
        """Console errors and CSP violations since the last call (the browser log is drained by reading it)."""
        logs = [
            f"console {e['level']}: {e['message']}"
            for e in self.driver.get_log("browser")
            if e["level"] in ("SEVERE", "ERROR")
        ]
        violations = self.driver.execute_script("return window.__cspViolations || [];")
        return logs + [f"CSP violation: {v}" for v in violations]

    def log_in(self, username: str, password: str) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.ui import WebDriverWait

        driver = self.open("/admin/login/?next=/admin/")
        assert self.problems() == [], "the login page"
        driver.find_element(By.NAME, "username").send_keys(username)
        driver.find_element(By.NAME, "password").send_keys(password)
        driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        WebDriverWait(driver, 30).until(
            expected_conditions.presence_of_element_located((By.ID, "user-tools")), "the admin login did not succeed"
        )


@pytest.fixture
def browser(live_server, tmp_path):
    """Headless Chromium on the live server. Skipped only when no Chromium can be found on this machine."""
    binary, driver_path = chromium_paths()
    if not binary or not driver_path:
        pytest.skip(
            "Chromium and chromedriver are not installed (apt-get install chromium chromium-driver; "
            ".ci/run installs them before the suite)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        driver.set_page_load_timeout(60)
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_VIOLATIONS})
        yield Browser(driver=driver, base=live_server.url)
    finally:
        driver.quit()


@pytest.fixture
def operator(admin_user, browser) -> Browser:
    """The browser, signed in to the admin as a superuser through the login form."""
    browser.log_in("admin", "password")
    return browser
