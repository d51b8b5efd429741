"""GRPO at a real size on one CUDA device: ours and TRL's, tokens/s per phase, peak memory.

    .venv/bin/python bench/gpu_check.py                 (CUDA; 10 steps a side, a few minutes)
    .venv/bin/python bench/gpu_check.py --tiny --device cpu --steps 2 --sides ours
                                                        (what tests/project/test_gpu_check.py runs)

The model has Qwen2.5-0.5B's configuration (24 layers, width 896, 14 query heads sharing 2
key/value heads, SwiGLU 4864, tied embeddings, RoPE theta 1e6), randomly initialised and
seeded (no download), with `builtin:small`'s 32k byte-level BPE tokenizer and its ChatML
template, so the vocabulary is 32,000 rather than Qwen's 151,936 (the logits are 4.7x
smaller than the real model's). Both sides train it in bf16 on the built-in arithmetic
prompts inside the R1 template, rendered with the chat template: 8 prompts x G 16
completions of up to 256 tokens a step, micro-batches of 16 completions (ours:
`micro_batch_size` 16, `generation_batch_size` 128; TRL: per-device batch 16 with 8
gradient-accumulation steps and a generation batch of 128), beta 0.04, one update per
generation batch. Each side runs in its own process so its peak CUDA memory
(`torch.cuda.max_memory_allocated`, reset after the model is loaded) is its own.

With vLLM installed a third side, `ours-vllm`, trains the same spec generating on the
colocated vLLM engine (use_vllm, vllm_gpu_memory_utilization 0.3, sleep mode on CUDA):
`--sides ours ours-vllm` for just those two. Two more generate on a vLLM server that the
script starts on the same device (`grpo vllm-serve` on the model's directory, 0.3 of the
GPU; bench/async_runs.py's Server): `ours-server` (vllm_mode server, synchronous) and
`ours-async` (async_generation, max_staleness 1: generation beside the update, issue 41);
`--sides ours-vllm ours-server ours-async` compares the three engines. Not run on a GPU yet.

Prints, per side, the median seconds per step, completion tokens per second of the whole
step and (ours) of each phase, and the peak memory; the last line reads
`gpu_check: ours <s>/step <tok/s> tok/s peak <GiB> GiB; TRL ...`.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QWEN25_05B = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
}
"""Qwen2.5-0.5B's published config.json, without its vocabulary (the tokenizer's is used)."""
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
}
SEED = 2025


def build_model_dir(target: Path, shape: dict[str, int]) -> Path:
    """A seeded random Qwen2 of `shape` with builtin:small's tokenizer, saved to `target`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    from grpo.cli.main import cache_dir
    from grpo.models.loading import builtin_dir

    small = builtin_dir("builtin:small", cache_dir(None), progress=False)
    tokenizer = AutoTokenizer.from_pretrained(small)
    vocab = tokenizer.get_vocab()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        bos_token_id=vocab["<|endoftext|>"],
        eos_token_id=vocab["<|im_end|>"],
        pad_token_id=vocab["<|endoftext|>"],
        **shape,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = [vocab["<|im_end|>"], vocab["<|endoftext|>"]]
    model.generation_config.pad_token_id = vocab["<|endoftext|>"]
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def peak_memory_gib(device: str) -> float:
    """Peak CUDA memory allocated since the last reset; on CPU the process's peak RSS."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**30
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def reset_peak(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


SERVER_SIDES = {"ours-server": False, "ours-async": True}
"""Sides that generate on the vLLM server main starts, and whether asynchronously."""


def engine_knobs(side: str, args: argparse.Namespace) -> dict[str, Any]:
    """ours-vllm: the colocated engine, 0.3 of the GPU, sleeping during the update on CUDA
    (vllm_enable_sleep_mode); the server sides: args.server_url; ours: our decode loop."""
    if side == "ours-vllm":
        cuda = args.device.startswith("cuda")
        return {"use_vllm": True, "vllm_enable_sleep_mode": cuda}
    if side in SERVER_SIDES:
        knobs = {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": args.server_url}
        is_async = SERVER_SIDES[side]
        return knobs | ({"async_generation": True, "max_staleness": 1} if is_async else {})
    return {}


def ours(model_dir: str, args: argparse.Namespace, side: str = "ours") -> dict[str, Any]:
    """Our trainer for args.steps steps: seconds and phase seconds per step, tokens, peak;
    generating as `side` says (engine_knobs)."""
    from grpo.data.prompts import R1_TEMPLATE
    from grpo.spec import JobSpec
    from grpo.spec.data import DataSpec
    from grpo.training.trainer import TrainingLoop

    n = args.prompts * args.generations
    spec = JobSpec(
        model=model_dir,
        data=DataSpec(prompt_template=R1_TEMPLATE),
        max_steps=args.steps,
        prompts_per_step=args.prompts,
        num_generations=args.generations,
        max_completion_length=args.completion_tokens,
        micro_batch_size=args.micro_batch,
        generation_batch_size=n,
        precision=args.precision,
        device=args.device,
        beta=0.04,
        learning_rate=1e-6,
        save_steps=0,
        vllm_gpu_memory_utilization=0.3,
        **engine_knobs(side, args),
    )
    steps: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-ours-") as workdir:
        trainer = TrainingLoop(spec, workdir=Path(workdir), cache_dir=Path(workdir))
        reset_peak(args.device)
        trainer.source.start(0, trainer.model)  # an async side's producer starts here
        try:
            for step in range(1, args.steps + 1):
                report = trainer.step(step)
                tokens = report.scalars["completions/mean_length"] * n
                steps.append({"tokens": tokens, **report.scalars})
        finally:
            trainer.source.close()
            trainer.engine.close()
        peak = peak_memory_gib(args.device)
    return {"steps": steps, "peak_gib": peak}


def trl(model_dir: str, args: argparse.Namespace) -> dict[str, Any]:
    """TRL's GRPOTrainer on the same model, prompts and sizes; step seconds and tokens."""
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo.data.loading import load_examples
    from grpo.data.prompts import R1_TEMPLATE
    from grpo.spec.data import DataSpec

    data = DataSpec(prompt_template=R1_TEMPLATE)
    n = args.prompts * args.generations
    examples = load_examples(data)[: args.prompts * (args.steps + 1)]
    rows = [
        [{"role": "user", "content": R1_TEMPLATE.replace("{prompt}", str(e.prompt))}]
        for e in examples
    ]
    dataset = Dataset.from_dict({"prompt": rows})
    steps: list[dict[str, float]] = []
    tally = {"tokens": 0.0}

    def length_only(completion_ids: list[list[int]], **_: Any) -> list[float]:
        tally["tokens"] += sum(len(ids) for ids in completion_ids)
        return [0.0] * len(completion_ids)

    class Clock(TrainerCallback):
        started = 0.0

        def on_step_begin(self, *_: Any, **__: Any) -> None:
            self.started = time.perf_counter()

        def on_step_end(self, *_: Any, **__: Any) -> None:
            steps.append(
                {"time/step": time.perf_counter() - self.started, "tokens": tally["tokens"]}
            )
            tally["tokens"] = 0.0

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="gpu-check-trl-"),
        max_steps=args.steps,
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=n // args.micro_batch,
        generation_batch_size=n,
        num_generations=args.generations,
        max_completion_length=args.completion_tokens,
        beta=0.04,
        learning_rate=1e-6,
        lr_scheduler_type="constant",
        bf16=args.precision == "bf16",
        use_cpu=args.device == "cpu",
        gradient_checkpointing=False,
        shuffle_dataset=False,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        model_init_kwargs={"dtype": "float32"},
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    trainer = GRPOTrainer(
        model=model_dir,
        reward_funcs=[length_only],  # type: ignore[list-item]
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[Clock()],
    )
    trainer.remove_callback(PrinterCallback)
    reset_peak(args.device)
    trainer.train()
    return {"steps": steps, "peak_gib": peak_memory_gib(args.device)}


