"""The native TensorFlow adapter: exactly once, order, epochs, sharding, resumption, types."""

from __future__ import annotations

import gc
import os
import time
from decimal import Decimal

import numpy as np
import pytest
import tensorflow as tf

import petastream.tf as ptf
from petastream.errors import InvalidArgumentError
from petastream.mds.writer import write_mds
from petastream.tf import NonUniformArrayError, TFLoader
from tests.threads import petastream_threads, settles_to

pytestmark = pytest.mark.tf
N = 1000
BS = 64


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tf") / "ds")
    write_mds({
        "id": np.arange(N), "x": np.arange(N * 3, dtype=np.float32).reshape(N, 3),
        "label": (np.arange(N) % 2).astype(np.int64),
    }, path, size_limit=2048, compression="zstd")
    return path


@pytest.fixture(scope="module")
def typed_url(tmp_path_factory):
    """Every kind of column the adapter maps, 40 rows."""
    n = 40
    path = str(tmp_path_factory.mktemp("tf-types") / "ds")
    data = {
        "id": np.arange(n),
        "u8": np.arange(n, dtype=np.uint8), "u16": np.arange(n, dtype=np.uint16) + 60000,
        "u32": np.arange(n, dtype=np.uint32) + 4_000_000_000, "u64": np.arange(n, dtype=np.uint64),
        "f16": np.ones(n, np.float16), "flag": np.arange(n) % 2 == 0,
        "s": np.array([f"s{i}é" for i in range(n)], dtype=object),
        "b": np.array([bytes([i]) * (i % 3) for i in range(n)], dtype=object),
        "dec": np.array([Decimal(f"{i}.25") for i in range(n)], dtype=object),
        "si": np.arange(n), "sf": np.arange(n) * 0.5,
        "img": np.arange(n * 6, dtype=np.int16).reshape(n, 2, 3),
        "tags": np.array([np.arange(i % 4 + 1, dtype=np.float32) for i in range(n)], dtype=object),
        "meta": np.array([{"i": i} for i in range(n)], dtype=object),
    }
    columns = {"id": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
               "f16": "float16", "flag": "uint8", "s": "str", "b": "bytes", "dec": "str_decimal",
               "si": "str_int", "sf": "str_float", "img": "ndarray:int16:2,3",
               "tags": "ndarray:float32", "meta": "json"}
    write_mds(data, path, columns=columns, size_limit=1024)
    return path


TYPED = ["id", "u8", "u16", "u32", "u64", "f16", "flag", "s", "b", "dec", "si", "sf", "img", "tags"]


def _ids(ds) -> list[int]:
    return [int(i) for b in ds for i in b["id"].numpy()]


