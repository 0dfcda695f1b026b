"""The benchmark harness's method (issue 36): interleaved rounds, per-round ratios to the floor,
medians with their spread, CPU time of every process, peers bracketed by the floor.

The epoch functions here report the seconds they are given, so every figure is exact and no
assertion depends on the machine's speed or load.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks import harness, peer_envs, workloads
from benchmarks.peers import _clock

N = 100


def fixed(name: str, log: list[str], seconds: float, rows: int = N):
    def epoch() -> tuple[int, float]:
        log.append(name)
        return rows, seconds

    return epoch


def test_rounds_interleave_the_floor_with_every_row_after_one_warm_up():
    log: list[str] = []
    out = harness.interleaved("b", N, ("floor", fixed("F", log, 1.0)),
                              {"a": fixed("A", log, 2.0), "b": fixed("B", log, 4.0)}, rounds=5)
    assert log == ["F", "A", "B"] * 6
    floor, a, b = out
    assert [r.variant for r in out] == ["floor", "a", "b"]
    assert a.times == [2.0] * 5 and a.ratios == [0.5] * 5 and a.seconds == 2.0
    assert b.ratio == 0.25 and b.rows_per_s == N / 4.0
    assert floor.ratios == [1.0] * 5 and "median of 5 interleaved rounds" in floor.note
    assert all(len(r.cpu) == 5 and min(r.cpu) >= 0 for r in out)


def test_each_ratio_is_to_the_floor_of_its_own_round():
    floor_s = iter([9.0, 1.0, 2.0, 4.0])  # warm-up, then a floor that slows down round by round

    def floor() -> tuple[int, float]:
        return N, next(floor_s)

    out = harness.interleaved("b", N, ("floor", floor), {"a": fixed("A", [], 2.0)}, rounds=3)
    assert out[1].ratios == [0.5, 1.0, 2.0]
    assert out[1].ratio == 1.0
    assert out[0].seconds == 2.0


def test_an_incomplete_epoch_is_reported_not_timed():
    rows = iter([N, N, N - 1, N])

    def short() -> tuple[int, float]:
        return next(rows), 1.0

    out = harness.interleaved("b", N, ("floor", fixed("F", [], 1.0)), {"a": short}, rounds=3)
    assert out[1].times == [1.0, 1.0]
    assert out[1].note.startswith(f"INCOMPLETE epochs (rows [{N - 1}], expected {N})")


def test_a_row_that_raises_is_reported_and_left_out_of_later_rounds():
    log: list[str] = []
    calls = iter([None, None, RuntimeError("boom")])

    def flaky() -> tuple[int, float]:
        log.append("X")
        err = next(calls)
        if err:
            raise err
        return N, 1.0

    def missing() -> tuple[int, float]:
        raise ImportError("No module named 'torch'")

    out = harness.interleaved("b", N, ("floor", fixed("F", log, 1.0)), {"x": flaky, "m": missing}, rounds=4)
    assert log.count("X") == 3 and log.count("F") == 5
    assert out[1].seconds is None and out[1].note == "failed: RuntimeError: boom"
    assert out[2].seconds is None and out[2].note.startswith("unavailable: No module named 'torch'")


def test_a_peer_is_compared_with_the_floor_timed_around_its_subprocess():
    res = {"rows": N, "seconds": 2.0, "times": [2.0, 4.0, 8.0], "cpu": [1.0, 1.5, 2.0],
           "floors": [1.0, 3.0], "extra": {"materialize_s": 1.0}}
    r = harness.peer_result("b", N, "peer", res, "same script")
    assert r.seconds == 4.0 and r.ratios == [1.0, 0.5, 0.25] and r.ratio == 0.5
    assert r.cpu_ns_per_row == 1.5 / N * 1e9
    assert r.note.startswith("median of 3 epochs in one subprocess, vs the floor timed before/after it "
                             "(1.000/3.000 s); same script")
    assert r.extra == {"materialize_s": 1.0, "floors_s": [1.0, 3.0]}
    failed = harness.peer_result("b", N, "peer", {"error": "unavailable: no env"}, "unavailable: no env")
    assert failed.seconds is None and failed.ratios == []


def test_the_table_shows_median_ratio_spread_and_cpu_per_row(tmp_path, monkeypatch):
    floor_s = iter([1.0, 1.0, 2.0, 1.0])
    out = harness.interleaved("b", N, ("floor", lambda: (N, next(floor_s))),
                              {"a": fixed("A", [], 2.0)}, rounds=3)
    out.append(harness.Result("b", "not in rounds", N, 4.0))
    text = harness.report(out, "floor")
    assert "x floor" in text and "CPU ns/row" in text
    row_a = next(line for line in text.splitlines() if " a " in line)
    assert " 0.50 " in row_a and "(0.50-1.00)" in row_a
    assert " 0.25 " in next(line for line in text.splitlines() if "not in rounds" in line)
    monkeypatch.chdir(tmp_path)
    saved = json.loads(Path(harness.save("t", out)).read_text())["results"]
    assert saved[1]["ratios"] == [0.5, 1.0, 0.5] and saved[1]["times"] == [2.0] * 3
    assert saved[1]["ratio"] == 0.5 and len(saved[1]["cpu"]) == 3


def test_peers_repeat_as_many_epochs_as_the_rounds_unless_told():
    assert peer_envs._opts(argparse.Namespace(rounds=5, peer_repeat=None))[1] == 5
    assert peer_envs._opts(argparse.Namespace(rounds=5, peer_repeat=2))[1] == 2
    assert peer_envs._opts(argparse.Namespace())[1] == 1


_BURN = """
import sys, time
t = time.process_time()
while time.process_time() - t < 0.5:
    pass
