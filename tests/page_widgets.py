"""Playwright for the browser tests, and setting the page's widgets as a user does. Without
playwright a browser test module is skipped, except in CI (CI=true), where it is a broken
environment and fails loudly (the same rule as a missing browser: browser/conftest.py)."""
import os

import pytest

try:
    from playwright.sync_api import Error as PlaywrightError  # noqa: F401 - for the tests
    from playwright.sync_api import expect
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("playwright is not installed (pip install -r requirements-dev.txt)",
                allow_module_level=True)


def tab(page, name):
    page.get_by_role("tab", name=name, exact=True).click()
    expect(page.get_by_role("tab", name=name, exact=True)).to_have_attribute(
        "aria-selected", "true")


def choose(page, elem_id, value):
    """Pick a value of a gr.Dropdown."""
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option", name=value, exact=True).click()
    expect(page.locator(f"#{elem_id} input")).to_have_value(value)


def set_number(page, elem_id, value):
    box = page.locator(f"#{elem_id} input")
    box.fill(str(value))
    box.press("Tab")  # gr.Number sends its value on blur
    expect(box).to_have_value(str(value))


def set_slider(page, elem_id, value):
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")
    expect(page.locator(f"#{elem_id} input[type=range]")).to_have_value(str(value))


# Every toast the page shows, recorded as it appears (an error toast may vanish by itself):
# an init script, page.add_init_script(f"({RECORD_TOASTS})()").
RECORD_TOASTS = """() => {
  window.__toasts = [];
  new MutationObserver(() => {
    for (const t of document.querySelectorAll('[data-testid=toast-body]')) {
      if (t.__seen) continue;
      t.__seen = true;
      const kind = ['error', 'warning', 'info', 'success'].find(k => t.classList.contains(k));
      window.__toasts.push({kind: kind || 'unknown', text: t.innerText});
    }
  }).observe(document, {subtree: true, childList: true});
}"""


def toasts(page, kind=None):
    """The texts of the toasts RECORD_TOASTS saw, of one kind ("error", "warning") or all."""
    return [t["text"] for t in page.evaluate("() => window.__toasts")
            if kind is None or t["kind"] == kind]
