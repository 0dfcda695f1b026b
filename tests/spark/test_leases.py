"""Leases, claims and liveness records, without Spark: real processes, real files, real S3
(moto) where the object-store path differs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import petastream as ps
from petastream.spark import _records, cache, claims, leases
from petastream.storage.location import resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env() -> dict[str, str]:
    """This environment (the S3 fixture's endpoint included), importing this checkout."""
    return dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep + ROOT)


@pytest.fixture(autouse=True)
def _no_leases_left():
    yield
    for url in list(leases._HELD):
        leases.forget(url)


def _dataset(parent: str, name: str = "petastream-k") -> str:
    url = f"{parent.rstrip('/')}/{name}"
    ps.write_mds({"id": [1, 2, 3]}, url, columns={"id": "int64"})
    return url


def _plant(url: str, kind: str, *, host: str = "other-host", pid: int = 1, age: float = 0.0,
           storage_options: dict | None = None) -> str:
    """A record as another process would write it (``age`` seconds old)."""
    owner = _records.Owner(host, pid, None, f"n{time.monotonic_ns()}")
    doc = json.loads(_records.encode(owner))
    doc["heartbeat"] -= age
    name = f"{kind}-{owner.name}.json"
    resolve(url, storage_options).child(leases.LEASE_DIR).write_bytes_atomic(name, json.dumps(doc).encode())
    return name


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- liveness ----------------------------------------------------------------------------------


def test_liveness_same_host_by_pid_other_host_by_heartbeat():
    me = json.loads(_records.encode(_records.me()))
    assert _records.alive(me)
    parent = dict(me, pid=os.getppid(), start=None, nonce="x")
    assert _records.alive(parent)
    assert not _records.alive(dict(parent, start="1"))  # the pid was reused by another process
    assert not _records.alive(dict(me, pid=_dead_pid(), start=None))
    zombie = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    zombie.kill()
    time.sleep(0.5)  # killed, not reaped yet: a zombie is dead
    assert not _records.alive(dict(me, pid=zombie.pid, start=None))
    zombie.wait()
    other = dict(me, host="other-host")
    assert _records.alive(other)
    assert not _records.alive(dict(other, heartbeat=time.time() - _records.TTL_S - 1))
    assert not _records.alive({"host": "other-host"})


# -- the lease rule ----------------------------------------------------------------------------


def test_exit_release_deletes_only_when_nobody_else_uses_it(tmp_path):
    url = _dataset(str(tmp_path))
    assert leases.acquire(url) and leases.held(url)
    live = _plant(url, "use")  # a live process on another host
    assert leases.release(url) is False and os.path.exists(f"{url}/index.json")
    assert leases.acquire(url)
    _plant(url, "use", age=_records.TTL_S + 5)  # its heartbeat stopped: crashed
    _plant(url, "use", host=_records.HOST, pid=_dead_pid())  # gone from this host
    os.remove(f"{url}/.leases/{live}")  # the live one exits
    assert leases.release(url) is True and not os.path.exists(url)


def test_keep_pins_stop_the_exit_cleanup_not_an_explicit_delete(tmp_path):
    url = _dataset(str(tmp_path))
    assert leases.acquire(url, keep=True)
    assert leases.release(url) is False  # at exit: kept
    assert leases.acquire(url)  # another session of this process reuses it, default settings
    assert leases.release(url) is False  # the keep pin still keeps it
    assert leases.users(url) == [f"keep:{_records.HOST}:{os.getpid()}"]
    assert leases.users(url, count_keep=False) == []
    _plant(url, "keep")
    assert leases.release(url, explicit=True) is True and not os.path.exists(url)


def test_explicit_delete_keeps_a_dataset_another_process_reads_unless_forced(tmp_path):
    url = _dataset(str(tmp_path))
    leases.acquire(url)
    _plant(url, "use")
    assert leases.release(url, explicit=True) is False and os.path.exists(f"{url}/index.json")
    assert leases.release(url, explicit=True, force=True) is True and not os.path.exists(url)


