"""The page's tabs, in order: each a module with its title, id, ``create(page)`` (its widgets)
and ``wire(page)`` (its events). A new tab is its module and a line here."""
from . import build, inside, attention, activations, generate, train, knockout  # noqa: I001

TABS = (build, inside, attention, activations, generate, train, knockout)   # in order
