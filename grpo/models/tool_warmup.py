"""The supervised warm-up that turns `builtin:tiny` into `builtin:tiny-tools`.

Seeded next-token cross-entropy on whole tool trajectories of the built-in tools task
(grpo/data/tools_task.py), in the tool chat template (grpo/models/tool_template.py):

    <s>[calc]12*34=  <tool_call>{"name":"calc","arguments":{"x":"12*34"}}</tool_call></s>
                     <tool_response>408</tool_response>  408</s>

The tool response is context, never a label (the tool mask of GRPO, applied to the
warm-up). On purpose only TOOL_SHARE of the examples call the tool; the others answer at
once with the product, which a model this size cannot compute. So the warmed-up model
writes well-formed calls (and copies their results) some of the time, and guesses the
rest: GRPO's groups hold both, and the run shows an agent learning to use its tool.
Runs on the CPU with one thread, once per machine (grpo/models/loading.py caches it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, PreTrainedModel
from transformers import PreTrainedTokenizerBase as Tokenizer

from grpo.data.tools_task import CALC_SCHEMA, tool_call_text, tools_examples
from grpo.models.build_progress import BuildProgress, Log
from grpo.models.builtin_names import TOOLS_RECIPE_VERSION  # bump it when anything here changes
from grpo.models.tool_template import build_tool_tokenizer
from grpo.models.warmup import _seeded_single_thread

TOOL_SHARE = 0.4
"""Share of warm-up examples that call the tool (the rest answer at once)."""
STEPS = 600
BATCH_SIZE = 32
LEARNING_RATE = 3e-3
WARMUP_STEPS = 50


def encode_trajectory(
    prompt: str, answer: str, *, calls: bool, tokenizer: Tokenizer
) -> tuple[list[int], list[int]]:
    """Token ids and labels (-100 on the prompt and on the tool response) of one example:
    each turn is what the chat template adds to the conversation before it."""
    messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
    turns: list[tuple[dict[str, str], bool]] = []
    if calls:
        turns += [({"role": "assistant", "content": tool_call_text(prompt.rstrip("="))}, True)]
        turns += [({"role": "tool", "content": answer}, False)]
    turns += [({"role": "assistant", "content": answer}, True)]

    def render(messages: list[dict[str, str]], *, opens: bool = False) -> str:
        return str(
            tokenizer.apply_chat_template(
                messages, tools=[CALC_SCHEMA], tokenize=False, add_generation_prompt=opens
            )
        )

    ids = tokenizer(render(messages, opens=True), add_special_tokens=False)["input_ids"]
    labels = [-100] * len(ids)
    for message, is_label in turns:
        before = render(messages, opens=True)
        messages = [*messages, message]
        piece = tokenizer(render(messages)[len(before) :], add_special_tokens=False)["input_ids"]
        ids += piece
        labels += piece if is_label else [-100] * len(piece)
    return ids, labels


def warm_up(
    model: PreTrainedModel, tokenizer: Tokenizer, *, progress: bool, log: Log | None = None
) -> float:
    """STEPS supervised steps; the last loss. `log` hears how far it is every few seconds."""
    examples = tools_examples("train")
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, betas=(0.9, 0.98))
    model.train()
    loss = torch.tensor(0.0)
    said = BuildProgress("builtin:tiny-tools", log)
    for step in tqdm(range(1, STEPS + 1), desc="warm-up builtin:tiny-tools", disable=not progress):
        rows = torch.randint(len(examples), (BATCH_SIZE,), generator=generator).tolist()
        calls = (torch.rand(BATCH_SIZE, generator=generator) < TOOL_SHARE).tolist()
        encoded = [
            encode_trajectory(examples[r].prompt, examples[r].answer, calls=c, tokenizer=tokenizer)
            for r, c in zip(rows, calls, strict=True)
        ]
        width = max(len(ids) for ids, _ in encoded)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in encoded])  # (N, T)
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in encoded])  # (N, T)
        attention = (
            torch.arange(width)[None, :] < torch.tensor([len(i) for i, _ in encoded])[:, None]
        ).long()
        for group in optimizer.param_groups:
            group["lr"] = LEARNING_RATE * min(1.0, step / WARMUP_STEPS)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        said(step, STEPS, f"warm-up step {step} of {STEPS}, loss {loss.item():.3f}")
    model.train(False)
    return float(loss.detach())


def build_tiny_tools(
    tiny_dir: Path, target: Path, *, progress: bool, log: Log | None = None
) -> None:
    """Warm up the model saved in `tiny_dir` (how far: to `log`); save it, the tool
    tokenizer and warmup.json."""
    started = time.perf_counter()
    tokenizer = build_tool_tokenizer()
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    with _seeded_single_thread():
        loss = warm_up(model, tokenizer, progress=progress, log=log)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    report = {
        "recipe_version": TOOLS_RECIPE_VERSION,
        "steps": STEPS,
        "tool_share": TOOL_SHARE,
        "final_loss": round(loss, 4),
        "seconds": round(time.perf_counter() - started, 1),
    }
    (target / "warmup.json").write_text(json.dumps(report, indent=2) + "\n")
