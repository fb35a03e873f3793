"""Setting the page's widgets as a user does, for the browser tests (Playwright)."""
from playwright.sync_api import expect


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
