"""What a kept result really holds in memory, for the limits of the shared caches.

Counting only a result's arrays misses what holds them: a trace's many small arrays, dicts and
strings held several times what their ``nbytes`` said, so a cache "of 16 MB" grew without
bound. ``deep_nbytes`` walks everything reachable from the result, once each, as the garbage
collector sees it. Code (modules, classes, functions) and models are shared with the whole
server and not counted; objects that many results share (a plotting library's validators) are
counted in each, which errs on the side of keeping less."""
from __future__ import annotations

import gc
import sys
import types

import numpy as np
import torch

_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.CodeType, torch.nn.Module)


def deep_nbytes(obj) -> int:
    """Bytes of ``obj`` and of everything it reaches (an array's or a tensor's data included)."""
    seen: set[int] = set()
    storages: set[int] = set()
    todo = [obj]
    total = 0
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, _SHARED):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, np.ndarray) and item.base is not None:
            todo.append(item.base)    # a view keeps its whole base alive (not a gc referent)
        elif isinstance(item, torch.Tensor):      # getsizeof counts only the Python object
            storage = item.untyped_storage()
            if storage.data_ptr() not in storages:
                storages.add(storage.data_ptr())
                total += storage.nbytes()
        todo.extend(gc.get_referents(item))
    return total
