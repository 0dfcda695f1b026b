"""petastream.storage: the I/O layer under every format.

Where bytes live and the node's copy of them, whatever the format:

* :mod:`.location`: a directory or file on any fsspec filesystem (``Location``, ``resolve``);
* :mod:`.cache`: the node's shard cache (one fill per key, leases by memory maps, eviction
  within ``cache_limit``), with :mod:`.pins` (maps that pin entries), :mod:`.announce` (what
  each process needs soon; pacing positions) and :mod:`._holders`;
* :mod:`.readahead`: a source's open shards (an LRU) and their read-ahead on a bounded pool;
* :mod:`.shards`: :class:`~.shards.ShardStore`, one source's shards in the cache (prefetch,
  ``is_loaded``, close, cache peers, per-reader shares) over a format's
  :class:`~.shards.ShardLoader` (load / cost / inline);
* :mod:`.sizes` (``"50gb"``, ``cache_limit``) and :mod:`.counters` (GETs, bytes, hits).

MDS (``petastream.mds``) and Parquet (``petastream.parquet``) are formats over it; it
imports neither.
"""
