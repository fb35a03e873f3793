"""Figures (plotly) and HTML made from plain data: a ``Trace``, a ``ParameterCount``, next-token
candidates, activation curves, gradient summaries. Nothing here runs the model.

One module per theme: ``style`` (how every figure looks), ``labels`` (text on figures),
``model``, ``statistics``, ``attention``, ``lens``, ``generation`` and ``curves``.
"""