# -- order ----------------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [1, 3])
def test_every_sample_once_per_epoch_and_a_new_order_each_epoch(url, workers):
    ds = ptf.dataset(url, BS, shuffle=True, seed=1, num_workers=workers, num_epochs=2)
    batches = list(ds)
    ids = [int(i) for b in batches for i in b["id"].numpy()]
    assert sorted(ids[:N]) == list(range(N)) and sorted(ids[N:]) == list(range(N))
    assert ids[:N] != ids[N:]
    assert [len(b["id"]) for b in batches] == ([BS] * (N // BS) + [N % BS]) * 2


def test_same_seed_same_order_and_sequential_without_shuffle(url):
    a = _ids(ptf.dataset(url, 100, shuffle=True, seed=5, num_workers=1))
    b = _ids(ptf.dataset(url, 100, shuffle=True, seed=5, num_workers=4))
    assert a == b and a != list(range(N))
    assert a != _ids(ptf.dataset(url, 100, shuffle=True, seed=6))
    assert _ids(ptf.dataset(url, 100)) == list(range(N))


def test_iterating_again_is_the_next_epoch(url):
    """Keras re-iterates the dataset every epoch: each pass is a whole new epoch."""
    loader = TFLoader(url, BS, shuffle=True, seed=2)
    ds = loader.as_dataset()
    first, second = _ids(ds), _ids(ds)
    assert sorted(first) == sorted(second) == list(range(N)) and first != second
    assert loader.state_dict()["epoch"] == 1


def test_infinite_epochs(url):
    ds = ptf.dataset(url, 300, num_epochs=None)
    sizes = [len(b["id"]) for b in ds.take(9)]
    assert sizes == [300, 300, 300, 100] * 2 + [300]


# -- sharding -------------------------------------------------------------------------------

@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_split_every_epoch_evenly(url, drop_last):
    world = 3
    loaders = [TFLoader(url, BS, shuffle=True, seed=4, rank=r, world_size=world, drop_last=drop_last)
               for r in range(world)]
    per_rank = [_ids(ld.as_dataset()) for ld in loaders]
    counts = {len(ids) for ids in per_rank}
    assert len(counts) == 1  # the same number of full batches on every rank
    batches = counts.pop() // BS
    assert all(len(ld) == batches for ld in loaders)
    everything = [i for ids in per_rank for i in ids]
    if drop_last:  # disjoint; the dropped tail is less than one global batch
        assert len(set(everything)) == len(everything) and N - len(everything) < BS * world
    else:  # complete; the last global batch wraps around (padding) so no rank waits
        assert set(everything) == set(range(N)) and len(everything) == -(-N // (BS * world)) * BS * world
    assert loaders[0].element_spec["id"].shape == (BS,)  # every batch is full: static batch dim
    options = loaders[0].as_dataset().options().experimental_distribute  # no second sharding
    assert options.auto_shard_policy == tf.data.experimental.AutoShardPolicy.OFF


def test_input_context(url):
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2)
    a = _ids(ptf.dataset(url, BS, shuffle=True, seed=3, input_context=ctx))
    assert a == _ids(ptf.dataset(url, BS, shuffle=True, seed=3, rank=1, world_size=2))
    with pytest.raises(ValueError, match="either input_context or rank/world_size"):
        TFLoader(url, BS, input_context=ctx, rank=0)
    with pytest.raises(TypeError, match="input_context must be a tf.distribute.InputContext"):
        TFLoader(url, BS, input_context=object())


def test_distribute_datasets_from_function(url):
    strategy = tf.distribute.get_strategy()  # the default strategy: one pipeline, one replica

    def dataset_fn(ctx):
        return ptf.dataset(url, ctx.get_per_replica_batch_size(BS), input_context=ctx)

    dist = strategy.distribute_datasets_from_function(dataset_fn)
    assert sorted(int(i) for b in dist for i in b["id"].numpy()) == list(range(N))


# -- resumption -----------------------------------------------------------------------------

@pytest.mark.parametrize("workers_after", [1, 2, 5])
def test_resume_mid_epoch_loses_and_repeats_nothing(url, workers_after):
    first = TFLoader(url, 50, shuffle=True, seed=3, num_workers=2, batches_per_call=1)
    it = iter(first.as_dataset())
    seen = [int(i) for _ in range(7) for i in next(it)["id"].numpy()]
    time.sleep(0.05)  # nothing may read ahead of the loop meanwhile
    state = first.state_dict()
    assert state["samples_consumed"] == 7 * 50
    second = TFLoader(url, 50, shuffle=True, seed=3, num_workers=workers_after)
    second.load_state_dict(state)
    rest = _ids(second.as_dataset())
    assert sorted(seen + rest) == list(range(N))
    assert seen + rest == _ids(ptf.dataset(url, 50, shuffle=True, seed=3))


def test_state_counts_what_a_downstream_prefetch_took(url):
    """A batch counts as consumed when handed to TensorFlow, read ahead or not."""
    full = _ids(ptf.dataset(url, 50, shuffle=True, seed=8))
    loader = TFLoader(url, 50, shuffle=True, seed=8, batches_per_call=1)
    it = iter(loader.as_dataset().prefetch(3))
    seen = [int(i) for _ in range(4) for i in next(it)["id"].numpy()]
    time.sleep(0.2)
    state = loader.state_dict()
    handed = state["samples_consumed"]
    assert 4 * 50 < handed <= (4 + 3 + 1) * 50 and seen == full[:200]
    resumed = TFLoader(url, 50, shuffle=True, seed=8)
    resumed.load_state_dict(state)
    assert _ids(resumed.as_dataset()) == full[handed:]
    exact = loader.state_dict(steps=4)  # what the loop took, whatever was read ahead
    assert exact["samples_consumed"] == 200
    resumed.load_state_dict(exact)
    assert _ids(resumed.as_dataset()) == full[200:]
    with pytest.raises(ValueError, match=r"steps must be an int in \[0, "):
        loader.state_dict(steps=99)


def test_steps_across_epochs_of_one_iteration(url):
    loader = TFLoader(url, 300, shuffle=True, seed=9, num_epochs=3)
    taken = list(loader.as_dataset().take(6))  # 4 batches per epoch: 1.5 epochs
    assert len(taken) == 6
    assert {k: loader.state_dict(steps=6)[k] for k in ("epoch", "samples_consumed")} == {
        "epoch": 1, "samples_consumed": 600}
    assert loader.state_dict(steps=4)["samples_consumed"] == N  # epoch 0 complete


def test_an_abandoned_iteration_is_followed_by_a_whole_new_epoch(url):
    before = petastream_threads()
    loader = TFLoader(url, BS, shuffle=True, seed=6, num_workers=3, batches_per_call=1, worker_type="thread")
    ds = loader.as_dataset()
    it = iter(ds)
    for _ in range(3):
        next(it)
    del it
    gc.collect()
    epoch1 = _ids(ds)  # as a DataLoader: the rest of epoch 0 is dropped, this is all of epoch 1
    assert settles_to(before) <= before
    reference = TFLoader(url, BS, shuffle=True, seed=6)
    reference.set_epoch(1)
    assert sorted(epoch1) == list(range(N)) and epoch1 == _ids(reference.as_dataset())


# -- batches --------------------------------------------------------------------------------

def test_last_batch_short_or_dropped(url):
    assert [len(b["id"]) for b in ptf.dataset(url, 300)] == [300, 300, 300, 100]
    loader = TFLoader(url, 300, drop_last=True)
    assert [len(b["id"]) for b in loader.as_dataset()] == [300, 300, 300] and len(loader) == 3
    assert loader.element_spec["x"].shape == (300, 3)
    assert TFLoader(url, 300).element_spec["x"].shape.as_list() == [None, 3]


def test_columns_and_transform(url):
    ds = ptf.dataset(url, 10, columns=["label", "id"])
    assert list(ds.element_spec) == ["label", "id"]

    def add_double(batch):
        return {"id": batch["id"], "double": (batch["x"][:, 0] * 2).astype(np.float64)}

    ds = ptf.dataset(url, 10, columns=["id", "x"], transform=add_double)
    assert ds.element_spec["double"] == tf.TensorSpec((None,), tf.float64)
    batch = next(iter(ds))
    np.testing.assert_allclose(batch["double"].numpy(), batch["id"].numpy() * 6.0)


def test_types(typed_url):
    loader = TFLoader(typed_url, 8, columns=TYPED)
    spec = loader.element_spec
    batch = next(iter(loader.as_dataset()))
    want = {"id": tf.int64, "u8": tf.uint8, "u16": tf.int32, "u32": tf.int64, "u64": tf.int64,
            "f16": tf.float16, "flag": tf.uint8, "s": tf.string, "b": tf.string, "dec": tf.string,
            "si": tf.int64, "sf": tf.float64, "img": tf.int16, "tags": tf.float32}
    assert {k: v.dtype for k, v in spec.items()} == want
    assert {k: v.dtype for k, v in batch.items()} == want
    assert batch["u16"].numpy().tolist() == list(range(60000, 60008))  # widened, not wrapped
    assert batch["u32"].numpy()[0] == 4_000_000_000
    assert [s.decode() for s in batch["s"].numpy()] == [f"s{i}é" for i in range(8)]
    assert batch["b"].numpy().tolist()[:3] == [b"", b"\x01", b"\x02\x02"]
    assert batch["dec"].numpy()[1] == b"1.25" and batch["sf"].numpy()[1] == 0.5
    assert spec["img"] == tf.TensorSpec((None, 2, 3), tf.int16) and batch["img"].shape == (8, 2, 3)
    np.testing.assert_array_equal(batch["img"].numpy()[1], [[6, 7, 8], [9, 10, 11]])


def test_variable_length_arrays_are_ragged(typed_url):
    loader = TFLoader(typed_url, 8, columns=["tags"], shuffle=True, seed=1)
    assert loader.element_spec["tags"] == tf.RaggedTensorSpec((None, None), tf.float32, 1, tf.int64)
    for batch in loader.as_dataset():
        tags = batch["tags"]
        assert isinstance(tags, tf.RaggedTensor)
        assert all(list(row) == list(range(len(row))) for row in tags.numpy())
    assert TFLoader(typed_url, 8, columns=["tags"], drop_last=True).element_spec["tags"].shape == (8, None)


def test_variable_length_arrays_as_uniform_dense(typed_url):
    one = ptf.dataset(typed_url, 1, columns=["tags"], ragged="uniform")
    assert one.element_spec["tags"] == tf.TensorSpec((None, None), tf.float32)
    assert [b["tags"].shape for b in one.take(3)] == [(1, 1), (1, 2), (1, 3)]
    with pytest.raises(tf.errors.OpError, match="expected to be the same length"):
        list(ptf.dataset(typed_url, 8, columns=["tags"], ragged="uniform"))
    assert issubclass(NonUniformArrayError, RuntimeError)


def test_output_signature(typed_url):
    sig = {"id": tf.TensorSpec((None,), tf.int32), "tags": tf.RaggedTensorSpec((None, None), tf.float64)}
    batch = next(iter(ptf.dataset(typed_url, 4, columns=["id", "tags"], output_signature=sig)))
    assert batch["id"].dtype == tf.int32 and batch["tags"].dtype == tf.float64


# -- TensorFlow integration -------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:Your input ran out of data")  # Keras, on a dataset of unknown length
def test_keras_fit_and_exact_checkpoints_from_its_steps(url):
    loader = TFLoader(url, 100, shuffle=True, seed=1)
    ds = loader.as_dataset().map(lambda b: (b["x"] / N, b["label"]))  # a map tf.data parallelizes
    states = []

    class Checkpoint(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            states.append(loader.state_dict(steps=batch + 1))

    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(ds, epochs=2, verbose=0, callbacks=[Checkpoint()])
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    assert [(s["epoch"], s["samples_consumed"]) for s in states] == [
        (e, 100 * (k + 1)) for e in (0, 1) for k in range(10)]


def test_graph_mode_one_shot_iterator(url):
    with tf.Graph().as_default():
        ds = ptf.dataset(url, 10, columns=["id", "x"], num_epochs=1)
        batch = tf.compat.v1.data.make_one_shot_iterator(ds).get_next()
        with tf.compat.v1.Session() as sess:
            assert sess.run(batch)["id"].tolist() == list(range(10))
            assert sess.run(batch)["x"].shape == (10, 3)


def test_device_prefetch_on_cpu(url):
    loader = TFLoader(url, 128, device="/cpu:0")
    batches = list(loader.as_dataset())
    assert sorted(int(i) for b in batches for i in b["id"].numpy()) == list(range(N))
    assert "CPU:0" in batches[0]["x"].device
    with pytest.raises(ValueError, match=r"device '/gpu:7' is not available"):
        TFLoader(url, 128, device="/gpu:7")


def test_from_generator_fallback_gives_the_same_stream(url, monkeypatch):
    from petastream.tf import _source

    expected = _ids(ptf.dataset(url, BS, shuffle=True, seed=11))
    monkeypatch.setattr(_source, "_GeneratorDataset", None)
    assert _ids(ptf.dataset(url, BS, shuffle=True, seed=11)) == expected


# -- errors ---------------------------------------------------------------------------------

def test_column_without_a_tensorflow_type(typed_url):
    with pytest.raises(TypeError, match=r"column 'meta' \(encoding 'json'\): dict values have no "
                                        r"TensorFlow type; drop the column \(columns="):
        TFLoader(typed_url, 8)


def test_bad_arguments(url):
    with pytest.raises(ValueError, match="ragged must be one of"):
        TFLoader(url, 8, ragged="pad")
    with pytest.raises(TypeError, match="output_signature must be a non-empty dict"):
        TFLoader(url, 8, output_signature=[tf.TensorSpec((None,), tf.int64)])
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not in the dataset"):
        TFLoader(url, 8, columns=["nope"])
    with pytest.raises(TypeError, match="transform must return a dict of columns"):
        TFLoader(url, 8, transform=lambda b: list(b.values()))


def test_errors_in_the_stream_reach_the_loop(url):
    calls = []

    def flaky(batch):
        calls.append(1)
        if len(calls) > 1:  # the first call is the probe that types the output
            raise ValueError("bad transform")
        return batch

    with pytest.raises(tf.errors.OpError, match="bad transform"):
        list(ptf.dataset(url, 10, transform=flaky))

    def changes_dtype(batch):
        return {"id": batch["id"] if len(calls) < 2 else batch["id"].astype(np.float32)}

    calls.clear()
    with pytest.raises(tf.errors.OpError, match=r"column 'id': got float32 values where int64"):
        list(ptf.dataset(url, 10, transform=lambda b: (calls.append(1), changes_dtype(b))[1]))


def test_cardinality_is_declared_so_keras_needs_no_steps_and_does_not_warn(url, caplog):
    import logging
    import warnings

    loader = TFLoader(url, 100, shuffle=True, seed=2)  # 1000 rows: 10 batches
    ds = loader.as_dataset()
    assert int(ds.cardinality()) == 10 == len(loader)
    assert int(TFLoader(url, 100, num_epochs=3).as_dataset().cardinality()) == 30
    assert int(TFLoader(url, 100, num_epochs=None).as_dataset().cardinality()) == tf.data.INFINITE_CARDINALITY
    epochs = []

    class Epochs(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            epochs.append(loader.state_dict()["epoch"])

    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        model.fit(ds.map(lambda b: (b["x"] / N, b["label"])), epochs=3, verbose=0, callbacks=[Epochs()])
    said = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "ran out of data" in m], said
    assert epochs == [0, 1, 2]  # each Keras epoch is the next epoch, in a new order


def test_a_dataset_built_before_a_mid_epoch_resume_says_to_rebuild(url):
    loader = TFLoader(url, 100, shuffle=True, seed=2)
    ds = loader.as_dataset()
    it = iter(ds)
    for _ in range(3):
        next(it)
    state = loader.state_dict(steps=3)
    del it
    fresh = TFLoader(url, 100, shuffle=True, seed=2)
    stale = fresh.as_dataset()
    fresh.load_state_dict(state)
    with pytest.raises(tf.errors.OpError, match=r"declared 10 batches .* call loader.as_dataset\(\) again"):
        list(stale)
    rest = fresh.as_dataset()  # built after load_state_dict: the rest of the epoch, then whole ones
    assert int(rest.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert len(list(rest)) == 7


@pytest.mark.parametrize("per_call", [3, 8])
def test_several_batches_per_call_give_the_same_stream_and_exact_steps(url, per_call):
    one = [{k: v.numpy() for k, v in b.items()}
           for b in ptf.dataset(url, 64, shuffle=True, seed=5, num_epochs=2, batches_per_call=1)]
    loader = TFLoader(url, 64, shuffle=True, seed=5, num_epochs=2, batches_per_call=per_call)
    many = []
    states = []
    for k, b in enumerate(loader.as_dataset(), 1):
        many.append({c: v.numpy() for c, v in b.items()})
        states.append(loader.state_dict(steps=k))
    assert len(many) == len(one) == len(loader)
    for a, b in zip(one, many):
        assert a.keys() == b.keys() and all(np.array_equal(a[c], b[c]) for c in a)
    reference = TFLoader(url, 64, shuffle=True, seed=5, num_epochs=2, batches_per_call=1)
    it = iter(reference.as_dataset())
    for k in range(len(one)):
        next(it)
        assert reference.state_dict() == states[k]  # exact after every step, whatever was read ahead


@pytest.mark.parametrize(("workers", "world_size", "drop_last"), [(1, 1, False), (3, 1, False), (2, 2, False),
                                                                 (2, 1, True)])
def test_batch_groups_match_single_batches_over_workers_ranks_and_a_resume(url, workers, world_size, drop_last):
    def batches(per_call, rank=0, state=None, take=None):
        loader = TFLoader(url, 48, shuffle=True, seed=3, num_epochs=1, num_workers=workers, rank=rank,
                          world_size=world_size, drop_last=drop_last, batches_per_call=per_call)
        if state is not None:
            loader.load_state_dict(state)
        out = []
        for k, b in enumerate(loader.as_dataset(), 1):
            out.append({c: v.numpy() for c, v in b.items()})
            if take is not None and k == take:
                return out, loader.state_dict(steps=k)
        return out, None

    for rank in range(world_size):
        single, _ = batches(1, rank)
        grouped, _ = batches(5, rank)
        assert len(grouped) == len(single)
        for a, b in zip(single, grouped):
            assert all(np.array_equal(a[c], b[c]) for c in a)
        head, state = batches(5, rank, take=7)  # broken off mid-group: steps=7 is exact
        rest, _ = batches(5, rank, state=state)
        assert [b["id"].tolist() for b in head + rest] == [b["id"].tolist() for b in single]


def test_a_transform_takes_one_batch_per_call(url):
    seen = []

    def transform(batch):
        seen.append(len(batch["id"]))
        return batch

    loader = TFLoader(url, 64, num_epochs=1, batches_per_call=4, transform=transform)
    assert sum(int(b["id"].shape[0]) for b in loader.as_dataset()) == len(loader.dataset)
    assert max(seen) <= 64  # called per batch, never on a group


def test_ragged_columns_take_one_batch_per_call(tmp_path):
    path = str(tmp_path / "ragged")
    write_mds({"id": np.arange(50), "v": [np.arange(1 + i % 5, dtype=np.int32) for i in range(50)]}, path,
              columns={"id": "int64", "v": "ndarray:int32"})
    batches = list(ptf.dataset(path, 8, batches_per_call=4))
    assert [int(i) for b in batches for i in b["id"].numpy()] == list(range(50))
    assert batches[1]["v"][2].numpy().tolist() == list(range(1 + 10 % 5))


def test_batch_groups_under_a_cache_fitted_shuffle_fit_its_chunks(tmp_path):
    import petastream
    from tests.mds.test_cache import _write

    path = _write(str(tmp_path / "ds"), n=6000, size_limit=40_000)  # zstd: read through the cache
    raw = int(petastream.open(path).cached_shard_bytes().sum())
    loader = TFLoader(petastream.open(path, cache_dir=str(tmp_path / "c"), cache_limit=raw // 3), 100,
                      shuffle=True, seed=1, num_workers=2)
    assert loader.cache_fit is not None
    work = loader.pass_work(loader.planner.plan())
    assert work.max_chunk is not None and 1 <= work.group * 100 <= max(100, work.max_chunk)
    ids = np.concatenate([b["id"].numpy() for b in loader.as_dataset()])
    np.testing.assert_array_equal(np.sort(ids), np.arange(6000))


# -- decode in worker processes (worker_type="process") --------------------------------------

def _numpy(batch):
    return {k: (v.to_list() if isinstance(v, tf.RaggedTensor) else v.numpy().tolist()) for k, v in batch.items()}


@pytest.mark.parametrize("per_call", [1, 16])
def test_process_workers_give_the_thread_stream_for_every_type(typed_url, per_call):
    kw = dict(columns=TYPED, shuffle=True, seed=2, num_epochs=1, num_workers=2, batches_per_call=per_call)
    threads = TFLoader(typed_url, 4, worker_type="thread", **kw)
    procs = TFLoader(typed_url, 4, worker_type="process", **kw)
    try:
        ds_t, ds_p = threads.as_dataset(), procs.as_dataset()
        for _ in range(2):  # the same dataset iterated twice: two epochs on the same workers
            want, got = [_numpy(b) for b in ds_t], [_numpy(b) for b in ds_p]
            assert got == want and len(got) == 10
        assert procs.element_spec == threads.element_spec
    finally:
        procs.close()


def test_process_workers_resume_exactly_and_keep_batches_intact(url):
    ref = [b["id"].numpy().tolist() for b in ptf.dataset(url, 32, shuffle=True, seed=9, num_epochs=1, worker_type="thread")]
    loader = TFLoader(url, 32, shuffle=True, seed=9, num_epochs=1, worker_type="process", prefetch=1)
    kept = []
    try:
        for k, b in enumerate(loader.as_dataset(), 1):
            kept.append(b)  # tensors kept alive: their slots must not be overwritten under them
            if k == 11:
                state = loader.state_dict(steps=k)
                break
    finally:
        loader.close()
    assert [b["id"].numpy().tolist() for b in kept] == ref[:11]
    rest = TFLoader(url, 32, shuffle=True, seed=9, num_epochs=1, worker_type="process")
    rest.load_state_dict(state)
    try:
        assert [b["id"].numpy().tolist() for b in rest.as_dataset()] == ref[11:]
    finally:
        rest.close()


def test_process_workers_under_keras_fit(url):
    loader = TFLoader(url, 100, shuffle=True, seed=1, worker_type="process")
    try:
        ds = loader.as_dataset().map(lambda b: (b["x"] / N, b["label"]))
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        history = model.fit(ds, epochs=2, verbose=0)
        assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
        assert loader.state_dict()["epoch"] == 1
    finally:
        loader.close()


def test_auto_picks_processes_only_where_nothing_visible_changes(url):
    assert TFLoader(url, 32).worker_type == ("process" if os.name == "posix" else "thread")
    # one worker too: a decode thread would serialize with TensorFlow's per-element Python
    assert TFLoader(url, 32, num_workers=1).worker_type == ("process" if os.name == "posix" else "thread")
    assert TFLoader(url, 32, transform=lambda b: b).worker_type == "thread"  # user code stays here
    assert TFLoader(url, 32, worker_type="thread").worker_type == "thread"


def test_an_abandoned_iteration_leaves_the_workers_to_the_next_epoch(url):
    loader = TFLoader(url, BS, shuffle=True, seed=6, batches_per_call=1)  # auto: processes
    ds = loader.as_dataset()
    it = iter(ds)
    for _ in range(3):
        next(it)
    pool = loader.executor.pool
    del it
    gc.collect()
    # The first pass may have run in threads while the pool started beside it; a loaded machine
    # may not have started it by the next epoch either (that epoch would run in threads too):
    # wait for its workers, then the new epoch must take this pool, not start another.
    deadline = time.monotonic() + 120
    while not pool.ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    epoch1 = _ids(ds)
    assert loader.executor.pool is pool and not pool.closed  # no new processes for the new epoch
    reference = TFLoader(url, BS, shuffle=True, seed=6, worker_type="thread")
    reference.set_epoch(1)
    assert sorted(epoch1) == list(range(N)) and epoch1 == _ids(reference.as_dataset())


def test_auto_decodes_in_threads_when_the_processes_do_not_start(url, monkeypatch, caplog):
    from petastream.pipeline.procpool import parking

    def cannot_spawn(*args, **kwargs):
        raise OSError("no process for you")

    monkeypatch.setattr(parking, "WorkerPool", cannot_spawn)
    want = [b["id"].numpy().tolist() for b in ptf.dataset(url, 32, shuffle=True, seed=4, worker_type="thread")]
    loader = TFLoader(url, 32, shuffle=True, seed=4)
    with caplog.at_level("WARNING", logger="petastream"):
        got = [b["id"].numpy().tolist() for b in loader.as_dataset()]
    assert got == want and loader.worker_type == "thread"
    assert "did not start (OSError: no process for you); decoding in threads" in caplog.text
    with pytest.raises(OSError, match="no process for you"):  # asked for by name: the error
        TFLoader(url, 32, worker_type="process").as_dataset()


def test_process_worker_errors_reach_the_loop(typed_url):
    ds = ptf.dataset(typed_url, 8, columns=["tags"], ragged="uniform", worker_type="process")
    with pytest.raises(tf.errors.OpError, match="expected to be the same length"):
        list(ds)
    with pytest.raises(InvalidArgumentError, match=r"worker_type must be one of \('auto', 'process', 'thread'\), got 'fork'"):
        TFLoader(typed_url, 8, worker_type="fork")


@pytest.mark.cloud
def test_process_workers_read_remote_shards_through_the_loaders_cache(s3_bucket, tmp_path, monkeypatch):
    url = f"{s3_bucket}/tf-processes"
    n = 600
    write_mds({"id": np.arange(n), "s": np.array([f"v{i}é" for i in range(n)], dtype=object),
               "x": np.arange(n * 2, dtype=np.float32).reshape(n, 2)}, url, size_limit=3000, compression="zstd")
    mine, other = str(tmp_path / "loader-cache"), str(tmp_path / "elsewhere")
    monkeypatch.setenv("PETASTREAM_CACHE_DIR", mine)
    kw = dict(shuffle=True, seed=3, num_epochs=1, num_workers=2)
    want = [_numpy(b) for b in TFLoader(url, 50, worker_type="thread", **kw).as_dataset()]
    procs = TFLoader(url, 50, worker_type="process", **kw)
    monkeypatch.setenv("PETASTREAM_CACHE_DIR", other)  # the workers start now, in this environment
    try:
        assert [_numpy(b) for b in procs.as_dataset()] == want
        assert procs.dataset.num_shards > 3 and procs.dataset.cache.usage().entries == procs.dataset.num_shards
        assert not os.path.exists(other)  # they used the loader's cache, not their environment's
    finally:
        procs.close()


def test_a_hand_over_holds_at_most_about_64mb_of_rows(url, monkeypatch):
    from petastream.tf import _loader

    source = TFLoader(url, 64).dataset
    row = source.stored_bytes // len(source)
    assert 20 <= row <= 100  # 'id', 3 floats and 'label' with the shard's per-sample header
    monkeypatch.setattr(_loader, "_GROUP_BYTES", 64 * row * 3)  # three batches' worth
    loader = TFLoader(url, 64, shuffle=True, seed=4, num_epochs=1)
    assert loader.group == 3
    one = [b["id"].numpy().tolist() for b in ptf.dataset(url, 64, shuffle=True, seed=4, batches_per_call=1)]
    assert [b["id"].numpy().tolist() for b in loader.as_dataset()] == one
    monkeypatch.setattr(_loader, "_GROUP_BYTES", 1)  # a batch bigger than the bound: one at a time
    assert TFLoader(url, 64).group == 1
