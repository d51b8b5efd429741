"""Multi-turn rollouts with tools: an Engine that wraps another and calls it once per turn.

Each trajectory (prompt b's k-th completion) goes: generate an assistant turn; read its
`<tool_call>`s (grpo/tools/calls.py); run them (trajectories in parallel, bounded); append
the tool messages as the chat template renders them (grpo/tools/render.py); repeat until
a turn calls nothing, max_tool_calling_iterations tool turns have run, or the trajectory
has sampled max_completion_length model tokens (the tool tokens do not count, TRL's rule).

Every turn asks the inner engine for one completion per live trajectory (num_generations
1), seeded by (group seed, k, turn) only: what a trajectory samples does not depend on
which other trajectories are still alive, on the batching or on the number of ranks. The
result is one Rollout whose completion row is the whole trajectory (model and tool
tokens) with model_mask 0 on the tool tokens (TRL's tool mask): the loss, the KL and the
entropy statistics leave them out, and the trainer recomputes log-probs over the whole
trajectory in one pass. The inner engine's sampling log-probs (vLLM's) of the model tokens
become the trajectory's `sampling_logps`, 0 on the tool tokens (out of the loss mask, so
out of the log-prob gap and of the importance-sampling correction); None when the inner
engine gives none (native). Only the Engine protocol is used, so it wraps any engine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from grpo.engines.engine import Engine, GenerationRequest
from grpo.rollout.rollout import Rollout
from grpo.rollout.sampling import stream_seed
from grpo.tools.calls import parse_tool_calls
from grpo.tools.kind import ToolRunFacts
from grpo.tools.render import template_problem, tool_turn_text
from grpo.tools.toolbox import Toolbox
from grpo.tools.trajectory import Trajectory, Turn


def trajectory_seed(group_seed: int, index: int, turn: int) -> int:
    """The sampling stream of completion `index` of a group at `turn`: distinct per
    (group seed, index, turn), stable across batchings, ranks and machines."""
    return stream_seed(group_seed, index, turn, scale=1_000_039, stride=1_000_081)


@dataclass
class _Row:
    """A trajectory under construction: its tokens so far (model and context) and state."""

    prompt: list[int]
    tokens: list[int] = field(default_factory=list)
    is_model: list[int] = field(default_factory=list)
    entropy: list[float] | None = field(default_factory=list)
    """The sampling distribution's entropy at each token (0 on context tokens); None once a
    turn came without them (vLLM: the update's forward pass gives them)."""
    logps: list[float] | None = field(default_factory=list)
    """The inner engine's sampling log-prob of each token (0 on context tokens); None
    once a turn came without them."""
    model_tokens: int = 0
    is_done: bool = False
    is_truncated: bool = False
    trajectory: Trajectory = field(default_factory=Trajectory)

    def extend(
        self,
        ids: list[int],
        *,
        is_model: bool,
        entropy: list[float] | None = None,
        logps: list[float] | None = None,
    ) -> None:
        self.tokens += ids
        self.is_model += [int(is_model)] * len(ids)
        self.model_tokens += len(ids) if is_model else 0
        self.entropy = _joined(self.entropy, entropy, len(ids), is_model=is_model)
        self.logps = _joined(self.logps, logps, len(ids), is_model=is_model)


def _joined(
    values: list[float] | None, new: list[float] | None, count: int, *, is_model: bool
) -> list[float] | None:
    """A trajectory's per-token values after `count` more tokens: the turn's own (0 on
    context tokens); None once a model turn came without them (the inner engine gives none)."""
    if values is None or (is_model and new is None):
        return None
    return values + (new if new is not None else [0.0] * count)


class ToolLoop:
    """An Engine that runs multi-turn tool trajectories over an inner Engine."""

    def __init__(
        self,
        inner: Engine,
        toolbox: Toolbox,
        tokenizer: Any,
        *,
        eos_token_ids: list[int],
        max_iterations: int | None,
        concurrency: int,
    ) -> None:
        self.inner, self.toolbox, self.tokenizer = inner, toolbox, tokenizer
        self.name = f"{inner.name}+tools"
        self.eos = set(eos_token_ids)
        self.max_iterations, self.concurrency = max_iterations, concurrency
        self.tool_seconds = 0.0
        """Wall seconds spent running tools since the last read (time/tools)."""

    def generate(self, request: GenerationRequest) -> Rollout:
        rows = self.start_rows(request)
        turn = 0
        while any(not r.is_done for r in rows):
            live = [i for i, r in enumerate(rows) if not r.is_done]
            self.sample_turn(request, rows, live, turn)
            self.answer_calls(rows, live, turn)
            turn += 1
        return self.as_rollout(request, rows)

    def start_rows(self, request: GenerationRequest) -> list[_Row]:
        """B x G empty trajectories, each with its environment reset (when there is one)."""
        g, rows = request.num_generations, []
        for b in range(request.prompt_ids.shape[0]):
            prompt = request.prompt_ids[b][request.prompt_mask[b].bool()].tolist()
            record = request.records[b] if request.records is not None else {}
            for _ in range(g):
                row = _Row(prompt)
                if self.toolbox.environment is not None:
                    self.reset_environment(row, record)
                rows.append(row)
        return rows

    def reset_environment(self, row: _Row, record: dict[str, Any]) -> None:
        environment = self.toolbox.environment() if self.toolbox.environment else None
        shown = environment.reset(**record) if environment is not None else None
        row.trajectory.environment = environment
        if shown:
            ids = self.tokenizer(str(shown), add_special_tokens=False)["input_ids"]
            row.extend(ids, is_model=False)
            row.trajectory.reset_text, row.trajectory.num_reset_tokens = str(shown), len(ids)

    def sample_turn(
        self, request: GenerationRequest, rows: list[_Row], live: list[int], turn: int
    ) -> None:
        """One assistant turn of every live trajectory, each cut to its own token budget."""
        g, budget = request.num_generations, request.max_new_tokens
        contexts = [rows[i].prompt + rows[i].tokens for i in live]
        ids, mask = _left_padded(contexts, self.tokenizer.pad_token_id, request.prompt_ids.device)
        seeds = None
        if request.seeds is not None:
            seeds = [trajectory_seed(request.seeds[i // g], i % g, turn) for i in live]
        left = [budget - rows[i].model_tokens for i in live]
        out = self.inner.generate(
            GenerationRequest(ids, mask, 1, max(left), request.sampling, seeds)
        )
        for n, i in enumerate(live):
            row, length = rows[i], int(out.lengths[n])
            new = out.completion_ids[n, : min(length, left[n])].tolist()
            sampled = out.sampling_logps
            logps = None if sampled is None else sampled[n, : len(new)].tolist()
            entropy = None if out.entropy is None else out.entropy[n, : len(new)].tolist()
            row.extend(new, is_model=True, entropy=entropy, logps=logps)
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            row.trajectory.turns.append(Turn(text, len(new)))
            has_ended = bool(new) and new[-1] in self.eos
            row.is_truncated = length > left[n] or bool(out.is_truncated[n]) and not has_ended
            if row.is_truncated or row.model_tokens >= budget:
                row.is_done = True

    def answer_calls(self, rows: list[_Row], live: list[int], turn: int) -> None:
        """Run the calls of this turn's live trajectories; append the tool turns."""
        calling = []
        for i in live:
            row = rows[i]
            last = row.trajectory.turns[-1]
            calls = parse_tool_calls(last.text) if not row.is_truncated else []
            last.calls = [self.toolbox.checked(c) for c in calls]
            if not last.calls:
                row.is_done = True
            elif self.max_iterations is not None and turn >= self.max_iterations:
                row.is_done, row.trajectory.is_at_iteration_limit = True, True
            elif not row.is_done:
                calling.append(i)
        started = time.perf_counter()
        jobs = [
            (rows[i].trajectory.turns[-1].calls, rows[i].trajectory.environment) for i in calling
        ]
        answers = self.toolbox.run_per_trajectory(jobs, concurrency=self.concurrency)
        self.tool_seconds += time.perf_counter() - started
        for i, results in zip(calling, answers, strict=True):
            row, last = rows[i], rows[i].trajectory.turns[-1]
            text = tool_turn_text(
                self.tokenizer, [r.content for r in results],
                ended_with_eos=bool(row.tokens) and row.tokens[-1] in self.eos,
            )  # fmt: skip
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            row.extend(ids, is_model=False)
            last.results, last.context_text, last.num_context_tokens = results, text, len(ids)

    def as_rollout(self, request: GenerationRequest, rows: list[_Row]) -> Rollout:
        device, pad = request.prompt_ids.device, self.tokenizer.pad_token_id
        width = max(1, max(len(r.tokens) for r in rows))

        def padded(values: list[list[Any]], fill: Any, dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor(
                [v + [fill] * (width - len(v)) for v in values], dtype=dtype, device=device
            )

        # None unless every trajectory has them (an inner engine that gives none: native
        # gives no log-probs, vLLM no entropies)
        logps = [r.logps for r in rows if r.logps is not None]
        entropy = [r.entropy for r in rows if r.entropy is not None]
        return Rollout(
            request.prompt_ids,
            request.prompt_mask,
            padded([r.tokens for r in rows], pad, torch.long),  # (N, T)
            padded([[1] * len(r.tokens) for r in rows], 0, torch.long),  # (N, T)
            torch.tensor([r.is_truncated for r in rows], device=device),  # (N,)
            padded(entropy, 0.0, torch.float) if len(entropy) == len(rows) else None,  # (N, T)
            model_mask=padded([r.is_model for r in rows], 0, torch.long),  # (N, T)
            sampling_logps=padded(logps, 0.0, torch.float) if len(logps) == len(rows) else None,
            trajectories=tuple(r.trajectory for r in rows),
        )

    def take_tool_seconds(self) -> float:
        """Wall seconds spent running tools since the last call (the step's time/tools)."""
        seconds, self.tool_seconds = self.tool_seconds, 0.0
        return seconds

    def load_weights(self, model: Any) -> int | None:
        return self.inner.load_weights(model)

    def close(self) -> None:
        self.inner.close()


def _left_padded(
    rows: list[list[int]], pad: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.tensor(
        [[pad] * (width - len(r)) + r for r in rows], dtype=torch.long, device=device
    )
    mask = torch.tensor(
        [[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long, device=device
    )
    return ids, mask  # (L, P) each


def build_tool_loop(
    inner: Engine, spec: Any, tokenizer: Any, eos_token_ids: list[int], run: ToolRunFacts
) -> ToolLoop:
    """The spec's tools prepared on this worker around `inner`; ValueError naming `tools`
    when a tool cannot be prepared or the model's chat template cannot render tools (the
    API cannot see the tokenizer, so this is the check at the start of the run)."""
    toolbox = Toolbox(spec.tools, run, max_result_chars=spec.max_tool_result_chars)
    problem = template_problem(tokenizer, toolbox.schemas)
    if problem is None and not spec.data.use_chat_template:
        problem = "data.use_chat_template is false, so the model is never shown its tools"
    if problem is not None:
        raise ValueError(f"tools: {problem}")
    return ToolLoop(
        inner,
        toolbox,
        tokenizer,
        eos_token_ids=eos_token_ids,
        max_iterations=spec.max_tool_calling_iterations,
        concurrency=spec.max_concurrent_tool_calls,
    )
