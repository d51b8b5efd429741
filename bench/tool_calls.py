"""Multi-turn tool rollouts: trajectories per second with a step's tool calls run in
parallel across trajectories vs one at a time, side by side on the same samples.

    .venv/bin/python bench/tool_calls.py            # ~1 min on 2 cores (after the warm-up)

The policy is the warmed-up builtin:tiny-tools on our native engine, sampling the tools
task's prompts with the same seeds on both sides (so both run the same calls); the tool is
an `http` tool whose endpoint, a server in this process on 127.0.0.1, answers after
LATENCY_S (a search index's or an interpreter's latency, not its compute). Each side is
the median of REPEATS rollouts. Last line: `tools: serial=<traj/s> parallel=<traj/s>
speedup=<parallel/serial> calls=<calls per rollout>`.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from grpo.data.tools_task import calc, tools_examples  # noqa: E402
from grpo.engines.engine import GenerationRequest  # noqa: E402
from grpo.engines.native import NativeEngine  # noqa: E402
from grpo.engines.tool_loop import ToolLoop  # noqa: E402
from grpo.models.loading import load_policy  # noqa: E402
from grpo.rollout.rollout import tokenize_prompts  # noqa: E402
from grpo.spec.generation import Sampling  # noqa: E402
from grpo.spec.tools import HttpTool  # noqa: E402
from grpo.tools.kind import ToolRunFacts  # noqa: E402
from grpo.tools.toolbox import Toolbox  # noqa: E402

LATENCY_S = 0.1
PROMPTS, G = 16, 8
CONCURRENCY = 32
REPEATS = 3
CACHE = Path("~/.cache/grpo").expanduser()


class SlowCalculator(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        time.sleep(LATENCY_S)
        data = json.dumps({"result": calc(str(body["arguments"].get("x", "")))}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def tool_loop(host: str, concurrency: int, policy: SimpleNamespace) -> ToolLoop:
    entry = HttpTool(label="calc", url=f"http://{host}/calc", description="Multiply.")
    toolbox = Toolbox([entry], ToolRunFacts(tool_hosts=(host,)), max_result_chars=200)
    return ToolLoop(NativeEngine(policy), toolbox, policy.tokenizer,  
                    eos_token_ids=policy.eos_token_ids, max_iterations=2,
                    concurrency=concurrency)  # fmt: skip


def rollout_request(policy: SimpleNamespace) -> GenerationRequest:
    schemas = [{"type": "function", "function": {"name": "calc", "parameters": {}}}]
    texts = [
        policy.tokenizer.apply_chat_template(
            [{"role": "user", "content": e.prompt}], tools=schemas, tokenize=False
        )
        for e in tools_examples("test")[:PROMPTS]
    ]
    ids, mask = tokenize_prompts(policy.tokenizer, texts, max_length=64,
                                 add_special_tokens=False, device=torch.device("cpu"))  # fmt: skip
    return GenerationRequest(ids, mask, G, 80, Sampling(), list(range(PROMPTS)))


def measure(loop: ToolLoop, request: GenerationRequest) -> tuple[float, int]:
    """Median trajectories per second over REPEATS rollouts, and the calls of one."""
    rates, calls = [], 0
    for _ in range(REPEATS):
        started = time.perf_counter()
        rollout = loop.generate(request)
        rates.append(PROMPTS * G / (time.perf_counter() - started))
        calls = sum(len(t.calls) for t in rollout.trajectories or ())
    return statistics.median(rates), calls


def main() -> None:
    torch.set_num_threads(1)
    model, tokenizer = load_policy(
        "builtin:tiny-tools", cache_dir=CACHE, device=torch.device("cpu")
    )
    policy = SimpleNamespace(
        model=model,
        tokenizer=tokenizer,
        device=torch.device("cpu"),
        dtype=None,
        eos_token_ids=[tokenizer.eos_token_id],
        stop_strings=None,
        spec=SimpleNamespace(generation_batch_size=None),
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowCalculator)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    request = rollout_request(policy)
    try:
        serial, calls = measure(tool_loop(host, 1, policy), request)
        parallel, parallel_calls = measure(tool_loop(host, CONCURRENCY, policy), request)
    finally:
        server.shutdown()
    assert calls == parallel_calls, "both sides sample the same trajectories"
    print(f"{PROMPTS * G} trajectories, {calls} calls, tool latency {LATENCY_S} s")
    print(f"tools: serial={serial:.1f} parallel={parallel:.1f} "
          f"speedup={parallel / serial:.2f} calls={calls}")  # fmt: skip


if __name__ == "__main__":
    main()