def side_main(name: str, model_dir: str, args: argparse.Namespace, out: Any) -> None:
    import warnings

    import torch
    from transformers.utils import logging

    warnings.filterwarnings("ignore")
    logging.set_verbosity_error()
    logging.disable_progress_bar()

    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    if name == "trl":
        out.put((name, trl(model_dir, args)))
    else:
        out.put((name, ours(model_dir, args, side=name)))


def run_side(name: str, model_dir: str, args: argparse.Namespace) -> dict[str, Any]:
    """One side in a fresh process (its own peak memory); returns what it measured."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=side_main, args=(name, model_dir, args, queue))
    process.start()
    _, result = queue.get(timeout=args.timeout)
    process.join(timeout=60)
    return dict(result)


def summary(name: str, result: dict[str, Any], warmup: int) -> str:
    """One side's line: median s/step, tokens/s of the step and of each phase, peak memory."""
    steps = result["steps"][warmup:] or result["steps"]
    tokens = sum(s["tokens"] for s in steps)
    per_step = statistics.median(s["time/step"] for s in steps)
    phases = sorted({k for s in steps for k in s if k.startswith("time/") and k.count("/") == 1})
    rates = [
        f"{k.removeprefix('time/')} {tokens / max(1e-9, sum(s[k] for s in steps)):.0f}"
        for k in phases
    ]
    return (
        f"{name}: {per_step:.3f} s/step (median of {len(steps)}), tokens/s by phase: "
        + ", ".join(rates)
        + f"; peak memory {result['peak_gib']:.2f} GiB"
    )


