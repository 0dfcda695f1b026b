"""The iteration contract of every loader, property-based (see petastream.pipeline.driver).

A model of the contract (epoch, batches done, whether the position was set explicitly) runs
beside a real loader through random sequences of: full iterations, iterations broken off after
k batches, set_epoch, and state_dict -> a new loader (other worker count or type) ->
load_state_dict. After every step, the batches the loader yielded must be exactly the model's
expected batches: the oracle is the planner's own per-epoch batch list, and a separate test
checks that every epoch the oracle gives holds every sample exactly once.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from petastream.mds.writer import write_mds
from petastream.pipeline import BatchLoader
from petastream.source import is_source
from petastream.stream import StreamPlanner
from tests.arrow_source import arrow_source

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
N = 230  # rows, over shards of uneven size (one empty)


def _rows():
    return {"id": np.arange(N), "x": np.arange(N, dtype=np.float32)}


@pytest.fixture(scope="module")
def mds_url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("contract") / "ds")
    write_mds(_rows(), path, size_limit=700)
    return path


@pytest.fixture(scope="module", params=["mds", "arrow"])
def url(request, mds_url):
    """What every loader kind reads: the MDS dataset's URL, or a second Source (an in-memory
    Arrow table, shards of uneven size with an empty one): the pipeline sees only the protocol."""
    if request.param == "mds":
        return mds_url
    source = arrow_source(_rows(), [61, 0, 100, 9, 60])
    assert is_source(source)
    return source


# -- the loaders under test: each kind builds a loader and iterates it, giving id lists ------

def _ids(batch) -> list[int]:
    col = batch["id"] if isinstance(batch, dict) else batch.id
    return [int(i) for i in np.asarray(col)]


class Kind:
    """Build one kind of loader and run one (possibly broken-off) iteration of it."""

    stateful = True
    epochs_settable = True

    def __init__(self, name: str):
        self.name = name

    def state(self, loader):
        return loader.state_dict()

    def build(self, url, cfg, workers):
        from petastream.torch import TorchLoader

        wt = "process" if self.name == "process" else "thread"
        cls = BatchLoader if self.name == "numpy" else TorchLoader
        extra = {} if cls is BatchLoader else {"worker_type": wt}
        return cls(url, cfg["batch_size"], shuffle=cfg["shuffle"], seed=cfg["seed"], num_epochs=cfg["num_epochs"],
                   drop_last=cfg["drop_last"], rank=cfg["rank"], world_size=cfg["world_size"],
                   num_workers=workers, block_size=16, window=40, **extra)

    def planner(self, loader):
        return loader.planner

    def iterate(self, loader, limit):
        out = []
        for batch in loader:
            out.append(_ids(batch))
            if limit is not None and len(out) == limit:
                break
        return out


class TFKind(Kind):
    per_call = 1  # plain state_dict() is exact with one batch per hand-over
    worker_type = "thread"

    def build(self, url, cfg, workers):
        from petastream.tf import TFLoader

        loader = TFLoader(url, cfg["batch_size"], shuffle=cfg["shuffle"], seed=cfg["seed"],
                          num_epochs=cfg["num_epochs"], drop_last=cfg["drop_last"], rank=cfg["rank"],
                          world_size=cfg["world_size"], num_workers=workers, block_size=16, window=40,
                          batches_per_call=self.per_call, worker_type=self.worker_type)
        loader.ds = None  # built at the first iteration: after any load_state_dict, as users do
        return loader

    def iterate(self, loader, limit):
        if loader.ds is None:
            loader.ds = loader.as_dataset()
        out = []
        it = iter(loader.ds)
        for batch in it:
            out.append(_ids(batch))
            if limit is not None and len(out) == limit:
                break
        del it
        loader.taken = len(out)
        return out

    def state(self, loader):
        taken = getattr(loader, "taken", None)
        return loader.state_dict() if taken is None or self.per_call == 1 else loader.state_dict(steps=taken)


class TFGroupsKind(TFKind):
    """Batch groups (several batches per hand-over): checkpoints from the loop's own count."""

    per_call = 5


