"""What a schedule recogniser returns for a graph that is not its mapping, and how its walk says so.

Every recogniser (:mod:`.rows`, :mod:`.reduce`, :mod:`.region`, :mod:`.carry`, :mod:`.indexed`) answers with its
record or a :class:`Rejected` whose reason the schedule prints for the part that stays serial. A walk over the graph
stops at the first thing it cannot place by raising :class:`NotRecognised`; :func:`run_walk` turns that into the
rejection.
"""
from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class Rejected:
    """Why a graph is not a recogniser's mapping (for the schedule's serial or other parts)."""

    reason: str


class NotRecognised(Exception):
    """Raised by a recogniser's walk with the reason the graph is not its mapping."""


def run_walk(walk):
    """``walk.run()``'s record, or the :class:`Rejected` its first :class:`NotRecognised` gives."""
    try:
        return walk.run()
    except NotRecognised as e:
        return Rejected(str(e))


def at(node) -> str:
    """`` at <the user's line>`` of ``node``, or nothing."""
    return f" at {node.loc!r}" if node is not None and node.loc is not None else ""
