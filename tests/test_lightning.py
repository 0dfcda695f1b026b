"""Lightning on petastream's native loader: 2 epochs on CPU, a mid-epoch checkpoint, a resume."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from petastream.mds.writer import write_mds

pytestmark = [pytest.mark.torch, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]
pl = pytest.importorskip("pytorch_lightning")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "lightning"))
from native_datamodule import PetastreamDataModule, Regression, trainer  # noqa: E402

N, BS = 100, 16  # 7 batches an epoch


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("lightning") / "ds")
    write_mds({"id": np.arange(N), "x": np.linspace(-1, 1, N).astype(np.float32)}, path, size_limit=600)
    return path


def _flat(batches):
    return [i for b in batches for i in b]


def test_two_epochs_each_whole_and_in_a_new_order(url):
    model = Regression()
    trainer(max_epochs=2, enable_checkpointing=False).fit(model, PetastreamDataModule(url, BS))
    assert len(model.seen) == 14
    first, second = _flat(model.seen[:7]), _flat(model.seen[7:])
    assert sorted(first) == sorted(second) == list(range(N)) and first != second


@pytest.mark.parametrize("stop_after", [3, 10])  # mid-epoch 0, mid-epoch 1
def test_resume_from_a_mid_epoch_checkpoint_trains_on_exactly_the_rest(url, tmp_path, stop_after):
    whole = Regression()
    trainer(max_epochs=2, enable_checkpointing=False).fit(whole, PetastreamDataModule(url, BS))

    interrupted = Regression()
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=stop_after, save_top_k=-1)
    trainer(max_epochs=2, max_steps=stop_after, callbacks=[ckpt]).fit(interrupted, PetastreamDataModule(url, BS))
    (path,) = [os.path.join(tmp_path, f) for f in os.listdir(tmp_path) if f"step={stop_after}" in f]

    resumed = Regression()
    trainer(max_epochs=2, enable_checkpointing=False).fit(resumed, PetastreamDataModule(url, BS), ckpt_path=path)
    assert len(interrupted.seen) == stop_after
    assert interrupted.seen + resumed.seen == whole.seen  # nothing lost, nothing repeated, same order
