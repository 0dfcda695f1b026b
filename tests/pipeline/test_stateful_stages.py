"""Stages that keep state (petastream.pipeline.stateful): ``state_dict()`` carries them under
``"stages"`` by name, a resumed loader hands them back, and states saved without them load."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import petastream
from petastream.errors import InvalidArgumentError
from petastream.pipeline import BatchLoader, MappedRun
from petastream.pipeline.stateful import StatefulStage
from tests.arrow_source import arrow_source
from tests.mds.test_cache import _write
from tests.pipeline.test_pacing import _Peer, _Peers


class Numbering:
    """Numbers the batches it hands out, across passes (its state: the next number)."""

    def __init__(self, name="numbering"):
        self.name, self.next = name, 0

    def __call__(self, run):
        def number(batch):
            batch = dict(batch, n=self.next)
            self.next += 1
            return batch
        return MappedRun(run, number)

    def state_dict(self):
        return {"next": self.next}

    def load_state_dict(self, state):
        self.next = int(state.get("next", 0))


def _loader(stage, **kw):
    source = arrow_source({"id": np.arange(100)}, [30, 30, 40])
    return BatchLoader(source, 10, shuffle=True, seed=5, num_workers=1, stages=[stage], **kw)


def _read(loader, steps=None):
    out = []
    for k, batch in enumerate(loader, 1):
        out.append((batch["n"], batch["id"].tolist()))
        if k == steps:
            break
    return out


def test_a_stateful_stage_resumes_with_the_loader():
    whole = _read(_loader(Numbering()))
    first = _loader(Numbering())
    head = _read(first, steps=4)
    state = json.loads(json.dumps(first.state_dict()))  # JSON all the way
    assert state["stages"] == {"numbering": {"next": 4}}
    resumed = _loader(Numbering())
    resumed.load_state_dict(state)
    assert resumed.stages[0].next == 4
    assert head + _read(resumed) == whole  # numbers and rows as if never interrupted


def test_a_state_saved_without_stage_states_loads_with_their_defaults():
    first = _loader(Numbering())
    _read(first, steps=3)
    old = {k: v for k, v in first.state_dict().items() if k != "stages"}  # as saved before stages kept state
    stage = Numbering()
    stage.next = 99  # whatever it held is replaced by its defaults
    resumed = _loader(stage)
    resumed.load_state_dict(old)
    rest = _read(resumed)
    assert [n for n, _ in rest] == list(range(7))
    assert sorted(i for _, ids in rest for i in ids) == sorted(set(range(100)) - {
        i for _, ids in _read(_loader(Numbering()), steps=3) for i in ids})


def test_stages_without_state_add_nothing_and_unknown_states_are_logged(caplog):
    plain = BatchLoader(arrow_source({"id": np.arange(20)}, [20]), 5, stages=[lambda run: run])
    assert "stages" not in plain.state_dict()
    state = dict(plain.state_dict(), stages={"gone": {"x": 1}})
    with caplog.at_level(logging.INFO, logger="petastream.pipeline"):
        plain.load_state_dict(state)
    assert "['gone']" in caplog.text and "not resumed" in caplog.text
    with pytest.raises(InvalidArgumentError, match="two stages keep state under the name 'numbering'"):
        BatchLoader(arrow_source({"id": np.arange(20)}, [20]), 5, stages=[Numbering(), Numbering()]).state_dict()
    assert isinstance(Numbering(), StatefulStage) and not isinstance(lambda run: run, StatefulStage)


@pytest.mark.timeout(120)
def test_the_pacer_is_a_stateful_stage_and_resumes(tmp_path):
    url = _write(str(tmp_path / "ds"), n=2000, size_limit=20_000)  # zstd: read through the cache

    def loader():
        ds = petastream.open(url, cache_dir=str(tmp_path / "c"), cache_limit="1gb")
        made = BatchLoader(ds, 50, shuffle=True, seed=1, num_workers=1, window=200, block_size=200)
        assert made.pacer is not None and isinstance(made.pacer, StatefulStage)
        made.pacer.poll = 0
        return made

    def ids(batches):
        return [i for b in batches for i in b["id"].tolist()]

    whole = ids(loader())
    first = loader()
    first.pacer.peers = _Peers([[], [_Peer(-5)], []])  # held back once, at its first window
    head = []
    for k, batch in enumerate(first, 1):
        head.append(batch)
        if k == 10:
            break
    state = json.loads(json.dumps(first.state_dict()))
    assert state["stages"]["pacer"]["waits"] == 1 and state["stages"]["pacer"]["waited_s"] >= 0
    resumed = loader()
    resumed.load_state_dict(state)
    assert resumed.pacer.state_dict() == state["stages"]["pacer"]
    resumed.pacer.peers = _Peers([[_Peer(-5)], []])  # held back once more: the count goes on
    tail = list(resumed)
    assert resumed.pacer.waits == 2
    assert ids(head) + ids(tail) == whole
    fresh = loader()
    fresh.load_state_dict({k: v for k, v in state.items() if k != "stages"})  # an older state
    assert fresh.pacer.state_dict() == {"waits": 0, "waited_s": 0.0}
