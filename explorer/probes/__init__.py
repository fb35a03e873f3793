"""A forward pass -> plain data: the ``Trace`` of a prompt (statistics at every probe point,
attention, next-token candidates, the logit lens) and the memory a trace needs; interventions
(``intervening``: a shared model run with parts knocked out, for this context only) and the
map of which parts matter (``importance``)."""
from .budget import importance_peak_bytes, longest_importance, longest_trace, trace_peak_bytes
from .data import ATTENTION_ALL_LAYERS_MAX_TOKENS, HIST_BINS, STAT_NAMES, PointStats, Trace
from .knockouts import PARTS, Importance, importance
from .intervening import intervened_steps, intervening
from .interventions import KINDS, Intervention, Interventions
from .tracing import trace, with_attention_of_layer

__all__ = ["ATTENTION_ALL_LAYERS_MAX_TOKENS", "HIST_BINS", "KINDS", "PARTS", "STAT_NAMES",
           "Importance", "Intervention", "Interventions", "PointStats", "Trace", "importance",
           "importance_peak_bytes", "intervened_steps", "intervening", "longest_importance",
           "longest_trace", "trace", "trace_peak_bytes", "with_attention_of_layer"]