def default_sides() -> list[str]:
    """ours, ours generating on vLLM (when vllm is installed), TRL."""
    import importlib.util

    has_vllm = importlib.util.find_spec("vllm") is not None
    return ["ours", "ours-vllm", "trl"] if has_vllm else ["ours", "trl"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer width-64 model (tests)")
    parser.add_argument("--steps", type=int, default=10, help="steps per side (default 10)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed first steps (default 1)")
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step (default 8)")
    parser.add_argument("--generations", type=int, default=16, help="G (default 16)")
    parser.add_argument("--completion-tokens", type=int, default=256, help="(default 256)")
    parser.add_argument("--micro-batch", type=int, default=16, help="completions a pass (16)")
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument(
        "--sides",
        nargs="+",
        choices=["ours", "ours-vllm", *SERVER_SIDES, "trl"],
        default=default_sides(),
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a side may take")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print(
                "bench/gpu_check.py: no CUDA device here (use --device cpu --tiny)", file=sys.stderr
            )
            return 2
    shape = TINY if args.tiny else QWEN25_05B
    lines = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-model-") as model_dir:
        build_model_dir(Path(model_dir), shape)
        print(
            f"gpu_check: {args.device}, Qwen2 {'tiny' if args.tiny else '2.5-0.5B'} shape, random, "
            f"builtin:small tokenizer, {args.precision}, {args.prompts} x {args.generations} x "
            f"{args.completion_tokens} tokens, micro-batch {args.micro_batch}",
            flush=True,
        )
        server = start_server(model_dir, args) if set(args.sides) & set(SERVER_SIDES) else None
        args.server_url = server.url if server else None
        try:
            for side in args.sides:
                result = run_side(side, model_dir, args)
                lines.append(summary({"trl": "TRL"}.get(side, side), result, args.warmup))
                print(lines[-1], flush=True)
        finally:
            if server:
                server.stop()
    print("gpu_check: " + "; ".join(lines))
    return 0


def start_server(model_dir: str, args: argparse.Namespace) -> Any:
    """`grpo vllm-serve` on the model, on the device the sides train on (bench/async_runs.py)."""
    from async_runs import Server

    dtype = {"bf16": "bfloat16", "fp32": "float32"}[args.precision]
    size = {"max_model_len": 512 + args.completion_tokens}
    size["max_num_seqs"] = args.prompts * args.generations
    if args.device.startswith("cuda"):  # CUDA graphs on, as the colocated engine's
        memory = "--gpu-memory-utilization 0.3"
        return Server(model_dir, cpus=None, dtype=dtype, options=(), serve_args=memory, **size)
    return Server(model_dir, cpus=None, dtype=dtype, **size)


if __name__ == "__main__":
    sys.exit(main())
