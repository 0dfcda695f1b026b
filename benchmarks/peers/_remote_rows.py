"""The rows of the remote benchmark, built identically in every environment (numpy only).

Image-like rows, as in the remote-streaming numbers peers publish (ImageNet from S3): ``id``
(int64), ``label`` (int32), ``features`` (16 float32) and a 16 KiB ``payload`` (bytes): half
random, half zeros, so zstd halves it as it would a mildly compressible record.
"""

from __future__ import annotations

import numpy as np

PAYLOAD = 16 << 10


def make_rows(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    payload = np.zeros((n, PAYLOAD), dtype=np.uint8)
    payload[:, : PAYLOAD // 2] = rng.integers(0, 256, (n, PAYLOAD // 2), dtype=np.uint8)
    return {
        "id": np.arange(n, dtype=np.int64),
        "label": rng.integers(0, 10, n).astype(np.int32),
        "features": rng.random((n, 16), dtype=np.float32),
        "payload": payload,
    }


def row_bytes() -> int:
    return 8 + 4 + 64 + PAYLOAD
