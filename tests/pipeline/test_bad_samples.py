"""``on_error``: a dataset with one corrupt image (and a transform that fails on one row, and a
damaged shard) read under each policy, by every native loader."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest

from petastream.mds.writer import write_mds
from petastream.pipeline import BatchLoader
from petastream.pipeline.onerror import BadSample

pytestmark = [pytest.mark.timeout(300), pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")]
N, BAD, BAD_TRANSFORM = 40, 17, 23


def _write(path: str, hashes: list[str] | None = None) -> str:
    from PIL import Image

    imgs = [Image.fromarray(np.full((4, 4, 3), i, np.uint8)) for i in range(N)]
    write_mds({"id": np.arange(N), "x": np.arange(N, dtype=np.float32), "img": imgs}, path,
              columns={"id": "int64", "x": "float32", "img": "png"}, compression=None,
              hashes=[] if hashes is None else hashes, size_limit=1500)
    return path


def _shards(path: str) -> list[dict]:
    with open(os.path.join(path, "index.json")) as f:
        return json.load(f)["shards"]


def _corrupt_image(path: str, row: int) -> tuple[int, int]:
    """Overwrite the PNG signature of sample ``row`` (Pillow cannot open it): (shard, row in it)."""
    offset = 0
    for k, shard in enumerate(_shards(path)):
        if row < offset + shard["samples"]:
            name = os.path.join(path, shard["raw_data"]["basename"])
            with open(name, "rb") as f:
                data = bytearray(f.read())
            pos = -1
            for _ in range(row - offset + 1):
                pos = data.index(b"\x89PNG", pos + 1)
            data[pos:pos + 4] = b"XXXX"
            with open(name, "wb") as f:
                f.write(bytes(data))
            return k, row - offset
        offset += shard["samples"]
    raise AssertionError("no such row")


@pytest.fixture(scope="module")
def bad_image(tmp_path_factory):
    path = _write(str(tmp_path_factory.mktemp("bad-image") / "ds"))
    return path, _corrupt_image(path, BAD)


def fail_on_23(batch):
    """A transform that fails on one row (module level: worker processes import it)."""
    ids = np.asarray(batch["id"])
    if (ids == BAD_TRANSFORM).any():
        raise ValueError(f"cannot transform id {BAD_TRANSFORM}")
    return {"id": ids, "x": np.asarray(batch["x"]) * 2}


def _ids(loader) -> list[int]:
    return [int(i) for b in loader for i in np.asarray(b["id"])]


def _kinds():
    from petastream.torch import TorchLoader

    def tf_loader(url, bs, **kw):
        from petastream.tf import TFLoader

        return TFLoader(url, bs, **kw)

    return {
        "numpy": lambda url, bs, **kw: BatchLoader(url, bs, **kw),
        "thread": lambda url, bs, **kw: TorchLoader(url, bs, **kw),
        "process": lambda url, bs, **kw: TorchLoader(url, bs, worker_type="process", **kw),
        "tf-threads": lambda url, bs, **kw: tf_loader(url, bs, worker_type="thread", **kw),
        "tf-processes": lambda url, bs, **kw: tf_loader(url, bs, worker_type="process", **kw),
    }


# -- "raise" -----------------------------------------------------------------------------------
def test_raise_names_dataset_shard_row_and_column(bad_image):
    from PIL import UnidentifiedImageError

    url, (shard, row) = bad_image
    where = (rf"dataset '{url}', shard \(or row group\) {shard}, row {row} \(sample id {BAD}\), "
             r"column 'img'")
    with pytest.raises(UnidentifiedImageError, match=where):  # (the error's own type: matched in its note)
        list(BatchLoader(url, 8, shuffle=True))


def test_raise_in_a_transform_names_the_sample_and_keeps_its_type(bad_image):
    url, _ = bad_image
    with pytest.raises(ValueError, match=rf"cannot transform id {BAD_TRANSFORM}") as info:
        list(BatchLoader(url, 8, columns=["id", "x"], transform=fail_on_23))
    assert any(f"transform failed at dataset '{url}', shard (or row group) " in n and f"(sample id {BAD_TRANSFORM})" in n
               for n in info.value.__notes__)


# -- "skip" and "warn", every loader -----------------------------------------------------------
@pytest.mark.parametrize("kind", ["numpy", "thread", "process"])
def test_skip_completes_the_epoch_one_row_short(bad_image, kind, caplog):
    url, _ = bad_image
    ld = _kinds()[kind](url, 8, shuffle=True, num_workers=2, on_error="skip", columns=["id", "img"])
    with caplog.at_level(logging.WARNING, logger="petastream.pipeline"):
        ids = _ids(ld)
    assert sorted(ids) == [i for i in range(N) if i != BAD]
    stats = ld.stats()
    assert stats["skipped"] == 1 and stats["rows"] == N - 1 and stats["batches"] == N // 8
    assert ld.state_dict()["skipped"] == [[BAD, BAD + 1]]
    logged = [r.getMessage() for r in caplog.records if "skipped 1 sample(s) so far" in r.getMessage()]
    assert len(logged) == 1 and f"sample id {BAD}" in logged[0]


@pytest.mark.parametrize("kind", ["numpy", "thread", "process", "tf-threads", "tf-processes"])
def test_skip_a_row_the_transform_fails_on(bad_image, kind):
    url, _ = bad_image
    if kind.startswith("tf"):
        pytest.importorskip("tensorflow")
    ld = _kinds()[kind](url, 8, num_workers=2, on_error="skip", columns=["id", "x"], transform=fail_on_23,
                        drop_last=True)
    ids = _ids(ld)
    assert sorted(ids) == [i for i in range(N) if i != BAD_TRANSFORM]
    assert ld.stats()["skipped"] == 1 and ld.stats()["rows"] == N - 1


def test_warn_logs_each_skipped_sample(bad_image, caplog):
    url, (shard, row) = bad_image
    ld = BatchLoader(url, 8, on_error="warn", columns=["id", "img"])
    with caplog.at_level(logging.WARNING, logger="petastream.pipeline"):
        assert len(_ids(ld)) == N - 1
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("on_error='warn'")]
    assert len(warned) == 1
    assert f"shard (or row group) {shard}, row {row} (sample id {BAD}), column 'img'" in warned[0]
    assert "UnidentifiedImageError" in warned[0]


def test_a_callable_decides_per_error(bad_image):
    url, _ = bad_image
    seen: list[BadSample] = []

    def decide(bad: BadSample) -> bool:
        seen.append(bad)
        return bad.stage == "decode"

    assert len(_ids(BatchLoader(url, 8, on_error=decide, columns=["id", "img"]))) == N - 1
    assert seen[0].ids == (BAD,) and seen[0].column == "img" and seen[0].error_type == "UnidentifiedImageError"
    with pytest.raises(ValueError, match=f"cannot transform id {BAD_TRANSFORM}"):
        list(BatchLoader(url, 8, on_error=decide, columns=["id", "x"], transform=fail_on_23))
    assert seen[-1].stage == "transform" and seen[-1].ids == (BAD_TRANSFORM,)


def test_on_error_is_checked(bad_image):
    from petastream.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="on_error must be 'raise', 'skip', 'warn' or a callable"):
        BatchLoader(bad_image[0], 8, on_error="ignore")


# -- resuming ----------------------------------------------------------------------------------
@pytest.mark.parametrize("resume_policy", ["raise", "skip"])
def test_a_resumed_epoch_leaves_the_skipped_sample_out(bad_image, resume_policy):
    url, _ = bad_image
    first = BatchLoader(url, 4, shuffle=True, seed=3, num_workers=1, on_error="skip", columns=["id", "img"])
    it = iter(first)
    head = [int(i) for _ in range(2) for i in next(it)["id"]]
    state = json.loads(json.dumps(first.state_dict()))  # a checkpoint: JSON
    assert state["skipped"] == [[BAD, BAD + 1]]  # met in the read-ahead, recorded with its batch
    rest = BatchLoader(url, 4, shuffle=True, seed=3, num_workers=2, on_error=resume_policy, columns=["id", "img"])
    rest.load_state_dict(state)  # even under "raise": the state says it was skipped
    tail = _ids(rest)
    assert sorted(head + tail) == [i for i in range(N) if i != BAD]  # each of the rest exactly once
    assert rest.stats()["skipped"] == (1 if len(head) == 8 else 0)  # left out of the rest, or of the head


def test_a_state_saved_before_the_error_skips_it_again(bad_image):
    url, _ = bad_image
    ld = BatchLoader(url, 4, shuffle=True, seed=5, on_error="skip", columns=["id", "img"])
    before = ld.state_dict()  # nothing skipped yet
    assert "skipped" not in before
    again = BatchLoader(url, 4, shuffle=True, seed=5, on_error="skip", columns=["id", "img"])
    again.load_state_dict(before)
    assert sorted(_ids(again)) == [i for i in range(N) if i != BAD]
    assert again.stats()["skipped"] == 1 and again.state_dict()["skipped"] == [[BAD, BAD + 1]]


def test_the_skip_list_stays_for_later_epochs(bad_image):
    url, _ = bad_image
    ld = BatchLoader(url, 8, shuffle=True, num_epochs=2, on_error="skip", columns=["id", "img"])
    ids = _ids(ld)
    assert len(ids) == 2 * (N - 1) and BAD not in ids
    assert ld.stats()["skipped"] == 2


# -- a damaged shard ---------------------------------------------------------------------------
def test_a_damaged_shard_is_skipped_whole(tmp_path, caplog):
    from petastream.errors import CorruptShardError

    url = _write(str(tmp_path / "ds"))
    shards = _shards(url)
    name = os.path.join(url, shards[1]["raw_data"]["basename"])
    os.truncate(name, os.path.getsize(name) // 2)  # a shard cut short
    lost = set(range(shards[0]["samples"], shards[0]["samples"] + shards[1]["samples"]))
    with pytest.raises(CorruptShardError, match=r"shard \(or row group\) 1, all \d+ rows"):
        list(BatchLoader(url, 8, shuffle=True, columns=["id", "x"]))
    ld = BatchLoader(url, 8, shuffle=True, on_error="skip", columns=["id", "x"])
    with caplog.at_level(logging.WARNING, logger="petastream.pipeline"):
        ids = _ids(ld)
    assert sorted(ids) == sorted(set(range(N)) - lost)
    assert ld.stats()["skipped"] == len(lost)
    assert ld.state_dict()["skipped"] == [[min(lost), max(lost) + 1]]


# -- your own DataLoader -----------------------------------------------------------------------
def test_the_iterable_dataset_skips_in_its_workers(bad_image, caplog):
    import torch.utils.data

    from petastream.torch import MDSIterableDataset

    url, _ = bad_image
    ds = MDSIterableDataset(url, 8, on_error="skip", columns=["id", "img"])
    with caplog.at_level(logging.WARNING, logger="petastream.pipeline"):
        ids = _ids(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0))
    assert sorted(ids) == [i for i in range(N) if i != BAD]
    assert any(f"sample id {BAD}" in r.getMessage() for r in caplog.records)
