"""Figures (plotly) and HTML made from plain data: a ``Trace``, a ``ParameterCount``, next-token
candidates, activation curves, gradient summaries. Nothing here runs the model.

One module per theme: ``style`` (how every figure looks), ``labels`` (text on figures),
``model``, ``statistics``, ``attention``, ``lens``, ``generation``, ``curves`` and ``training``.
A figure of the models takes a list of one or two (traces, counts, lenses: model A first): two
add what a comparison shows (a panel per model, A − B), through the same code.
"""
