"""Reward phase speed: endpoint requests one at a time vs concurrent, and code-reward
sandboxes one at a time vs the pool, side by side on the same batch.

    .venv/bin/python bench/rewards.py            # ~20 s on 2 cores

The endpoint is a server in this process on 127.0.0.1 that answers each request after
LATENCY_S (a judge model's latency, not its compute). Each measurement is the median of
REPEATS runs. Last line: `rewards: endpoint_speedup=<serial/concurrent>
sandbox_speedup=<serial/pool>`.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grpo.data.code_task import code_examples  # noqa: E402
from grpo.rewards.batch import RewardBatch
from grpo.rewards.code import run_tests  # noqa: E402
from grpo.rewards.http import score_with_endpoint  # noqa: E402
from grpo.rewards.scoring import Rewarder  # noqa: E402
from grpo.spec import CodeReward, HttpReward  # noqa: E402

LATENCY_S = 0.2
GROUPS, G = 16, 4
REPEATS = 3


class SlowJudge(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        time.sleep(LATENCY_S)
        data = json.dumps({"rewards": [[0.5] * len(g["completions"]) for g in body["groups"]]})
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())

    def log_message(self, *args: object) -> None:
        pass


def median_seconds(work: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def code_batch() -> RewardBatch:
    examples = (code_examples("train") * 2)[:GROUPS]
    completions = [
        f"```python\n{e.answer}\n```" if i % 2 else "def broken(:"
        for e in examples
        for i in range(G)
    ]
    return RewardBatch(
        run_id="bench",
        step=1,
        examples=examples,
        prompts=[e.prompt for e in examples],
        completions=completions,
        num_tokens=[1] * len(completions),
    )


def endpoint_seconds(batch: RewardBatch) -> tuple[float, float]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowJudge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    try:
        one = HttpReward(url=f"http://{host}/", groups_per_request=1, max_concurrency=1)
        many = HttpReward(url=f"http://{host}/", groups_per_request=1, max_concurrency=8)
        serial = median_seconds(lambda: score_with_endpoint(one, batch, allowed_hosts=[host]))
        concurrent = median_seconds(lambda: score_with_endpoint(many, batch, allowed_hosts=[host]))
    finally:
        server.shutdown()
    return serial, concurrent


def sandbox_seconds(batch: RewardBatch) -> tuple[float, float]:
    entry = CodeReward()
    jobs = [(c, batch.examples[i // G].data["tests"]) for i, c in enumerate(batch.completions)]
    serial = median_seconds(lambda: [run_tests(program, tests, entry) for program, tests in jobs])
    rewarder = Rewarder([entry])
    pooled = median_seconds(lambda: rewarder.score(batch))
    return serial, pooled


def main() -> None:
    batch = code_batch()
    e_serial, e_concurrent = endpoint_seconds(batch)
    print(f"endpoint, {GROUPS} requests of {LATENCY_S * 1000:.0f} ms: one at a time "
          f"{e_serial:.2f} s, max_concurrency=8 {e_concurrent:.2f} s")  # fmt: skip
    s_serial, s_pooled = sandbox_seconds(batch)
    print(f"code, {GROUPS * G} sandboxes: one at a time {s_serial:.2f} s, pool {s_pooled:.2f} s")
    print(
        f"rewards: endpoint_speedup={e_serial / e_concurrent:.2f} "
        f"sandbox_speedup={s_serial / s_pooled:.2f}"
    )


if __name__ == "__main__":
    main()
