"""A forward pass -> plain data: the ``Trace`` of a prompt (statistics at every probe point,
attention, next-token candidates, the logit lens) and the memory a trace needs."""
from .budget import longest_trace, trace_peak_bytes
from .data import ATTENTION_ALL_LAYERS_MAX_TOKENS, HIST_BINS, STAT_NAMES, PointStats, Trace
from .tracing import trace, with_attention_of_layer

__all__ = ["ATTENTION_ALL_LAYERS_MAX_TOKENS", "HIST_BINS", "STAT_NAMES", "PointStats", "Trace",
           "longest_trace", "trace", "trace_peak_bytes", "with_attention_of_layer"]
