"""The batched engine's target forward behind the verifier boundary (:mod:`.faults`).

A :class:`specdec_lite.engine.batch.BatchEngine` given a ``verifier`` asks it, at each step, for
the target's rows of every active sequence: one :class:`RowsRequest` carries each
sequence's id, context (prefix and drafted tokens), how many last rows it needs and at
which temperature; :func:`rows_step` answers it with one batched forward. Run by a
:class:`~specdec_lite.engine.faults.ProcessVerifier`, that forward happens in a worker process,
so a crash (even ``SIGKILL``) or a hang of the target costs the engine one step, which it
decodes plainly with its own copy of the target, never the server.

The worker keeps a batch cache per engine (:class:`~specdec_lite.models.batch_kv.GPTRows`, up to
:data:`MAX_ENGINES`, the least recently used dropped first), with a slot per sequence
id: a sequence that is new to it is prefilled from its context, one that is missing from
a request has finished and its slot is freed, and every other slot reads only the tokens
it has not cached (prefix sync). A restarted worker starts empty and prefills each
sequence once. The acceptance test stays in the engine, with each sequence's own
Generator, so no random state crosses the boundary.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..models.batch_kv import batch_rows

#: Batch caches a worker keeps, one per engine; the least recently used goes first.
MAX_ENGINES = 4

# In the worker process: engine key -> (row source, the sequence id in each slot).
_CACHES: OrderedDict = OrderedDict()


@dataclass(frozen=True)
class RowsRequest:
    """The target rows one engine step needs, by value (it travels to another process)."""

    engine: str  # which engine's sequences these are (one cache each in the worker)
    slots: int  # the engine's max_batch
    ids: tuple  # [B] each sequence's request id
    contexts: tuple  # [B] each prefix followed by its drafted tokens, int64 arrays
    n_rows: tuple  # [B] how many last rows each needs (its drafted tokens + 1)
    temperatures: tuple  # [B]


def rows_step(target: object, request: RowsRequest) -> list[np.ndarray]:
    """The rows [n_rows[b], V] after each ``request.contexts[b]``, in request order, from
    the worker's batch cache for ``request.engine`` (see the module docstring)."""
    source, slot_ids = _engine_cache(target, request.engine, request.slots)
    wanted = set(request.ids)
    for slot in reversed(range(len(slot_ids))):  # free finished sequences' slots
        if slot_ids[slot] not in wanted:
            source.remove(slot)  # the last slot moves into this one
            slot_ids[slot] = slot_ids[-1]
            slot_ids.pop()
    known = set(slot_ids)
    new = [(i, ctx) for i, ctx in zip(request.ids, request.contexts, strict=True)
           if i not in known]
    source.add([ctx for _, ctx in new])  # each new sequence prefilled once
    slot_ids += [i for i, _ in new]
    where = {i: b for b, i in enumerate(request.ids)}
    order = [where[i] for i in slot_ids]  # request index of each slot
    rows = source.rows([request.contexts[b] for b in order],
                       [request.n_rows[b] for b in order],
                       [request.temperatures[b] for b in order])
    out: list = [None] * len(order)
    for slot, b in enumerate(order):
        out[b] = rows[slot]
    return out


def _engine_cache(target: object, engine: str, slots: int) -> tuple[object, list]:
    cached = _CACHES.get(engine)
    if cached is None:
        cached = _CACHES[engine] = (batch_rows(target, "target", slots), [])
        while len(_CACHES) > MAX_ENGINES:
            _CACHES.popitem(last=False)
    _CACHES.move_to_end(engine)
    return cached


__all__ = ["MAX_ENGINES", "RowsRequest", "rows_step"]