class TFProcessKind(TFGroupsKind):
    """Batch groups decoded in worker processes (shared-memory hand-over, stale items of a
    broken-off pass skipped)."""

    worker_type = "process"
    built: list = []

    def build(self, url, cfg, workers):
        for old in self.built:  # a loader the check replaced: stop its workers now, not at gc
            old.close()
        self.built[:] = [super().build(url, cfg, workers)]
        return self.built[0]


class IterableKind(Kind):
    """MDSIterableDataset in a user's DataLoader: one epoch per iteration, no state_dict."""

    stateful = False

    def build(self, url, cfg, workers):
        import torch.utils.data

        from petastream.torch import MDSIterableDataset

        ds = MDSIterableDataset(url, cfg["batch_size"], shuffle=cfg["shuffle"], seed=cfg["seed"],
                                drop_last=cfg["drop_last"], rank=cfg["rank"], world_size=cfg["world_size"],
                                block_size=16, window=40)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=min(workers, 2))
        dl.set_epoch = ds.set_epoch
        return dl

    def planner(self, loader):
        return loader.dataset._loader.planner


class CompatKind(Kind):
    """petastream.compat's Petastorm DataLoader over make_batch_reader: iterate only."""

    stateful = False
    epochs_settable = False

    def build(self, url, cfg, workers):
        from petastream.compat.pytorch import DataLoader
        from petastream.compat.reader import make_batch_reader

        shard = {} if cfg["world_size"] == 1 else {"cur_shard": cfg["rank"], "shard_count": cfg["world_size"]}
        reader = make_batch_reader(url, num_epochs=cfg["num_epochs"], seed=cfg["seed"], workers_count=workers,
                                   shuffle_row_groups=cfg["shuffle"], **shard)
        return DataLoader(reader, batch_size=cfg["batch_size"], shuffling_queue_capacity=40)

    def planner(self, loader):
        return loader._torch_loader().planner


KINDS = {k.name: k for k in (Kind("numpy"), Kind("thread"), Kind("process"), TFKind("tf"), TFGroupsKind("tf_groups"),
                             TFProcessKind("tf_processes"), IterableKind("iterable"), CompatKind("compat"))}


# -- the model -------------------------------------------------------------------------------

def oracle(planner, epoch: int) -> list[list[int]]:
    """Epoch ``epoch``'s batches for the planner's rank, from the planner alone."""
    p = StreamPlanner(planner.shard_sizes, planner.batch_size, shuffle=planner.shuffle, seed=planner.seed,
                      block_size=planner.block_size, window=planner.window, world_size=planner.world_size,
                      rank=planner.rank, drop_last=planner.drop_last)
    p.start_epoch(epoch)
    plan = p.plan()
    return [plan.batch(t).tolist() for t in range(plan.num_batches)]


class Model:
    def __init__(self, planner, num_epochs):
        self.planner, self.num_epochs = planner, num_epochs
        self.epoch, self.done, self.fresh = 0, 0, True
        self.per_epoch = planner.batches_per_epoch

    def iterate(self, limit):
        if not self.fresh or self.done == self.per_epoch:
            self.epoch, self.done = self.epoch + 1, 0
        self.fresh = False
        expected, passes = [], 0
        while self.num_epochs is None or passes < self.num_epochs:
            if limit is not None and len(expected) == limit:
                return expected  # the loader moves to the next epoch only when asked for a batch
            if passes:
                self.epoch, self.done = self.epoch + 1, 0
            for batch in oracle(self.planner, self.epoch)[self.done:]:
                if limit is not None and len(expected) == limit:
                    return expected
                expected.append(batch)
                self.done += 1
            passes += 1
        return expected

    def set_epoch(self, e):
        if not (self.fresh and e == self.epoch):
            self.epoch, self.done = e, 0
        self.fresh = True


ops = st.lists(st.one_of(
    st.tuples(st.just("iterate"), st.none() | st.integers(1, 6)),
    st.tuples(st.just("set_epoch"), st.integers(0, 4)),
    st.tuples(st.just("reload"), st.sampled_from([1, 2, 4]), st.sampled_from(["thread", "process"])),
), min_size=1, max_size=6)

