"""What layout-independent sampling costs: one seeded stream per group against one stream.

    python bench/sampling_streams.py [--model builtin:small] [--prompts 8] [--repeats 15]

A group's completions depend only on (seed, step, group position, weights) because each
group draws its uniforms from its own CPU generator (grpo.rollout.sampling.GroupUniforms) and
tokens are picked by inverse CDF. Two costs, measured side by side:

1. generation: `generate` with per-group seeds against `seeds=None` (one global stream,
   same sampler), alternating, on `--model` with `--prompts` x G 16 and 32-token
   completions: the per-group generators' share of a step.
2. drawing the uniforms alone, per-group streams against one stream, for 8, 64 and 256
   groups (the only work the streams add).
3. the sampler: inverse CDF (softmax, cumsum, searchsorted; with the entropy it reports from
   the same softmax) against the torch.multinomial draw the trainer used before, on one
   decode step's (B x G, V) logits.

Last line:
    sampling: generate_ratio=<per-group / one stream> sampler_ms=<ours> multinomial_ms=<before>
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from grpo.data.loading import load_examples  # noqa: E402
from grpo.data.prompts import format_prompt  # noqa: E402
from grpo.models.loading import load_policy  # noqa: E402
from grpo.rollout.policy import eos_token_ids  # noqa: E402
from grpo.rollout.rollout import CompletionEnds, generate, tokenize_prompts  # noqa: E402
from grpo.rollout.sampling import GroupUniforms, sample_next_tokens  # noqa: E402
from grpo.spec.data import DataSpec  # noqa: E402
from grpo.spec.generation import Sampling  # noqa: E402

GENERATIONS = 16


def timed(fn: object, *args: object, **kwargs: object) -> float:
    started = time.perf_counter()
    fn(*args, **kwargs)  # type: ignore[operator]
    return time.perf_counter() - started


def generation_times(
    model: object, tokenizer: object, prompts: int, repeats: int
) -> tuple[float, float]:
    """Median seconds of one generation with per-group streams and with one stream."""
    data = DataSpec()
    texts = [format_prompt(e, data, tokenizer) for e in load_examples(data)[:prompts]]
    ids, mask = tokenize_prompts(
        tokenizer, texts, max_length=512, add_special_tokens=True, device=torch.device("cpu")
    )
    knobs = dict(
        num_generations=GENERATIONS,
        ends=CompletionEnds(32, tuple(eos_token_ids(tokenizer, model)), tokenizer.pad_token_id),
        sampling=Sampling(),
    )
    per_group, one_stream = [], []
    for repeat in range(repeats + 2):
        seeds = [1000 * repeat + b for b in range(prompts)]
        a = timed(generate, model, ids, mask, seeds=seeds, **knobs)
        torch.manual_seed(repeat)
        b = timed(generate, model, ids, mask, seeds=None, **knobs)
        if repeat >= 2:  # warm-up
            per_group.append(a)
            one_stream.append(b)
    return statistics.median(per_group), statistics.median(one_stream)


def stream_times(groups: int, tokens: int, repeats: int) -> tuple[float, float]:
    """Median milliseconds to draw one step's uniforms: a stream per group, one stream."""

    def draw(seeds: list[int] | None) -> None:
        uniforms = GroupUniforms(seeds, num_rows=groups * GENERATIONS, device=torch.device("cpu"))
        for t in range(tokens):
            uniforms.at(t)

    per_group = [timed(draw, list(range(groups))) for _ in range(repeats)]
    one_stream = [timed(draw, None) for _ in range(repeats)]
    return 1000 * statistics.median(per_group), 1000 * statistics.median(one_stream)


def sampler_times(rows: int, vocab: int, repeats: int) -> tuple[float, float]:
    """Median milliseconds of one decode step's draw: inverse CDF and torch.multinomial."""
    logits = torch.randn(rows, vocab) * 3
    generator = torch.Generator().manual_seed(0)
    ours, before = [], []
    for _ in range(repeats):
        uniforms = 1 - torch.rand(rows)
        ours.append(timed(sample_next_tokens, logits, uniforms=uniforms))
        started = time.perf_counter()
        torch.multinomial(torch.softmax(logits.float(), dim=-1), 1, generator=generator)
        before.append(time.perf_counter() - started)
    return 1000 * statistics.median(ours), 1000 * statistics.median(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="builtin:small")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cache = Path(os.environ.get("GRPO_CACHE_DIR", "~/.cache/grpo")).expanduser()
    model, tokenizer = load_policy(args.model, cache_dir=cache, progress=False)
    per_group, one_stream = generation_times(model, tokenizer, args.prompts, args.repeats)
    n = args.prompts * GENERATIONS
    print(
        f"{args.model}, {args.prompts} prompts x G {GENERATIONS}, 32 tokens, "
        f"median of {args.repeats}"
    )
    print(f"generate, a stream per group   {per_group:8.3f} s")
    print(f"generate, one stream            {one_stream:8.3f} s")
    vocab = model.config.vocab_size
    ours, before = sampler_times(n, vocab, args.repeats * 10)
    print(
        f"one draw of ({n}, {vocab}) logits: inverse CDF {ours:.2f} ms, multinomial {before:.2f} ms"
    )
    for groups in (8, 64, 256):
        per_group_ms, one_stream_ms = stream_times(groups, 32, args.repeats * 10)
        print(
            f"uniforms for {groups} groups x G {GENERATIONS} x 32 tokens: a stream per group "
            f"{per_group_ms:.3f} ms, one stream {one_stream_ms:.3f} ms"
        )
    print(
        f"sampling: generate_ratio={per_group / one_stream:.3f} sampler_ms={ours:.2f} "
        f"multinomial_ms={before:.2f}"
    )


if __name__ == "__main__":
    main()
