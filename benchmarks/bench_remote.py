"""Remote runs on a local Ray cluster: start-up, a job's round trip, and traces coming home.

Peer for the fetch: Ray's own log download (what ``ray logs`` does), reading the same raw trace
from the same node through the same dashboard endpoint. ncompass packs (gzip, checksummed
chunks) to make the transfer resumable and smaller; this shows what that costs and saves.
On loopback the network is free, so the byte ratio is what matters for a real cluster link.

Needs Ray (``pip install 'ncompass[remote]'``). Starts one cluster on 127.0.0.1 and stops it.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ncompass.remote.address import Cluster  # noqa: E402
from ncompass.remote.config import ConfigFile, RemoteConfig  # noqa: E402
from ncompass.remote.dashboard import Dashboard  # noqa: E402
from ncompass.remote.fetch import ChunkProgress, fetch_job  # noqa: E402
from ncompass.remote.manifest import node_folder  # noqa: E402
from ncompass.remote.submission import SubmitOptions, submit  # noqa: E402
from tests.remote.cluster import LocalRayCluster  # noqa: E402

HELLO = "print('hello from the cluster')\n"
# A Chrome trace of about SIZE MB, the shape the torch profiler writes (one event per line).
TRACE_WRITER = """\
import json, os, sys
size = int(sys.argv[1]) * 1_000_000
path = os.path.join(os.environ["NCOMPASS_TRACE_DIR"], "big.json")
with open(path, "w") as out:
    out.write('{"traceEvents": [\\n')
    written, i = 0, 0
    while written < size:
        line = json.dumps({"ph": "X", "cat": "kernel", "name": f"ampere_sgemm_128x64_nn_{i % 97}",
                           "pid": 0, "tid": 7, "ts": 1000.5 + i * 3.25, "dur": 2.75,
                           "args": {"correlation": i, "stream": 7, "grid": [64, 1, 1]}})
        out.write(line + ",\\n")
        written += len(line) + 2
        i += 1
    out.write('{"ph": "M", "name": "end", "pid": 0, "tid": 0}]}\\n')
"""


class _Quiet:
    def status(self, message: str) -> None:
        pass

    def output(self, text: str) -> None:
        pass

    def progress(self, event: ChunkProgress) -> None:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=50, help="size of the synthetic trace")
    parser.add_argument("--jobs", type=int, default=3, help="round trips to time")
    parser.add_argument("--quick", action="store_true", help="10 MB, 2 round trips")
    args = parser.parse_args()
    if args.quick:
        args.size_mb, args.jobs = 10, 2
    try:
        import ray.job_submission  # noqa: F401
    except ImportError:
        print("Ray is not installed: pip install 'ncompass[remote]'", file=sys.stderr)
        return 1
    cluster = LocalRayCluster()
    work = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    try:
        cluster.start('{"fake_gpu": 2}')
        print(f"Ray start-up (head, dashboard, 2 CPUs): {cluster.startup_s:.1f} s")
        (work / "hello.py").write_text(HELLO)
        (work / "writer.py").write_text(TRACE_WRITER)
        settings = ConfigFile(work / "none.yaml", RemoteConfig(token=cluster.token))

        def run(script: str, *arguments: str) -> tuple[float, str]:
            started = time.perf_counter()
            result = submit(
                SubmitOptions(
                    script=str(work / script),
                    args=list(arguments),
                    profiler="none",
                    gpus=0,
                    upload_dir=work,
                    output_dir=work / "traces",
                    address=cluster.url,
                ),
                _Quiet(),
                settings,
            )
            assert result.exit_code == 0, result
            return time.perf_counter() - started, result.job_id

        trips = [run("hello.py")[0] for _ in range(args.jobs)]
        print(
            f"job round trip (submit, run, stream, fetch; no torch): median "
            f"{statistics.median(trips):.1f} s over {len(trips)} (first {trips[0]:.1f} s)"
        )
        took, job_id = run("writer.py", str(args.size_mb))
        print(f"job writing a {args.size_mb} MB trace, incl. pack and fetch: {took:.1f} s")
        dashboard = Dashboard(
            Cluster(cluster.url, "bench", {"Authorization": f"Bearer {cluster.token}"})
        )
        started = time.perf_counter()
        report = fetch_job(dashboard, job_id, work / "again" / job_id)
        ours = time.perf_counter() - started
        (node,) = dashboard.nodes()
        raw = f"{node_folder(job_id, 0)}/run/big.json"
        started = time.perf_counter()
        peer_bytes = sum(len(block) for block in dashboard.read_file(node.node_id, raw))
        peer = time.perf_counter() - started
        print(
            f"fetch {report.total_bytes / 1e6:.0f} MB: ncompass {ours:.2f} s, "
            f"{report.bytes_downloaded / 1e6:.1f} MB moved | ray logs (raw) {peer:.2f} s, "
            f"{peer_bytes / 1e6:.1f} MB moved | time x{ours / peer:.2f}, "
            f"bytes x{report.bytes_downloaded / peer_bytes:.3f}"
        )
        started = time.perf_counter()
        again = fetch_job(dashboard, job_id, work / "again" / job_id)
        print(
            f"fetch again (everything here already): {time.perf_counter() - started:.2f} s, "
            f"{again.bytes_downloaded} bytes moved"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        started = time.perf_counter()
        cluster.stop()
        left = cluster.leftovers()
        print(
            f"cluster stopped in {time.perf_counter() - started:.1f} s; processes left: {len(left)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
