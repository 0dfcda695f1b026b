"""Run benchmarks: ``python -m benchmarks.run [torch_epoch tf_epoch ...] [--rows N]``.

Peers (Petastorm's converter, Mosaic Streaming) run in their own environments under
``.bench/envs``: ``--build-peers`` builds the missing ones first (``benchmarks/envs/build.sh``);
without them their rows read 'unavailable'.
"""

from __future__ import annotations

import argparse
import importlib

from benchmarks import peer_envs
from benchmarks.harness import report, save

BENCHMARKS = {
    "mds_decode": ("benchmarks.mds_decode", "floor: np.frombuffer in memory"),
    "materialize": ("benchmarks.materialize", "spark df.write.parquet (snappy)"),
    "torch_epoch": ("benchmarks.torch_epoch", "floor: numpy perm+gather+from_numpy"),
    "tf_epoch": ("benchmarks.tf_epoch", "floor: numpy perm+gather+convert_to_tensor"),
    "parquet_epoch": ("benchmarks.parquet_epoch", "floor: numpy perm+gather+from_numpy"),
}
PEER_CHOICES = (*peer_envs.PEERS, "compat")
ROUNDS_DEFAULT = 5  # issue 36: medians of at least 5, interleaved
ROUNDS_MATERIALIZE = 2  # a materialization round converts the whole DataFrame three ways


def _peers(value: str) -> list[str]:
    names = [] if value == "none" else [v for v in value.split(",") if v]
    bad = sorted(set(names) - set(PEER_CHOICES))
    if bad:
        raise argparse.ArgumentTypeError(f"unknown peer(s) {bad}; valid: {list(PEER_CHOICES)} or 'none'")
    return names


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", default=list(BENCHMARKS), help=f"any of {list(BENCHMARKS)}")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--peers", type=_peers, default=list(PEER_CHOICES),
                   help=f"comma-separated peers for the epoch benchmarks, of {list(PEER_CHOICES)} "
                        "('compat' = petastream's Petastorm façade), or 'none' (default: all)")
    p.add_argument("--build-peers", action="store_true",
                   help="build the peers' environments first (.bench/envs; minutes the first time)")
    p.add_argument("--peer-repeat", type=int, default=None,
                   help="timed epochs per peer subprocess (median and spread; default: --rounds)")
    p.add_argument("--peer-timeout", type=float, default=1800.0, help="seconds per peer subprocess")
    p.add_argument("--rounds", type=int, default=None,
                   help="interleaved timed rounds after a warm-up (medians and spread; default: "
                        f"{ROUNDS_DEFAULT} for the epoch benchmarks, {ROUNDS_MATERIALIZE} for materialize)")
    args = p.parse_args()
    if args.rounds is not None and args.rounds < 1:
        p.error(f"--rounds: at least 1, got {args.rounds}")
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {unknown}; valid: {list(BENCHMARKS)}")
    if args.build_peers:
        for peer in peer_envs.PEERS:
            if peer in args.peers and (why := peer_envs.build(peer)):
                print(f"{peer}: {why}")
    for name in args.names:
        module, floor = BENCHMARKS[name]
        rounds = args.rounds or (ROUNDS_MATERIALIZE if name == "materialize" else ROUNDS_DEFAULT)
        results = importlib.import_module(module).run(argparse.Namespace(**{**vars(args), "rounds": rounds}))
        print(report(results, floor))
        print(f"saved {save(name, results)}\n")


if __name__ == "__main__":
    main()
