"""One module per tab of the page. Each has ``create_ui()`` (its components, in page order,
returned as a namespace) and ``create_event_handlers(...)`` (its events, every one with an
explicit ``api_name`` or marked private); ``explorer.app.layout`` composes them."""