def test_a_new_user_backs_off_from_a_live_deletion(tmp_path):
    url = _dataset(str(tmp_path))
    tomb = _plant(url, "deleting")
    assert leases.acquire(url) is False and not leases.held(url)
    assert [n for n in os.listdir(f"{url}/.leases")] == [tomb]  # its own lease withdrawn
    os.remove(f"{url}/.leases/{tomb}")
    _plant(url, "deleting", host=_records.HOST, pid=_dead_pid())  # a deleter that died
    assert leases.acquire(url)


def test_a_dataset_without_index_is_not_leased(tmp_path):
    url = _dataset(str(tmp_path))
    os.remove(f"{url}/index.json")
    assert leases.acquire(url) is False


def test_deletion_removes_the_index_first(tmp_path, monkeypatch):
    url = _dataset(str(tmp_path))

    def cut_short(self):
        raise OSError("killed midway")

    monkeypatch.setattr(type(resolve(url)), "delete_tree", cut_short)
    with pytest.raises(OSError):
        cache.delete_dataset(url)
    assert os.path.exists(url) and not os.path.exists(f"{url}/index.json")
    assert cache.find_complete(str(tmp_path), "k") is None


def test_at_exit_in_a_fresh_interpreter(tmp_path):
    shared, alone = _dataset(str(tmp_path), "petastream-a"), _dataset(str(tmp_path), "petastream-b")
    _plant(shared, "use")
    code = ("from petastream.spark import leases; "
            f"assert leases.acquire({shared!r}) and leases.acquire({alone!r})")
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())
    assert os.path.exists(f"{shared}/index.json") and not os.path.exists(alone)
    assert [n.split("-")[0] for n in os.listdir(f"{shared}/.leases")] == ["use"]  # only ours


def test_a_forked_child_does_not_release_its_parents_leases(tmp_path):
    url = _dataset(str(tmp_path))
    code = textwrap.dedent(f"""
        import os, sys
        from petastream.spark import leases
        assert leases.acquire({url!r})
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # runs the at-exit handlers in the child
        os.waitpid(pid, 0)
        assert os.path.exists({url!r} + "/index.json"), "the child deleted it"
    """)
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())
    assert not os.path.exists(url)  # the parent's exit did


@pytest.mark.cloud
def test_leases_on_s3(s3_bucket):
    url = _dataset(s3_bucket)
    assert leases.acquire(url)
    live = _plant(url, "use", storage_options=None)
    assert leases.release(url) is False and resolve(url).exists("index.json")
    tomb = _plant(url, "deleting")
    assert leases.acquire(url) is False
    resolve(url).child(leases.LEASE_DIR).remove(tomb)
    assert leases.acquire(url)
    _records.remove(resolve(url).child(leases.LEASE_DIR), live)
    assert leases.release(url) is True
    assert _records.list_names(resolve(url)) == []


# -- claims ------------------------------------------------------------------------------------

_HOLDER = textwrap.dedent("""
    import sys, time
    from petastream.spark import claims
    with claims.claim(sys.argv[1], "k1") as held:
        assert held
        print("held", flush=True)
        time.sleep(120)
""")


def _holder(parent: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, parent], env=_env(), stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