configs = st.fixed_dictionaries({
    "batch_size": st.integers(7, 60), "shuffle": st.booleans(), "seed": st.integers(0, 3),
    "drop_last": st.booleans(), "num_epochs": st.sampled_from([1, 3, None]),
    "world_size": st.integers(1, 3), "rank_frac": st.floats(0, 0.99), "workers": st.sampled_from([1, 2, 4]),
})


def _check(kind: Kind, url, cfg, steps):
    cfg = {**cfg, "rank": int(cfg["rank_frac"] * cfg["world_size"])}
    if isinstance(kind, IterableKind):
        cfg["num_epochs"] = 1  # a DataLoader iteration is one epoch
    if cfg["batch_size"] * cfg["world_size"] > N and cfg["drop_last"]:
        cfg["drop_last"] = False  # zero-batch epochs have their own test
    loader = kind.build(url, cfg, cfg["workers"])
    model = Model(kind.planner(loader), cfg["num_epochs"])
    if kind.stateful or isinstance(kind, IterableKind):
        assert (len(loader) if cfg["num_epochs"] is not None else model.per_epoch) == model.per_epoch * (
            cfg["num_epochs"] or 1)
    for op in steps:
        if op[0] == "iterate":
            limit = op[1]
            if cfg["num_epochs"] is None and limit is None:
                limit = model.per_epoch + 2  # forever: a bounded take across an epoch boundary
            got = kind.iterate(loader, limit)
            assert got == model.iterate(limit), (op, cfg)
        elif op[0] == "set_epoch" and kind.epochs_settable:
            loader.set_epoch(op[1])
            loader.taken = None  # nothing taken from the epoch just set
            model.set_epoch(op[1])
        elif op[0] == "reload" and kind.stateful:
            state = kind.state(loader)
            loader = KINDS[op[2] if kind.name in ("thread", "process") else kind.name].build(url, cfg, op[1])
            loader.load_state_dict(state)
            model.fresh = True


_fast = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
_slow = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


@_fast
@given(cfg=configs, steps=ops)
def test_contract_numpy_and_threads(url, cfg, steps):
    _check(KINDS["numpy" if cfg["seed"] % 2 else "thread"], url, cfg, steps)


@_slow
@given(cfg=configs, steps=ops)
def test_contract_processes(url, cfg, steps):
    _check(KINDS["process"], url, cfg, steps)


@_slow
@given(cfg=configs, steps=ops)
def test_contract_tf(url, cfg, steps):
    _check(KINDS["tf"], url, cfg, steps)


@_slow
@given(cfg=configs, steps=ops)
def test_contract_tf_batch_groups(url, cfg, steps):
    _check(KINDS["tf_groups"], url, cfg, steps)


@_slow
@given(cfg=configs, steps=ops)
def test_contract_tf_processes(url, cfg, steps):
    _check(KINDS["tf_processes"], url, cfg, steps)
    KINDS["tf_processes"].built[0].close()


@_slow
@given(cfg=configs, steps=ops)
def test_contract_iterable_dataset(url, cfg, steps):
    _check(KINDS["iterable"], url, cfg, steps)


@_slow
@given(cfg=configs, steps=ops)
def test_contract_compat(mds_url, cfg, steps):
    # Petastorm's make_batch_reader takes a dataset URL, not a Source object
    _check(KINDS["compat"], mds_url, cfg, steps)


@settings(max_examples=30, deadline=None)
@given(batch_size=st.integers(1, 80), world_size=st.integers(1, 3), drop_last=st.booleans(),
       shuffle=st.booleans(), epoch=st.integers(0, 5))
def test_oracle_epochs_hold_every_sample_exactly_once(url, batch_size, world_size, drop_last, shuffle, epoch):
    loader = BatchLoader(url, batch_size, shuffle=shuffle, seed=1, block_size=16, window=40)
    ids = []
    for rank in range(world_size):
        p = StreamPlanner(loader.dataset.shard_sizes, batch_size, shuffle=shuffle, seed=1, block_size=16,
                          window=40, world_size=world_size, rank=rank, drop_last=drop_last)
        ids += [i for b in oracle(p, epoch) for i in b]
    gbs = batch_size * world_size
    if drop_last:
        assert len(ids) == N // gbs * gbs and len(set(ids)) == len(ids)
    else:
        assert set(ids) == set(range(N)) and len(ids) - N < gbs  # padding evens the ranks out
