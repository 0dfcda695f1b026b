"""A loader is a composition of values: a source, an executor, work stages and stages.

The adapters (torch, TensorFlow, compat) build their loaders from these values and override no
method of BatchLoader; their signatures state every argument and their docs list them.
"""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from petastream.errors import PetastreamError, PipelineError, SupersededError, WorkerDiedError
from petastream.mds.writer import write_mds
from petastream.pipeline import BatchLoader, MappedRun, ThreadExecutor
from petastream.pipeline.ordered import PassOrder
from tests.arrow_source import arrow_source

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("composition") / "ds")
    write_mds({"id": np.arange(100), "x": np.arange(100, dtype=np.float32)}, path, size_limit=300)
    return path


class CountingExecutor:
    """An Executor of our own: threads, counting the passes it ran."""

    worker_type = "thread"

    def __init__(self, num_workers: int = 2):
        self.threads = ThreadExecutor(num_workers, 2)
        self.passes, self.closed = 0, 0

    @property
    def num_workers(self) -> int:
        return self.threads.num_workers

    def run(self, work):
        self.passes += 1
        return self.threads.run(work)

    def close(self) -> None:
        self.closed += 1


def test_executor_work_stages_and_stages_are_values(url):
    executor, seen = CountingExecutor(), []

    def tag_work(work):
        seen.append(("work", work.plan.epoch))
        return work

    loader = BatchLoader(url, 10, executor=executor, work_stages=[tag_work],
                         convert=lambda batch: batch["id"].tolist(),
                         stages=[lambda run: MappedRun(run, lambda ids: [i * 2 for i in ids])])
    loader.stages.append(lambda run: MappedRun(run, sum))  # adapters append to the list, in order
    assert sum(loader) == 2 * sum(range(100))
    assert executor.passes == 1 and seen == [("work", 0)]
    loader.close()
    assert executor.closed == 1


def test_the_arrow_source_is_read_by_every_adapter_unchanged():
    from petastream.tf import TFLoader
    from petastream.torch import TorchLoader

    rows = {"id": np.arange(50), "x": np.arange(50, dtype=np.float32)}
    source = arrow_source(rows, [20, 0, 30])
    torch_ids = [int(i) for b in TorchLoader(source, 8, shuffle=True, seed=2) for i in b["id"]]
    tf_ids = [int(i) for b in TFLoader(source, 8, shuffle=True, seed=2, worker_type="thread").as_dataset()
              for i in b["id"].numpy()]
    assert sorted(torch_ids) == list(range(50)) and torch_ids == tf_ids
    assert source.closed >= 2  # each iteration's end released the source (close(), the cache hook)


def test_a_loader_takes_a_url_or_a_source_and_nothing_else(url):
    from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

    with pytest.raises(InvalidArgumentTypeError, match="expected a path or URL .*, or a petastream Source, got int"):
        BatchLoader(42, 10)
    with pytest.raises(InvalidArgumentError, match=r"options \[.*\] \(dataset_options\) apply when a URL is opened.*open it with those options instead"):
        BatchLoader(arrow_source({"id": np.arange(3)}, [3]), 2, dataset_options={"cache_limit": 10})


def _parameters(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p not in ("self", "not_here")]


def test_torch_and_tf_loaders_state_every_argument_and_document_it():
    from petastream.tf import TFLoader
    from petastream.torch import MDSIterableDataset, TorchLoader

    base = set(_parameters(BatchLoader.__init__)) - {"convert", "executor", "work_stages", "stages", "superseded"}
    for cls in (TorchLoader, TFLoader):
        params = _parameters(cls.__init__)
        assert not any(inspect.signature(cls.__init__).parameters[p].kind == inspect.Parameter.VAR_KEYWORD
                       for p in params), cls
        assert base <= set(params), (cls, base - set(params))
        doc = cls.__doc__ or ""
        undocumented = [p for p in params if f"``{p}``" not in doc and f"``{p}(" not in doc]
        assert not undocumented, (cls, undocumented)
    iterable = _parameters(MDSIterableDataset.__init__)
    assert {"shuffle", "seed", "columns", "transform", "rank", "world_size"} <= set(iterable)


