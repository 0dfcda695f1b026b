"""NumPy names removed in 1.24 and 2.0, rewritten (as ruff's NPY001/NPY201 fixes do) in the
files migrate rewrites, and only there."""

from tests.migrate.conftest import assert_migrates, migrate


def test_removed_names_through_the_file_s_numpy_alias() -> None:
    assert_migrates(
        """
        import numpy as xx
        import numpy
        from petastorm import make_reader

        def f(np):
            return np.float  # a parameter called np: not numpy

        a = xx.float(1) + xx.int(2) + xx.NaN + numpy.string_(b"a") + xx.NINF + xx.PZERO
        b = (xx.unicode_, xx.object, xx.bool, xx.str, xx.long, xx.unicode, xx.complex)
        c = (xx.float_, xx.complex_, xx.Inf, xx.Infinity, xx.round_([1.5]), xx.product([2]), xx.int64)
        """,
        """
        import numpy as xx
        import numpy
        from petastream.compat import make_reader

        def f(np):
            return np.float  # a parameter called np: not numpy

        a = float(1) + int(2) + xx.nan + numpy.bytes_(b"a") + -xx.inf + 0.0
        b = (xx.str_, object, bool, str, int, str, complex)
        c = (xx.float64, xx.complex128, xx.inf, xx.inf, xx.round([1.5]), xx.prod([2]), xx.int64)
        """,
    )


def test_from_numpy_imports_keep_their_names() -> None:
    assert_migrates(
        """
        from numpy import float_, NaN as nan_, float, int64
        from petastorm.unischema import UnischemaField

        f = UnischemaField("x", float_, (), None, False)
        """,
        """
        from numpy import float64 as float_, nan as nan_, int64
        from petastream.compat.unischema import UnischemaField

        f = UnischemaField("x", float_, (), None, False)
        """,
    )


def test_files_migrate_does_not_rewrite_keep_their_numpy() -> None:
    # nothing of Petastorm's is rewritten here (a name compat lacks), so NumPy is left alone too
    source = "import numpy as np\nfrom petastorm.hdfs.namenode import HdfsConnector\nx = np.float(1)\n"
    assert migrate(source).code == source
