from __future__ import annotations

import pytest


@pytest.fixture
def converter_env(spark, tmp_path):
    """Petastorm's test context: the parent cache dir conf set to a fresh file:// URL."""
    from petastream.compat import spark_dataset_converter as sdc
    from petastream.spark import materializer

    materializer._REGISTRY.clear()
    sdc._cache_df_meta_list.clear()
    url = "file://" + str(tmp_path / "cache")
    spark.conf.set(sdc.SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, url)
    old = sdc._FILE_AVAILABILITY_WAIT_TIMEOUT_SECS
    sdc._FILE_AVAILABILITY_WAIT_TIMEOUT_SECS = 2
    yield url
    sdc._FILE_AVAILABILITY_WAIT_TIMEOUT_SECS = old


@pytest.fixture
def primitive_df(spark):
    """Petastorm's test_primitive DataFrame: one column of every primitive type, two rows."""
    schema = ("bool_col boolean, float_col float, double_col double, short_col short, int_col int, "
              "long_col long, byte_col byte, str_col string, bin_col binary")
    rows = [(True, 0.5, 1.5, 1, 2, 3, 4, "a", b"\x01"), (False, -0.5, -1.5, -1, -2, -3, -4, "héllo", b"")]
    return spark.createDataFrame(rows, schema).coalesce(1)


@pytest.fixture(params=["pillow", "opencv"])
def image_decoder(request, monkeypatch):
    """Each of compat's image decoders in turn (PETASTREAM_IMAGE_DECODER): OpenCV, as Petastorm
    decodes, where it is installed (CI installs it), and Pillow."""
    from petastream.compat import _images

    if request.param == "opencv":
        pytest.importorskip("cv2")
    monkeypatch.setenv("PETASTREAM_IMAGE_DECODER", request.param)
    _images._opencv.cache_clear()
    assert _images.decoder() == request.param
    yield request.param
    _images._opencv.cache_clear()
