"""Stages that keep state: what they expose, and how a loader's ``state_dict()`` carries it.

A stage (a work stage, a consumer-side stage, the pacer) that keeps something a resumed loader
must not lose is a :class:`StatefulStage`: it has a ``name`` and ``state_dict()`` /
``load_state_dict()``, as torchdata's nodes do. :meth:`BatchLoader.state_dict
<petastream.pipeline.loader.BatchLoader.state_dict>` gathers their states under
``state["stages"]``, keyed by name (the key is absent when no stage keeps state), and
``load_state_dict`` hands each back; a stage the state has nothing for (a state saved before it
existed, or by a loader without it) gets ``{}`` and starts from its defaults. A stage's state
is JSON (it travels in the loader's) and is what it holds when ``state_dict()`` is called.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = ["StatefulStage", "gather_states", "restore_states"]

log = logging.getLogger("petastream.pipeline")


@runtime_checkable
class StatefulStage(Protocol):
    """A stage whose state resumes with the loader's (see the module doc)."""

    #: Its key in ``state["stages"]``: one per loader.
    name: str

    def state_dict(self) -> dict[str, Any]:
        """Its state, JSON-serialisable."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take ``state`` (from :meth:`state_dict`; ``{}``, or keys missing: the defaults)."""
        ...


def _by_name(stages: Iterable[Any]) -> dict[str, StatefulStage]:
    found: dict[str, StatefulStage] = {}
    for stage in stages:
        if not isinstance(stage, StatefulStage):
            continue
        if not isinstance(stage.name, str) or not stage.name:
            raise InvalidArgumentError(f"stage {stage!r} keeps state but its name is {stage.name!r}: "
                                       "give it a non-empty str name (its key in state_dict()['stages'])")
        if stage.name in found:
            raise InvalidArgumentError(
                f"two stages keep state under the name {stage.name!r} ({found[stage.name]!r} and {stage!r}); "
                "give each its own name, or their states would overwrite each other in state_dict()")
        found[stage.name] = stage
    return found


def gather_states(stages: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """``{name: state}`` of the :class:`StatefulStage` among ``stages`` (others keep none)."""
    return {name: stage.state_dict() for name, stage in _by_name(stages).items()}


def restore_states(stages: Iterable[Any], states: Any) -> None:
    """Hand each :class:`StatefulStage` among ``stages`` its state from ``states`` (a saved
    ``state["stages"]``; None: a state saved without any), ``{}`` where there is none."""
    if states is None:
        states = {}
    if not isinstance(states, Mapping):
        raise InvalidArgumentTypeError(
            f"state['stages'] must be a dict of stage name -> state (from state_dict()), got {type(states).__name__}")
    mine = _by_name(stages)
    for name, stage in mine.items():
        saved = states.get(name, {})
        if not isinstance(saved, Mapping):
            raise InvalidArgumentTypeError(
                f"state['stages'][{name!r}] must be a dict (the stage's state_dict()), got {type(saved).__name__}")
        stage.load_state_dict(saved)
    extra = sorted(set(states) - set(mine))
    if extra:  # e.g. a state saved with pacing, resumed where nothing bounds the cache
        log.info("state has the state of stages %s, which this loader does not have: not resumed", extra)
