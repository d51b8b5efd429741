"""StepReport: what one GRPO step tells the outside world.

Plain dataclasses of Python numbers and strings (no tensors), so a sink can store or print
them without torch. Knows nothing of HTTP, SQL or Celery.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from grpo.report.outcome import GroupOutcome as GroupOutcome  # the store and API import it here
from grpo.report.outcome import group_outcome

FinishReason = Literal["eos", "stop", "length"]

# Fixed, documented histogram bins so steps are comparable across a run and across runs.
ADVANTAGE_BIN_EDGES: tuple[float, ...] = tuple(round(-3.0 + 0.25 * i, 2) for i in range(25))
"""Advantage histogram: 24 bins of width 0.25 on [-3, 3]; values outside go to the end bins."""
REWARD_BIN_EDGES: tuple[float, ...] = tuple(round(-1.0 + 0.1 * i, 2) for i in range(31))
"""Reward histogram: 30 bins of width 0.1 on [-1, 2]; values outside go to the end bins."""
GROUP_REWARD_STD_BIN_EDGES: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(31))
"""Group reward spread: 30 bins of width 0.05 on [0, 1.5] over each group's population
reward std (1.5 is the most rewards in [-1, 2] can spread); larger stds go to the last bin.
The first bin, [0, 0.05), holds the all-equal groups that give no gradient."""


@dataclass(frozen=True)
class CompletionReport:
    """One sampled completion of a group."""

    text: str
    num_tokens: int
    is_truncated: bool
    rewards: dict[str, float | None]
    """Per-function reward, keyed by reward label (unweighted; None where it does not apply)."""
    reward: float
    """Weighted total reward."""
    advantage: float
    kl: float
    """Sequence mean of the per-token k3 KL to the reference (0 when beta = 0)."""
    token_kls: list[float] | None = None
    """Per-token k3 KL, kept for completions whose text is kept."""
    tokens: list[str] | None = None
    """The text each token adds (same length as token_kls; "" for special tokens): they
    join back to `text`, so a view can shade each token by its KL whatever the tokenizer."""
    finish_reason: FinishReason | None = None
    """Why sampling stopped: `eos` (an end-of-sequence token), `stop` (a stop string) or
    `length` (max_completion_length); None where it was not recorded."""
    stop: str | None = None
    """What stopped it: the end-of-sequence token as text (`<|im_end|>`) or the stop string."""
    stop_token_id: int | None = None
    """The end-of-sequence id that ended it (a model may have several)."""
    note: str | None = None
    """What a reward function noted about it, `<label>: <note>` (e.g. `code: killed at the
    CPU limit (5 s)`); None when nothing was noted."""
    extras: dict[str, Any] | None = None
    """Columns reward functions logged for it with TRL's `log_extra(column, values)`."""
    trajectory: dict[str, Any] | None = None
    """A tool trajectory's turns (grpo/tools/trajectory.py's record: assistant text, calls,
    results, per-turn token counts); None for single-turn completions."""
    model_mask: list[int] | None = None
    """Per token (aligned with `tokens`), 1 where the model sampled it, 0 on tool-result
    tokens (never trained on); None for single-turn completions."""
    policy_version: int | None = None
    """The policy version (optimizer updates) of the weights that sampled it; step s trains
    at version s - 1, so its staleness is s - 1 - policy_version (grpo/rollout/staleness.py)."""
    sampler_logps: list[float] | None = None
    """Per token (aligned with `tokens`): the log-probability the sampler gave the token it
    sampled, where the engine reports one (vLLM colocated or as a server, the asynchronous
    producer); None where it does not, or where the tokens are not kept. Against the
    trainer's own log-probs it is the gap the importance correction weighs
    (generation/logprob_diff_mean)."""


@dataclass(frozen=True)
class GroupReport:
    """One prompt and its G completions."""

    index: int
    """Position of the group in the step: trained groups first, then dropped ones."""
    prompt_id: str
    """Stable id of the prompt in its data source (follows a prompt across steps)."""
    prompt: str
    answer: str
    rewards: list[float]
    """Total reward of each completion, in sampling order (G)."""
    advantages: list[float]
    completions: list[CompletionReport] | None = None
    """Kept only for the groups the logging policy keeps."""
    is_dropped: bool = False
    """Left out of training by dynamic sampling (no signal); shown, never trained on."""

    @property
    def reward_mean(self) -> float:
        return sum(self.rewards) / len(self.rewards)

    passes: list[bool] = field(kw_only=True)
    """Whether each completion passes, in sampling order (G); the rule is report/outcome.py's."""

    @property
    def outcome(self) -> GroupOutcome:
        """all_pass, all_fail or mixed by the passes (report/outcome.py), as groups/* counts it."""
        return group_outcome(self.passes)

    @property
    def reward_std(self) -> float:
        mean = self.reward_mean
        return math.sqrt(sum((r - mean) ** 2 for r in self.rewards) / len(self.rewards))


@dataclass(frozen=True)
class SavedCheckpoint:
    """A checkpoint renamed into place: its step, directory and size on disk, whether it is the
    run's last, and the steps whose checkpoints remain beside it (older ones are pruned)."""

    step: int
    path: str
    num_bytes: int
    is_final: bool
    kept_steps: tuple[int, ...]


@dataclass(frozen=True)
class StepReport:
    """Everything one step produced. `scalars` keys are the metric names shown everywhere."""

    step: int
    """1-based step number."""
    total_steps: int
    scalars: dict[str, float]
    """e.g. reward, reward_std, kl, loss, completions/mean_length, time/step; see trainer."""
    groups: list[GroupReport] = field(default_factory=list)
    advantage_histogram: list[int] = field(default_factory=list)
    """Counts over ADVANTAGE_BIN_EDGES."""
    reward_histogram: list[int] = field(default_factory=list)
    """Counts over REWARD_BIN_EDGES."""
    group_reward_std_histogram: list[int] = field(default_factory=list)
    """Every group of the step (kept texts or not) counted by its reward_std, over
    GROUP_REWARD_STD_BIN_EDGES."""


def histogram(values: list[float], edges: tuple[float, ...]) -> list[int]:
    """Counts of values in [edges[i], edges[i+1]); out-of-range values land in the end bins."""
    counts = [0] * (len(edges) - 1)
    for v in values:
        i = 0
        while i < len(counts) - 1 and v >= edges[i + 1]:
            i += 1
        counts[i] += 1
    return counts


@dataclass(frozen=True)
class EvalReport:
    """One held-out evaluation (grpo/eval/heldout.py): its scalars (`eval/...`) and, per example,
    its samples with their rewards, for the dashboard's table and an example's history."""

    step: int
    """Steps trained before it: 0 is the model as loaded."""
    scalars: dict[str, float]
    examples: list[dict[str, object]] = field(default_factory=list)
    """`prompt_id`, `prompt`, `answer`, `completions`, `rewards` (per label, per completion),
    `passes`."""
