"""The Gradio app: the server, the layout, one module per tab, the figures, and static files.
Nothing else in the explorer imports this wing."""
