"""Petastorm's Horovod environment checks (a warning only; sharding stays explicit)."""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("petastream.compat.spark_dataset_converter")

_ENV_PAIRS = [("HOROVOD_RANK", "HOROVOD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
              ("PMI_RANK", "PMI_SIZE")]


def get_horovod_rank_and_size() -> tuple[int | None, int | None]:
    for rank_var, size_var in _ENV_PAIRS:
        rank, size = os.environ.get(rank_var), os.environ.get(size_var)
        if rank is not None and size is not None:
            return int(rank), int(size)
        if rank is not None or size is not None:
            return None, None
    return None, None


def check_rank_and_size_consistent_with_horovod(petastorm_reader_kwargs: dict) -> bool:
    hvd_rank, hvd_size = get_horovod_rank_and_size()
    if hvd_rank is not None and hvd_size is not None:
        cur_shard = petastorm_reader_kwargs.get("cur_shard")
        shard_count = petastorm_reader_kwargs.get("shard_count")
        if cur_shard != hvd_rank or shard_count != hvd_size:
            logger.warning(
                "The petastorm reader arguments cur_shard(%s) and shard_count(%s) is not consistent "
                "with horovod environments hvd_rank(%d) and hvd_size(%d), If you want each horovod "
                "worker train on one corresponding shard data, you should set argument `cur_shard` "
                "to be `hvd.rank()` and argument `shard_count` to be `hvd.size()`.",
                cur_shard, shard_count, hvd_rank, hvd_size,
            )
            return False
    return True