@pytest.mark.parametrize("store", ["local", pytest.param("s3", marks=pytest.mark.cloud)])
def test_a_waiter_takes_over_from_a_killed_writer_at_once(store, tmp_path, request, caplog):
    parent = str(tmp_path) if store == "local" else request.getfixturevalue("s3_bucket")
    holder = _holder(parent)
    got: list[float] = []

    def wait() -> None:
        with claims.claim(parent, "k1", progress_interval=0.5) as held:
            got.append(time.monotonic() if held else -1.0)

    with caplog.at_level(logging.INFO, logger="petastream.spark"):
        waiter = threading.Thread(target=wait)
        waiter.start()
        deadline = time.monotonic() + 15  # a loaded machine (or moto) may take a while to say so
        while "waiting for the process" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not got and "waiting for the process" in caplog.text
        holder.kill()  # kill -9
        killed = time.monotonic()
        holder.wait()
        waiter.join(30)
    assert got and got[0] > 0 and got[0] - killed < 3.0, got
    assert "is gone; this process takes over" in caplog.text
    names = _records.list_names(resolve(parent).child(claims.CLAIM_DIR))
    assert "k1.json" not in names and not [n for n in names if _records.me().name in n]
    assert claims.waiters(parent, "k1") == []  # the killed holder's record is pruned


def test_claim_wait_is_bounded(tmp_path, caplog):
    holder = _holder(str(tmp_path))
    try:
        with caplog.at_level(logging.WARNING, logger="petastream.spark"):
            with claims.claim(str(tmp_path), "k1", timeout=1.0) as held:
                assert held is False
        assert "writing it here too" in caplog.text
    finally:
        holder.kill()
        holder.wait()


def test_claims_of_other_hosts_expire_by_heartbeat(tmp_path):
    loc = resolve(str(tmp_path)).child(claims.CLAIM_DIR)
    owner = _records.Owner("other-host", 1, None, "abc")
    doc = json.loads(_records.encode(owner))
    loc.write_bytes_atomic("k2.json", json.dumps(doc).encode())
    with claims.claim(str(tmp_path), "k2", timeout=0.5) as held:
        assert held is False  # alive on its host: waited, then gave up
    doc["heartbeat"] -= _records.TTL_S + 1
    loc.write_bytes_atomic("k2.json", json.dumps(doc).encode())
    with claims.claim(str(tmp_path), "k2", timeout=0.5) as held:
        assert held is True
    assert not os.path.exists(loc.child("k2.json").path)


@pytest.mark.parametrize("store", ["local", pytest.param("s3", marks=pytest.mark.cloud)])
def test_records_are_created_once(store, tmp_path, request):
    parent = str(tmp_path) if store == "local" else request.getfixturevalue("s3_bucket")
    loc = resolve(parent).child("claims")
    assert _records.create(loc, "a.json", b'{"n": 1}') is True
    assert _records.create(loc, "a.json", b'{"n": 2}') is False  # S3: a conditional PUT
    assert _records.read(loc, "a.json") == {"n": 1} and _records.list_names(loc) == ["a.json"]
    _records.remove(loc, "a.json")
    _records.remove(loc, "a.json")  # gone already: fine
    assert not _records.exists(loc, "a.json")


def test_a_writer_keeps_its_dataset_for_processes_waiting_for_it(tmp_path):
    """The writer publishes and exits at once: a waiter that has not leased the dataset yet
    still gets it (it registered before the write finished)."""
    parent = str(tmp_path)
    url = _dataset(parent, "petastream-k3")
    assert leases.acquire(url, waiters=lambda: claims.waiters(parent, "k3"))
    loc = resolve(parent).child(claims.CLAIM_DIR)
    owner = _records.Owner("other-host", 1, None, "w1")
    loc.write_bytes_atomic(f"k3.waiting-{owner.name}.json", _records.encode(owner))
    assert claims.waiters(parent, "k3") == ["other-host:1"]
    assert leases.release(url) is False and os.path.exists(f"{url}/index.json")
    doc = json.loads(_records.encode(owner))
    doc["heartbeat"] -= _records.TTL_S + 1  # that waiter died
    loc.write_bytes_atomic(f"k3.waiting-{owner.name}.json", json.dumps(doc).encode())
    assert leases.acquire(url, waiters=lambda: claims.waiters(parent, "k3"))
    assert leases.release(url) is True and not os.path.exists(url)
    assert _records.list_names(loc) == []
