"""``make_batch_reader`` on Parquet, per row group as Petastorm 0.13.1's batch reader (observed
on it): ``shuffle_row_drop_partitions`` reads each row group as that many permuted parts; a
predicate is called once per row group, with a pandas DataFrame of the predicate's columns,
the result taken as a row mask; on partition keys only, once per row group with their values.
A predicate written per row (which Petastorm fails on) is called per row here."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import make_batch_reader
from petastream.compat.predicates import PredicateBase, in_lambda, in_set


class _Frames(PredicateBase):
    """Records what do_include is given; keeps ids in ``keep`` with pandas' ``isin``."""

    def __init__(self, fields, keep):
        self.fields, self.keep, self.seen = fields, keep, []

    def get_fields(self):
        return set(self.fields)

    def do_include(self, values):
        self.seen.append(values)
        return values["id"].isin(self.keep) if "id" in self.fields else values["part"] in self.keep


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("pred")
    for part in ("a", "b"):
        (root / f"part={part}").mkdir()
        ids = np.arange(10) + (0 if part == "a" else 10)
        pq.write_table(pa.table({"id": ids, "x": ids * 0.5}), root / f"part={part}" / "0.parquet", row_group_size=5)
    return str(root)


def _ids(url: str, predicate) -> list[int]:
    with make_batch_reader(url, predicate=predicate, shuffle_row_groups=False, workers_count=1) as reader:
        return sorted(int(i) for batch in reader for i in batch.id)


def test_a_predicate_gets_a_frame_per_row_group(parts):
    import pandas as pd

    predicate = _Frames(["id", "x"], [1, 7, 12])
    assert _ids(parts, predicate) == [1, 7, 12]
    assert len(predicate.seen) == 4 and all(isinstance(v, pd.DataFrame) and len(v) == 5 for v in predicate.seen)
    assert sorted(predicate.seen[0].columns) == ["id", "x"]


def test_a_predicate_on_partition_keys_gets_their_values(parts):
    predicate = _Frames(["part"], {"b"})
    assert _ids(parts, predicate) == list(range(10, 20))
    assert all(isinstance(v, dict) and isinstance(v["part"], str) for v in predicate.seen)


def test_vectorized_lambdas_and_per_row_predicates(parts):
    assert _ids(parts, in_lambda(["id"], lambda i: i % 3 == 0)) == [0, 3, 6, 9, 12, 15, 18]
    # Petastorm 0.13.1 fails on this one (TypeError: unhashable type: 'Series'); compat calls it per row.
    assert _ids(parts, in_set({4, 14}, "id")) == [4, 14]


def test_shuffle_row_drop_partitions_reads_row_groups_as_permuted_parts(tmp_path):
    # As Petastorm's: each row group read as that many parts, the parts of all row groups permuted.
    pq.write_table(pa.table({"id": np.arange(100)}), tmp_path / "a.parquet", row_group_size=50)
    with make_batch_reader(str(tmp_path), shuffle_row_groups=True, shuffle_row_drop_partitions=5, seed=3,
                           workers_count=1) as reader:
        ids = np.concatenate([batch.id for batch in reader])
    assert sorted(ids.tolist()) == list(range(100))
    parts = ids.reshape(10, 10)
    assert all(p[0] % 10 == 0 and (np.diff(p) == 1).all() for p in parts)
    assert parts[:, 0].tolist() != sorted(parts[:, 0].tolist())


@pytest.mark.parametrize("fields", [{"nope": 1}, {"nope": 1, "id": 3}])
def test_a_predicate_on_missing_fields_fails_at_the_first_read(parts, fields):
    # Petastorm's ValueError comes from its workers, at the first next(), not when the reader is made.
    class Equal(PredicateBase):
        def get_fields(self):
            return set(fields)

        def do_include(self, values):
            return all(values[k] == v for k, v in fields.items())

    with make_batch_reader(parts, predicate=Equal()) as reader:
        with pytest.raises(ValueError):
            next(reader)
