"""Fixtures for the browser tests: the app launched in-process, Debian's Chromium, one page.

All the browser tests share one app and one browser (what a server sees: many tabs, one
process); each module has its own page (a session of its own), and its tests run in file order, like
a lecturer clicking through the tabs. Without /usr/bin/chromium they are skipped, except in CI
(CI=true), where a missing browser is a broken environment and fails loudly."""
import os

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}


def _chromium_or_skip():
    if os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    message = (f"{CHROMIUM} is missing: install Debian's chromium package "
               f"(apt-get install chromium) to run the browser tests")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def app_url():
    from explorer.app.server import create_demo, launch_options

    demo = create_demo()
    opts = launch_options()           # after the page: its labels' translations
    # The page's own theme and CSS (launch() arguments in Gradio 6), so that screenshots show
    # what a lecturer sees; any free port, loopback only.
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1",
                            server_port=None, theme=opts["theme"], css=opts["css"], js=opts["js"],
                            i18n=opts["i18n"], max_file_size=opts["max_file_size"],
                            ssr_mode=False)
    yield url
    demo.close()


@pytest.fixture(scope="session", autouse=True)
def _patient_expectations():
    """``expect`` waits 5 s by default; a real-size model on a busy 2-core machine can take
    longer to trace or draw. Waiting longer costs nothing when the page is quick."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)


@pytest.fixture(scope="session")
def browser():
    executable = _chromium_or_skip()
    from playwright.sync_api import sync_playwright  # the test module checked the import

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(browser, app_url):
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(20_000)
    pg = context.new_page()
    errors = []   # uncaught exceptions in the page (its own scripts, e.g. page.js)
    pg.on("pageerror", lambda error: errors.append(str(error)))
    pg.goto(app_url, wait_until="domcontentloaded")  # never "networkidle": SSE heartbeat
    yield pg
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


@pytest.fixture(scope="module")
def shots():
    """Folder for full-page screenshots (GPT_EXPLORER_SCREENSHOTS), or None: no screenshots."""
    folder = os.environ.get("GPT_EXPLORER_SCREENSHOTS")
    if folder:
        os.makedirs(folder, exist_ok=True)
    return folder
