"""petastream.compat.spark_utils.dataset_as_rdd and test_util.shuffling_analysis, on a real
local Spark, over a dataset Petastorm 0.13.1 wrote (tests/fixtures/petastorm)."""

import json
import os

import numpy as np
import pytest

from petastream.compat.etl import dataset_metadata
from petastream.compat.spark_utils import dataset_as_rdd
from petastream.compat.test_util.shuffling_analysis import (
    compute_correlation_distribution,
    generate_shuffle_analysis_dataset,
)
from tests.compat.petastorm_values import decode, same

pytestmark = pytest.mark.spark

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm", "all_codecs")


def _expected_rows() -> list[dict]:
    with open(FIXTURE + ".expected.json") as f:
        return json.load(f)["rows"]


def _as_spark_gives(value):
    # make_reader's NaN for a null double (its pandas conversion) is Spark's None, which
    # Petastorm's dataset_as_rdd passes on (its decode_row keeps None)
    return None if isinstance(value, float) and np.isnan(value) else value


def test_dataset_as_rdd_decodes_every_codec_as_petastorm(spark):
    rows = sorted(dataset_as_rdd("file://" + FIXTURE, spark).collect(), key=lambda r: int(r.id))
    expected = _expected_rows()
    assert len(rows) == len(expected)
    assert type(rows[0]).__name__ == "AllCodecs_view"
    # JPEG pixels depend on the decoder (OpenCV's are Petastorm's): test_petastorm_fixtures
    differences = [(int(r.id), k) for r, e in zip(rows, expected) for k, v in e.items()
                   if not k.startswith("jpeg_") and not same(getattr(r, k), _as_spark_gives(decode(v)))]
    assert differences == []


def test_dataset_as_rdd_subset_of_fields(spark):
    schema = dataset_metadata.get_schema(FIXTURE)
    fields = [schema.fields["i32"], schema.fields["id"]]
    rows = dataset_as_rdd("file://" + FIXTURE, spark, schema_fields=fields).collect()
    assert {r._fields for r in rows} == {("id", "i32")}  # the schema's order
    expected = {int(decode(e["id"])): decode(e["i32"]) for e in _expected_rows()}
    assert all(same(r.i32, expected[int(r.id)]) for r in rows)


def test_shuffling_analysis(spark, tmp_path):
    url = f"file://{tmp_path}/shuffle"
    generate_shuffle_analysis_dataset(spark, url, num_rows=100, row_group_size=20)
    assert [p.row_group for p in dataset_metadata.load_row_groups(url)] == [0] * 5
    mean, std = compute_correlation_distribution(url, "id", shuffle_row_drop_partitions=1, num_corr_samples=3)
    assert 0.0 <= mean <= 1.0 and std >= 0.0
    assert isinstance(mean, np.float64)
    # by position too, as Petastorm's helper indexes the row
    assert compute_correlation_distribution(url, 0, 1, num_corr_samples=1)[1] == 0.0
