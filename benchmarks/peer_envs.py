"""Peers in their own environments: build them, run their epoch scripts, read the results.

Petastorm and Mosaic Streaming cannot live in petastream's environment (Petastorm needs
pyarrow 14 and numpy < 2), so each gets a venv under ``.bench/envs/<peer>`` built by
``benchmarks/envs/build.sh`` from the pinned files beside it, and its runner in
``benchmarks/peers/`` runs there as a subprocess that prints one JSON line. A peer whose env is
missing, or whose run fails, comes back as ``{"error": "unavailable: <why>"}`` (or
``"unsupported: ..."`` / ``"failed: ..."``): the harness prints that instead of a number.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from petastream.bench import cpu_between, snapshot

Floor = Callable[[], float]  # one epoch of the in-memory floor: its wall seconds

ROOT = Path(__file__).resolve().parent.parent
ENVS = Path(os.environ.get("PETASTREAM_BENCH_ENVS", ROOT / ".bench" / "envs"))
BUILD = Path(__file__).resolve().parent / "envs" / "build.sh"
RUNNERS = Path(__file__).resolve().parent / "peers"
PEERS = ("petastorm", "mosaic")
_build_errors: dict[str, str] = {}


def build(peer: str) -> str | None:
    """Build (or find up to date) a peer's env; the reason it failed, or None."""
    log = ENVS / f"{peer}.build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"building the {peer} env (log: {log}) ...", flush=True)
    with open(log, "w") as f:
        rc = subprocess.call(["bash", str(BUILD), peer], stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    if rc:
        tail = log.read_text().strip().splitlines()[-1:] or [""]
        _build_errors[peer] = f"env build failed (rc {rc}, see {log}): {tail[0][:200]}"
        return _build_errors[peer]
    _build_errors.pop(peer, None)
    return None


def python_for(peer: str) -> tuple[str | None, str]:
    """The peer env's interpreter, or None and why it is unavailable."""
    if peer in _build_errors:
        return None, _build_errors[peer]
    env = ENVS / peer
    if not (env / ".built").exists():
        return None, f"no {peer} env (build it: benchmarks/envs/build.sh {peer}, or --build-peers)"
    return str(env / "bin" / "python"), ""


def run_runner(script: str, args: list[str], peer: str | None, timeout: float,
               extra_env: dict[str, str] | None = None) -> dict:
    """Run ``benchmarks/peers/<script>`` with ``peer``'s python (None: this interpreter),
    ``extra_env`` added to its environment (e.g. ``PYTHONPATH`` of another checkout)."""
    if peer is None:
        python = sys.executable
    else:
        python, why = python_for(peer)
        if python is None:
            return {"error": f"unavailable: {why}"}
    env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python,
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore")
    if peer is not None:
        env.pop("PYTHONPATH", None)
    env.update(extra_env or {})
    cmd = [python, str(RUNNERS / script), *args]
    # own session: on timeout the whole group (Spark's JVM included) goes
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"failed: timed out after {timeout:.0f} s"}
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    tail = " | ".join(err.strip().splitlines()[-3:])[-300:]
    return {"error": f"failed: {script} exited {proc.returncode} without a result: {tail}"}


def run_bracketed(script: str, args: list[str], peer: str | None, timeout: float,
                  floor: Floor | None) -> dict:
    """``run_runner``, with the floor timed just before and just after the subprocess
    (``res["floors"]``: a subprocess cannot interleave with it epoch by epoch) and the CPU seconds
    of the whole subprocess, start-up and warm-up included (``extra["subprocess_cpu_s"]``)."""
    before = floor() if floor else None
    start = snapshot()
    res = run_runner(script, args, peer, timeout)
    spent = cpu_between(start, snapshot())
    if before is not None and floor is not None and "error" not in res:
        res["floors"] = [round(before, 4), round(floor(), 4)]
    if "error" not in res:
        res["extra"] = {**(res.get("extra") or {}), "subprocess_cpu_s": round(spent, 3)}
    return res


def note_for(res: dict, note: str = "") -> str:
    """The table note: the error if any, then ``note``, then empty/incomplete epochs seen."""
    parts = [res["error"]] if "error" in res else []
    if note and not res.get("error", "").startswith("unavailable"):
        parts.append(note)
    if res.get("incomplete"):
        parts.append(f"INCOMPLETE epochs seen (rows): {res['incomplete']} of {res.get('epochs')} run, retried")
    return "; ".join(parts)


def _opts(args) -> tuple[set[str], int, float]:
    peers = getattr(args, "peers", None)
    peers = set(PEERS + ("compat",)) if peers is None else set(peers)
    # a peer's timed epochs: --peer-repeat, else as many as the in-process rows' rounds
    repeat = getattr(args, "peer_repeat", None) or getattr(args, "rounds", None) or 1
    return peers, repeat, getattr(args, "peer_timeout", 1800.0)


def _materialize_note(res: dict) -> str:
    ex = res.get("extra") or {}
    if "materialize_rows_per_s" not in ex:
        return ""
    rg = f", {ex['row_groups']} row group(s) in {ex['parquet_files']} file(s)" if "row_groups" in ex else ""
    return f"materialize (untimed above) {ex['materialize_rows_per_s']:,} rows/s{rg}"


