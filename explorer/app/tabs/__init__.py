"""The page's tabs, in order: each a module with its title, id, ``create(page)`` (its widgets)
and ``wire(page)`` (its events). A new tab is its module and a line here."""
from . import build, inside, attention, activations, generate, train, knockout, patching  # noqa: I001,E501

TABS = (build, inside, attention, activations, generate, train, knockout, patching)  # in order