def test_no_adapter_overrides_a_method_of_the_batch_loader():
    from petastream.tf import TFLoader
    from petastream.torch import TorchLoader

    methods = {name for name, _ in inspect.getmembers(BatchLoader, inspect.isfunction)} - {"__init__"}
    # TFLoader's own iteration is eager iteration over its tf.data.Dataset (tensors), by design
    allowed = {TorchLoader: set(), TFLoader: {"__iter__"}}
    for cls in (TorchLoader, TFLoader):
        overridden = {name for name in methods if name in vars(cls)}
        assert overridden == allowed[cls], cls


def test_pass_order_checks_each_item_and_names_a_short_pass():
    order = PassOrder(3, 2)
    order.accept(0)
    assert order.worker == 1
    with pytest.raises(PipelineError, match="decode worker 1 returned item 2, expected 1"):
        order.accept(2)
    assert "decode worker 1 of 2 finished without batch 1 of 3" in str(order.ended_early())


@pytest.mark.parametrize("cls", [PipelineError, WorkerDiedError, SupersededError])
def test_pipeline_errors_are_ours_and_runtime_errors_and_pickle(cls):
    err = cls("worker 3 owed batch 7")
    assert isinstance(err, PetastreamError) and isinstance(err, RuntimeError)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == "worker 3 owed batch 7"


def test_no_module_on_the_loader_path_reaches_private_names(tmp_path):
    check = [sys.executable, str(ROOT / "scripts" / "check_reaches.py")]
    ok = subprocess.run(check, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    pkg = tmp_path / "src" / "petastream" / "tf"
    pkg.mkdir(parents=True)
    bad = pkg / "reach.py"
    bad.write_text("from petastream.pipeline.procpool.pool import _spawn\n\ndef f(ld):\n    return ld._reach\n")
    flagged = subprocess.run(check + [str(bad)], capture_output=True, text=True,
                             env={"PETASTREAM_CHECK_ROOT": str(tmp_path / "src")})
    assert flagged.returncode == 1
    assert "imports private _spawn" in flagged.stdout and "reaches ld._reach" in flagged.stdout


def test_privates_are_their_package_business_and_their_own_module_s(tmp_path):
    """A private module or name is free within its package (and subpackages); a module's own
    classes' private attributes are free in that module; namedtuple's API is public."""
    check = [sys.executable, str(ROOT / "scripts" / "check_reaches.py")]
    src = tmp_path / "src" / "petastream"
    for pkg in ("", "a", "a/sub", "b"):
        (src / pkg).mkdir(parents=True, exist_ok=True)
        (src / pkg / "__init__.py").write_text("")
    (src / "a" / "_impl.py").write_text("def _helper():\n    pass\n")
    (src / "a" / "ok.py").write_text(
        "from petastream._extras import x\nfrom petastream.a import _impl\nfrom petastream.a._impl import _helper\n"
        "class P:\n    def __init__(self):\n        self._v = 1\n    def __eq__(self, other):\n"
        "        return self._v == other._v\n\ndef f(row, p):\n    return row._replace(a=1), row._asdict(), p._v\n")
    (src / "a" / "sub" / "ok.py").write_text("from petastream.a._impl import _helper\n")
    (src / "b" / "bad.py").write_text("from petastream.a._impl import f\nfrom petastream.a.ok import _g\n"
                                      "import petastream.a._impl\n")
    env = {"PETASTREAM_CHECK_ROOT": str(tmp_path / "src")}
    ok = subprocess.run(check + [str(src / "a")], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stdout
    bad = subprocess.run(check + [str(src / "b")], capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and bad.stdout.count("bad.py") == 3, bad.stdout


def test_the_convenience_functions_show_every_argument():
    import petastream.tf as ptf
    import petastream.torch as pt

    assert _parameters(pt.loader) == _parameters(pt.TorchLoader.__init__)
    assert list(inspect.signature(ptf.dataset).parameters) == _parameters(ptf.TFLoader.__init__)