def converter_epochs(framework: str, workload: str, paths: dict, n: int, args,
                     floor: Floor | None = None) -> list[tuple[str, dict, str]]:
    """(variant, result, note) for Petastorm's converter and petastream's compat façade
    (``floor``: timed before and after each subprocess, :func:`run_bracketed`).

    ``framework`` is 'torch' (``make_torch_dataloader``) or 'tf' (``make_tf_dataset``). On
    'binary' with torch, Petastorm's failure is reported as it happens, then a separately
    labelled run drops the payload/name columns.
    """
    peers, repeat, timeout = _opts(args)
    call = "make_torch_dataloader" if framework == "torch" else "make_tf_dataset"
    shuffle = "default shuffle_row_groups=True: row-group order only, rows within a group in order"
    runs = []
    for impl, peer, label in (("petastorm", "petastorm", f"petastorm converter {call}"),
                              ("petastream-compat", None, f"petastream compat {call}")):
        if (peer or "compat") not in peers:
            continue
        drops = [([], "thread")]
        if impl == "petastorm" and framework == "torch" and workload == "binary":
            drops.append((["payload", "name"], "thread"))
        for drop, pool in drops:
            cache = os.path.join(paths["root"], f"cache-{impl}-{framework}")
            cli = ["--impl", impl, "--framework", framework, "--parquet", paths["parquet"],
                   "--cache-dir", cache, "--rows", str(n), "--repeat", str(repeat)]
            if drop:
                cli += ["--drop", *drop]
            if pool != "thread":
                cli += ["--pool", pool]
            res = run_bracketed("petastorm_epoch.py", cli, peer, timeout, floor)
            note = shuffle if impl == "petastorm" else "same script, import from petastream.compat"
            if drop:
                note = f"NOT the full workload: {', '.join(drop)} dropped before converting; {note}"
            mat = _materialize_note(res)
            note = f"{note}; {mat}" if mat else note
            name = label + (f", {'+'.join(drop)} DROPPED" if drop else "")
            if pool != "thread":
                name += f"(reader_pool_type='{pool}')"
                note += "; a new context (and worker processes) per epoch, as the script does"
            runs.append((name, res, note_for(res, note)))
    return runs


def mosaic_epoch(paths: dict, n: int, args, floor: Floor | None = None) -> tuple[str, dict, str] | None:
    """Mosaic's StreamingDataset + DataLoader, the better median of num_workers 0 and 2."""
    peers, repeat, timeout = _opts(args)
    if "mosaic" not in peers:
        return None
    label = "mosaic StreamingDataset+DataLoader"
    tried = {}
    for workers in (0, 2):
        cli = ["--mds", paths["mds"], "--rows", str(n), "--workers", str(workers),
               "--repeat", str(repeat), "--warmup", "0"]
        tried[workers] = run_bracketed("mosaic_epoch.py", cli, "mosaic", timeout, floor)
        if str(tried[workers].get("error", "")).startswith("unavailable"):
            return label, tried[workers], note_for(tried[workers])
    ok = {w: r for w, r in tried.items() if r.get("seconds")}
    if not ok:
        return label, tried[0], note_for(tried[0])
    best = min(ok, key=lambda w: _median(ok[w]))
    secs = ", ".join(f"{w}: {_median(r):.1f} s" if r.get("seconds") else f"{w}: {r.get('error')}"
                     for w, r in tried.items())
    note = f"best of num_workers ({secs}) = {best}; no warm-up epoch (an epoch takes minutes)"
    return f"{label}, num_workers={best}", ok[best], note_for(ok[best], note)


def _median(res: dict) -> float:
    return statistics.median(res.get("times") or [res["seconds"]])


def reader_epochs(paths: dict, n: int, args, workers: int = 2,
                  floor: Floor | None = None) -> list[tuple[str, dict, str]]:
    """(variant, result, note) for ``make_batch_reader`` + ``BatchedDataLoader`` over the
    workload's Parquet copy: Petastorm's, and petastream compat's (the same script)."""
    peers, repeat, timeout = _opts(args)
    runs = []
    for cached in (False, True):
        for impl, peer in (("petastorm", "petastorm"), ("petastream-compat", None)):
            if (peer or "compat") not in peers:
                continue
            cli = ["--impl", impl, "--parquet", paths["parquet"], "--rows", str(n), "--repeat", str(repeat),
                   "--workers", str(workers)]
            with tempfile.TemporaryDirectory(prefix=f"{impl}-cache-") as cache:
                res = run_bracketed("petastorm_reader_epoch.py", cli + (["--cache-dir", cache] if cached else []),
                                    peer, timeout, floor)
            note = "a reader and loader per epoch, as a script makes them"
            if peer is None:
                note += "; same script, import from petastream.compat"
            variant = f"{impl} make_batch_reader+BatchedDataLoader, workers_count={workers}"
            runs.append((variant + (", cache_type='local-disk'" if cached else ""), res, note_for(res, note)))
    return runs
