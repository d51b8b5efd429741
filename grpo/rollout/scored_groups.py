"""One path from prompts to scored groups, shared by training's rounds (grpo/rollout/rounds.py)
and held-out evaluation (grpo/eval/heldout.py): each example's prompt fitted to the prompt
budget, the prompts tokenized into one request to an engine with a seeded stream per group,
the completions decoded, the reward batch scored and its weighted totals taken. What the
two differ in is one GroupPass: the engine, the rewarder, the sampling knobs, G, each
group's seed, the trainer state and answer column the reward functions see, the tools the
prompts show. Knows nothing of advantages or of the update.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from grpo.data.example import Example
from grpo.data.prompt_fit import FittedPrompt, fit_prompt
from grpo.engines.engine import Engine, GenerationRequest
from grpo.engines.tool_loop import ToolLoop
from grpo.report.timing import StepClock
from grpo.rewards.batch import RewardBatch, TrainerState
from grpo.rewards.rules import total_rewards
from grpo.rewards.scoring import Rewarder, RewardOutcome
from grpo.rollout.policy import PolicyView
from grpo.rollout.rollout import Rollout, completion_token_ids, decode_completions, tokenize_prompts
from grpo.spec.generation import Sampling


@dataclass(frozen=True)
class GroupPass:
    """How one pass turns its examples into scored groups (a training round, a batch of
    held-out examples): what differs between training and evaluation, whole."""

    engine: Engine
    rewarder: Rewarder
    sampling: Sampling
    num_generations: int
    seed_of: Callable[[int], int]
    """The seed of the sampling stream of the group at a position in the step (or in the
    eval split): grpo/rollout/sampling.py's group_seed or eval_seed."""
    trainer_state: TrainerState
    answer_field: str | None
    """The records' answer column the reward functions see."""
    tools: list[dict[str, Any]] | None = None
    """The tool schemas the prompts show (training with tools); None: none."""


@dataclass(frozen=True)
class ScoredGroups:
    """B examples' prompts as the policy saw them, their G completions each, and scores."""

    fitted: list[FittedPrompt]
    rollout: Rollout
    texts: list[str]
    """B x G decoded completions, group-major."""
    batch: RewardBatch
    outcome: RewardOutcome
    rewards: torch.Tensor
    """(B, G) the weighted totals of the scores (rules.total_rewards)."""

    @property
    def prompts(self) -> list[str]:
        return [f.text for f in self.fitted]


def fit_prompts(
    policy: PolicyView, examples: Sequence[Example], tools: list[dict[str, Any]] | None
) -> list[FittedPrompt]:
    """Each example's prompt as the policy sees it, cut to max_prompt_length."""
    spec = policy.spec
    return [
        fit_prompt(
            example,
            spec.data,
            policy.tokenizer,
            max_length=spec.max_prompt_length,
            add_special_tokens=not policy.uses_chat_template,
            tools=tools,
        )
        for example in examples
    ]


def sample_groups(
    policy: PolicyView,
    examples: Sequence[Example],
    how: GroupPass,
    *,
    step: int,
    first: int,
    clock: StepClock,
) -> ScoredGroups:
    """The examples' groups, generated (clock phase `generate`) and scored (`reward`);
    `first`: the position of the first example's group, which its seed is drawn for. A
    RewardFunctionError goes to the caller, which knows where the step is."""
    fitted = fit_prompts(policy, examples, how.tools)
    prompts = [f.text for f in fitted]
    with clock.phase("generate"):
        records = [{"prompt": e.prompt, "answer": e.answer, **e.data} for e in examples]
        request = group_request(policy, prompts, how, first=first, records=records)
        rollout = how.engine.generate(request)
    if isinstance(how.engine, ToolLoop):  # time/tools: the calls' wall time
        clock.seconds["tools"] = clock.seconds.get("tools", 0.0) + how.engine.take_tool_seconds()
    with clock.phase("reward"):
        texts = decode_completions(policy.tokenizer, rollout)
        batch = RewardBatch(
            run_id=policy.run_id,
            step=step,
            examples=examples,
            prompts=prompts,
            completions=texts,
            num_tokens=rollout.model_token_mask.sum(dim=1).tolist(),  # tool tokens left out
            completion_ids=completion_token_ids(rollout),
            trainer_state=how.trainer_state,
            answer_field=how.answer_field,
            trajectories=rollout.trajectories,
        )
        outcome = how.rewarder.score(batch)
        rewards = torch.tensor(total_rewards(outcome.scores, how.rewarder.weights))
        rewards = rewards.view(len(examples), -1)  # (B, G)
    return ScoredGroups(fitted, rollout, texts, batch, outcome, rewards)


def group_request(
    policy: PolicyView,
    prompts: list[str],
    how: GroupPass,
    *,
    first: int = 0,
    records: list[dict[str, Any]] | None = None,
) -> GenerationRequest:
    """G completions of each prompt, the group at position `first + i` drawing from its own
    stream: resuming at step k samples what the uninterrupted run sampled, whatever consumed
    the global RNG before, and neither generation_batch_size nor the ranks change a sample.
    `records`: the prompts' records, for a tool environment's reset (engines without tools
    ignore them)."""
    spec = policy.spec
    ids, mask = tokenize_prompts(
        policy.tokenizer,
        prompts,
        max_length=spec.max_prompt_length,
        add_special_tokens=not policy.uses_chat_template,
        device=policy.device,
    )
    seeds = [how.seed_of(first + i) for i in range(len(prompts))]
    return GenerationRequest(
        ids, mask, how.num_generations, spec.max_completion_length, how.sampling, seeds, records
    )