print(time.process_time(), flush=True)
sys.stdin.readline()
"""

# Runs in a fresh interpreter, so that no other process under pytest (a Spark JVM of another
# test, say) adds its CPU time to the figures.
_MEASURE = """
import json, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
import _clock

own = time.process_time()
start = _clock.snapshot()
child = subprocess.Popen([sys.executable, "-c", sys.argv[2]], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
child_cpu = float(child.stdout.readline())
live = _clock.snapshot()  # the worker is alive (waiting on stdin): counted from /proc
child.stdin.close()
child.wait()
ended = _clock.snapshot()  # reaped: counted by getrusage, less what /proc had shown
mine = time.process_time() - own
print(json.dumps({"child": child_cpu, "live": _clock.cpu_between(start, live) - mine,
                  "ended": _clock.cpu_between(start, ended) - mine,
                  "sum": _clock.cpu_between(start, live) + _clock.cpu_between(live, ended)
                         - _clock.cpu_between(start, ended)}))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="live workers are read from /proc (Linux)")
def test_cpu_counts_a_worker_process_once_whether_live_or_ended():
    peers = Path(_clock.__file__).parent
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(peers), _BURN], capture_output=True,
                         text=True, check=True)
    got = json.loads(out.stdout)
    tick = 0.05  # /proc and getrusage count in clock ticks; the child's exit adds a little
    assert got["child"] - tick <= got["live"] <= got["child"] + 0.25  # counted twice would be ~2x
    assert got["child"] - tick <= got["ended"] <= got["child"] + 0.25
    assert abs(got["sum"]) < 1e-6


@pytest.mark.torch
def test_torch_epoch_runs_in_rounds_on_a_tiny_workload(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from benchmarks import torch_epoch

    monkeypatch.setattr(workloads, "DATA", tmp_path)
    args = argparse.Namespace(rows=2000, rounds=2, peers=[], peer_repeat=None, peer_timeout=60.0)
    results = torch_epoch.run(args)
    assert [(r.benchmark, r.variant) for r in results] == [
        (f"torch_epoch/{w}", v) for w in workloads.WORKLOADS
        for v in (torch_epoch.FLOOR, "petastream loader, 1 thread(s)", "petastream loader, 2 thread(s)")]
    for r in results:
        assert r.seconds and len(r.times) == len(r.ratios) == len(r.cpu) == 2, r.note


def test_image_epoch_table_gives_compat_over_petastorm_of_the_same_mode():
    from benchmarks import image_epoch

    def row(variant: str, ratios: list[float]) -> harness.Result:
        return harness.Result(image_epoch.NAME, variant, N, 1.0, ratios=ratios, times=[1.0] * len(ratios))

    rows_p = image_epoch.variant("petastorm", "reader", "process")
    rows_c = image_epoch.variant("petastream-compat", "reader", "process")
    assert rows_c == "petastream-compat make_reader, rows (reader_pool_type='process')"
    assert image_epoch.variant("petastorm", "dataloader", "thread") == \
        "petastorm make_reader + pytorch.DataLoader(batch_size=64)"
    lines = image_epoch.table([row(image_epoch.DECODE_FLOOR, [1.0] * 3), row(rows_c, [2.0, 3.0, 4.0]),
                               row(rows_p, [1.0, 1.5, 2.0]),
                               harness.Result(image_epoch.NAME, "gone", N, None, note="unavailable: no env")])
    lines = lines.splitlines()
    assert lines[0].split()[:4] == ["variant", "rows/s", "x", "decode"]
    compat = lines[2].split()
    # rows/s, x decode (min-max), x Petastorm: 3 / 1.5, and (its least over Petastorm's most - most over least)
    assert compat[-5:] == ["100", "3", "(2-4)", "2.00", "(1.00-4.00)"]
    assert "2.00" not in lines[3] and lines[4].split()[1:] == ["unavailable", "unavailable:", "no", "env"]
