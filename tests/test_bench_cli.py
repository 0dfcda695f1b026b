"""``petastream bench``: interleaved rounds, medians with their spread (issue 36).

The method and the table are checked with epoch functions that report fixed seconds, so every
figure is exact and nothing depends on the machine's speed or load; the real loaders run once
each, at one round, checked for their rows and not their speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from petastream import bench
from petastream.cli import main
from tests.conftest import FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABULAR = os.path.join(FIXTURES, "tabular-fixed")  # 1,000 rows
N = 100


def fixed(seconds: float, log: list[str] | None = None, name: str = "", rows: int = N) -> bench.EpochFn:
    def epoch() -> tuple[int, float]:
        if log is not None:
            log.append(name)
        return rows, seconds

    return epoch


def test_the_floor_and_each_loader_take_turns_one_epoch_each_per_round():
    log: list[str] = []
    out = bench.interleaved(N, ("floor", fixed(1.0, log, "F")),
                            {"a": fixed(2.0, log, "A"), "b": fixed(4.0, log, "B")}, rounds=5)
    assert log == ["F", "A", "B"] * 6  # a warm-up round, then 5 timed
    floor, a, b = out
    assert [t.variant for t in out] == ["floor", "a", "b"]
    assert a.times == [2.0] * 5 and a.seconds == 2.0 and a.ratio == 0.5 and a.spread == (0.5, 0.5)
    assert b.rows_per_s == N / 4.0 and floor.ratios == [1.0] * 5
    assert all(len(t.cpu) == 5 and min(t.cpu) >= 0 and t.cpu_ns_per_row is not None for t in out)


def test_ratios_are_to_the_floor_of_the_same_round_median_and_spread():
    floor_s = iter([9.0, 1.0, 2.0, 4.0, 1.0, 1.0])  # the warm-up, then a floor that drifts

    def floor() -> tuple[int, float]:
        return N, next(floor_s)

    a = bench.interleaved(N, ("floor", floor), {"a": fixed(2.0)}, rounds=5)[1]
    assert a.ratios == [0.5, 1.0, 2.0, 0.5, 0.5]
    assert a.ratio == 0.5 and a.spread == (0.5, 2.0) and a.seconds == 2.0


def test_short_epochs_are_kept_apart_and_a_raising_loader_is_described_and_dropped():
    rows = iter([N, N, N - 1, N])
    calls: list[str] = []

    def short() -> tuple[int, float]:
        return next(rows), 1.0

    def broken() -> tuple[int, float]:
        calls.append("X")
        raise ImportError("No module named 'torch'", name="torch")

    out = bench.interleaved(N, ("floor", fixed(1.0)), {"s": short, "x": broken}, rounds=3,
                            describe=lambda e: f"seen {type(e).__name__}")
    assert out[1].times == [1.0, 1.0] and out[1].incomplete == [N - 1]
    assert out[2].seconds is None and out[2].note == "seen ImportError" and calls == ["X"]
    assert bench.failure_note(ValueError("x")) == "failed: ValueError: x"
    assert bench.failure_note(ImportError("gone")) == "unavailable: gone"


def test_a_floor_that_raises_stops_the_rounds():
    def floor() -> tuple[int, float]:
        raise RuntimeError("no floor")

    with pytest.raises(RuntimeError, match="no floor"):
        bench.interleaved(N, ("floor", floor), {"a": fixed(1.0)})


def test_the_table_shows_the_median_ratio_its_spread_and_cpu_per_row():
    floor = bench.Timed("floor: f", N, 1.0, times=[1.0, 0.5, 2.0], cpu=[2.0, 2.0, 2.0], ratios=[1.0] * 3)
    a = bench.Timed("loader, 1 thread", N, 2.0, times=[2.0] * 3, cpu=[1.0, 3.0, 5.0],
                    ratios=[0.5, 0.25, 1.0], incomplete=[N - 1])
    gone = bench.Timed("loader, 2 threads", N, note="failed: RuntimeError: boom")
    slow = bench.Timed("slow", N, 400.0, times=[400.0], cpu=[1.0], ratios=[0.0025])
    lines = bench.table([floor, a, gone, slow], per_row=1e6)  # 1 MB per row: MB/s == rows/s
    assert lines[0].split() == ["floor:", "f", "100", "100.0", "1", "20,000,000", "epochs",
                                "0.5-2", "s"]
    assert lines[1].split() == ["loader,", "1", "thread", "50", "50.0", "0.50", "(0.25-1.00)",
                                "30,000,000", "INCOMPLETE", "epochs:", f"[{N - 1}]", "rows,",
                                "expected", f"{N}"]
    assert lines[2].split() == ["loader,", "2", "threads", "-", "-", "failed:", "RuntimeError:", "boom"]
    assert lines[3].split()[3:5] == ["0.0025", "(0.0025-0.0025)"]
    header = bench.HEADER.split()
    assert header[header.index("x") + 1:][:3] == ["floor", "(min-max)", "CPU"]


@pytest.fixture
def fake_plans(monkeypatch):
    """The command's torch plan with epochs of fixed seconds: floor 1 s; the loader 2 s with
    1 worker, 4 s with 2."""
    def floor(data: dict, batch: int) -> tuple[int, float]:
        return len(data["id"]), 1.0

    def loader_epochs(url: str, batch: int, workers: int, limit: int | None = None) -> bench.EpochFn:
        return fixed(2.0 * workers, rows=limit or 1000)

    monkeypatch.setitem(bench.PLANS, "torch", ("floor: fake", floor, "fake.loader", loader_epochs, "thread"))


def test_the_command_prints_medians_with_their_spread(fake_plans, capsys):
    assert main(["bench", TABULAR, "--frameworks", "torch", "--workers", "1,2", "--rounds", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{TABULAR}: 1,000 of 1,000 rows; columns: ")
    assert "a warm-up round, then medians of 5 rounds" in out[1] and out[2] == bench.HEADER
    per_row_mb = (16 * 4 + 8 + 4 + 8) / 1e6  # the fixture's decoded bytes per row
    floor, one, two = (line.split() for line in out[3:6])
    assert floor[:4] == ["floor:", "fake", "1,000", f"{1000 * per_row_mb:.1f}"] and floor[4] == "1"
    assert one[:8] == ["fake.loader,", "1", "thread", "500", f"{500 * per_row_mb:.1f}", "0.50", "(0.50-0.50)",
                       one[7]] and one[7].replace(",", "").isdigit()
    assert two[:7] == ["fake.loader,", "2", "threads", "250", f"{250 * per_row_mb:.1f}", "0.25", "(0.25-0.25)"]
    assert out[-2].startswith("x floor: rows/s over the floor's in the same round")
    assert "numpy " in out[-1] and "pyarrow " in out[-1]


def test_the_command_json_keeps_every_round(fake_plans, capsys):
    assert main(["bench", TABULAR, "--frameworks", "torch", "--workers", "1", "--repeat", "3",
                 "--rows", "500", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["rows"] == 500 and got["rounds"] == 3 and got["bytes_per_row"] == 16 * 4 + 8 + 4 + 8
    floor, loader = got["results"]
    assert floor["floor"] and not loader["floor"] and loader["framework"] == "torch"
    assert floor["times"] == [1.0] * 3 and floor["rows_per_s"] == 500.0
    assert loader["times"] == [2.0] * 3 and loader["ratios"] == [0.5] * 3 and loader["ratio"] == 0.5
    assert len(loader["cpu"]) == 3 and loader["cpu_ns_per_row"] >= 0 and loader["incomplete"] == []


# -- the real loaders, in a fresh interpreter (one round: rows checked, never speed) -----------

def _cli(*argv: str, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in block)
    code = prelude + f"from petastream.cli import main; sys.exit(main({list(argv)!r}))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


@pytest.mark.torch
def test_bench_torch_prints_floor_and_loader_rows():
    pytest.importorskip("torch")
    res = _cli("bench", TABULAR, "--frameworks", "torch", "--workers", "1,2", "--rounds", "1")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"{TABULAR}: 1,000 of 1,000 rows")
    rows = [ln.split() for ln in lines if ln.startswith("  floor") or ln.startswith("  petastream")]
    assert [r[0] for r in rows] == ["floor:", "petastream.torch.loader,", "petastream.torch.loader,"]
    assert rows[0][7] == "1" and rows[0][-3] == "epochs"
    for r in rows[1:]:  # rows/s, MB/s, x floor, (min-max), CPU ns/row: all measured
        assert float(r[3].replace(",", "")) > 0 and float(r[5]) > 0 and r[6].startswith("(")
        assert r[7].replace(",", "").isdigit()
    assert "torch " in lines[-1] and "pyarrow " in lines[-1]


def test_bench_json_and_missing_frameworks_are_skipped_not_fatal():
    res = _cli("bench", TABULAR, "--json", "--workers", "1", "--rounds", "1", "--rows", "500",
               block=("torch", "tensorflow"))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["rows"] == 500 and out["bytes_per_row"] == 4 * 16 + 8 + 4 + 8
    notes = [r["note"] for r in out["results"]]
    assert len(notes) == 4 and all(n.startswith("skipped") for n in notes)
    assert "PyTorch is not installed (pip install 'petastream[torch]')" in notes[0]
    assert "TensorFlow is not installed" in notes[2]


@pytest.mark.parametrize("argv, message", [
    (["bench", "/nonexistent"], "index.json not found"),
    (["bench", TABULAR, "--frameworks", "jax"], "--frameworks 'jax'"),
])
def test_bench_usage_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("petastream bench: ") and message in err and err.count("\n") == 1
