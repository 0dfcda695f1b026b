"""A converter pickled into Spark's TorchDistributor: two gloo ranks, each in its own Spark task."""

from __future__ import annotations

import pytest

from petastream.compat import make_spark_converter

pytestmark = [pytest.mark.spark, pytest.mark.torch, pytest.mark.slow]


def test_converter_in_torch_distributor_tasks(spark, converter_env):
    from pyspark.ml.torch.distributor import TorchDistributor

    def _train(conv):
        """Runs in each TorchDistributor process (torchrun inside a barrier Spark task); defined
        here so that cloudpickle ships it by value (the tests package is not on the executors)."""
        import torch.distributed as dist

        from petastream.torch import loader

        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        # Petastorm's idiom: shard by hand with cur_shard/shard_count.
        with conv.make_torch_dataloader(batch_size=50, num_epochs=1, cur_shard=rank, shard_count=world) as dl:
            compat = [int(i) for b in dl for i in b["id"]]
        # The native loader takes rank and world size from torch.distributed itself.
        native_loader = loader(conv.cache_dir_url, 50, shuffle=True, seed=3)
        native = [int(i) for b in native_loader for i in b["id"]]
        gathered = [None] * world
        dist.all_gather_object(gathered, (rank, world, compat, native, len(native_loader)))
        dist.destroy_process_group()
        return gathered

    conv = make_spark_converter(spark.range(1000).repartition(2))
    out = TorchDistributor(num_processes=2, local_mode=False, use_gpu=False).run(_train, conv)
    assert sorted(r[0] for r in out) == [0, 1] and {r[1] for r in out} == {2}
    for part in (2, 3):
        a, b = (out[0][part], out[1][part])
        assert len(a) == len(b) == 500 and sorted(a + b) == list(range(1000))
    assert out[0][4] == out[1][4] == 10  # the same number of batches on every rank
