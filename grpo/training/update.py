"""The policy update of one GRPO step: mu optimizer steps on one generation batch.

Each optimizer step accumulates the gradient over micro-batches of `micro_batch_size`
completions (a group may be split); every piece's loss is divided by the whole step's
normalizer (loss.loss_normalizer), so the pieces add up to the full-batch loss and
gradient. mu = 1 takes the detached current log-probs as the old ones (ratio 1, no extra
forward pass, the gradient is the same); mu > 1 first records the sampling policy's real
log-probs, micro-batched too, so later iterations clip against it. On several ranks
(grpo/parallel/ranks.py) each rank trains its own groups: normalizers, the entropy threshold
and the metrics are over the whole step, and the gradients are summed before the
optimizer step, so every rank takes the single-process step; under FSDP
(grpo/parallel/sharding.py) FSDP sums them in backward, and every rank runs as many passes as the
busiest (sharding.idle_passes pads the others). A rollout without entropies (vLLM returns
none) gets them from the first iteration's forward pass, at the weights that sampled
(skipped groups from a no-grad pass), so no extra pass over the trained rows is needed.
Knows nothing of rewards or reporting.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch
from torch import Tensor
from torch.distributed.tensor import DTensor

from grpo.algo.importance_sampling import logprob_gap
from grpo.algo.loss import METRIC_KEYS
from grpo.failures import Diverged
from grpo.parallel.ranks import SINGLE, Ranks
from grpo.parallel.sharding import idle_count, idle_passes
from grpo.rollout.rollout import Rollout, group_rows, row_slices
from grpo.spec import JobSpec
from grpo.training.logprobs import completion_logps, completion_logps_entropy
from grpo.training.step_loss import (
    LossTerms,
    UpdateInputs,
    mask_share,
    start_counts,
    step_loss_terms,
)


@dataclass(frozen=True)
class UpdateResult:
    """Averages over the mu iterations, and the pre-update log-probs."""

    metrics: dict[str, float]
    """loss, grad_norm, kl (beta > 0), clip_ratio/low|high|region."""
    logps: Tensor  # (N, T) policy log-probs before the first optimizer step, detached
    entropy: Tensor
    """(N, T) the sampling distribution's entropies: the rollout's, or the policy's before
    the first optimizer step where the engine measured none (vLLM), detached."""


def policy_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    inputs: UpdateInputs,
    *,
    spec: JobSpec,
    autocast: Callable[[], AbstractContextManager[Any]],
    step: int,
    ranks: Ranks = SINGLE,
) -> UpdateResult:
    """Minimise the GRPO loss for spec.num_iterations optimizer steps on this batch (this
    rank's groups of the step when `ranks` is distributed), with `inputs`' advantages,
    reference log-probs, beta and loss mask (its counts started here where not given)."""
    run = _Update(model, optimizer, spec, autocast, ranks, step)
    # flat groups add exactly 0 only without a KL term and without an entropy bonus; under
    # FSDP every rank runs every row (a skipped row would only become an idle pass)
    is_skippable = inputs.beta == 0 and spec.entropy_coef == 0 and not run.sharded
    advantages = inputs.advantages
    groups = groups_with_signal(advantages, rollout.num_generations) if is_skippable else None
    if rollout.entropy is None and spec.top_entropy_quantile < 1:
        rollout = run.with_entropies(rollout)
    if groups is not None and len(groups) == 0 and not ranks.is_distributed:
        return _zero_gradient_step(
            model, optimizer, _filled(rollout, run.entropy_pass), spec.num_iterations
        )
    batch = rollout if groups is None else rollout.select_groups(groups)
    pieces = _pieces(batch, spec)
    idle = idle_count(ranks, len(pieces)) if run.sharded else 0  # FSDP's pairing passes
    pad = partial(idle_passes, model, rollout.completion_ids.device, idle, autocast=autocast)
    # entropies the engine did not give come from the first pass at the sampling weights:
    # the old-log-prob pass (mu > 1) or the first iteration, and no later pass
    fill_entropy = rollout.entropy is None
    old_logps, found = run.old_logps(batch, pieces, fill_entropy, pad)
    counts = inputs.counts or start_counts(inputs.loss_mask, ranks)
    terms = step_loss_terms(rollout, groups, inputs, counts, spec, ranks)
    skipped = None  # the entropies of the groups not trained, at the weights that sampled
    if rollout.entropy is None and groups is not None:
        skipped = _entropy_of_groups(rollout, _groups_without(groups, rollout), run.entropy_pass)
    history, first = run.iterate(
        batch, pieces, old_logps, terms, pad, with_entropy=fill_entropy and found is None
    )
    return _result(rollout, batch, terms, history, first, (found, skipped))


@dataclass(frozen=True)
class _Update:
    """What every phase of one policy_update reads."""

    model: Any
    optimizer: torch.optim.Optimizer
    spec: JobSpec
    autocast: Callable[[], AbstractContextManager[Any]]
    ranks: Ranks
    step: int

    @property
    def sharded(self) -> bool:
        return self.ranks.is_distributed and self.spec.resources.sharding == "fsdp"

    @property
    def share_prompt(self) -> bool:
        # one decoder call per piece under FSDP: the shared-prompt path skips its second call
        # when a piece's completions are one token long, which would unpair the ranks
        return not self.spec.gradient_checkpointing and not self.sharded

    def entropy_pass(self, rollout: Rollout) -> Tensor:
        return _entropy_pass(
            self.model,
            rollout,
            spec=self.spec,
            share_prompt=self.share_prompt,
            autocast=self.autocast,
        )

    def with_entropies(self, rollout: Rollout) -> Rollout:
        """The step-wide entropy threshold needs every entropy before the first loss: one
        no-grad pass; under FSDP the ranks agree on their passes first (idle_count is a
        collective), and the less busy ones pair the others' with idle passes."""
        idle = idle_count(self.ranks, len(_pieces(rollout, self.spec))) if self.sharded else 0
        rollout = replace(rollout, entropy=self.entropy_pass(rollout))
        with torch.no_grad():
            idle_passes(self.model, rollout.completion_ids.device, idle, autocast=self.autocast,
                        with_backward=False)  # fmt: skip
        return rollout

    def forward(
        self, batch: Rollout, piece: slice, with_entropy: bool
    ) -> tuple[Tensor, Tensor | None]:
        """(n, T) the current log-probs of `piece`'s rows, and their entropies where asked
        for or where the entropy bonus needs them (else None)."""
        spec = self.spec
        with self.autocast():
            if not with_entropy and spec.entropy_coef == 0:
                logps = completion_logps(
                    self.model,
                    batch,
                    rows=piece,
                    temperature=spec.temperature,
                    share_prompt=self.share_prompt,
                )
                return logps, None  # (n, T)
            return completion_logps_entropy(
                self.model,
                batch,
                rows=piece,
                temperature=spec.temperature,
                share_prompt=self.share_prompt,
                entropy_grad=spec.entropy_coef != 0,
            )  # (n, T) twice

    def old_logps(
        self, batch: Rollout, pieces: list[slice], fill_entropy: bool, pad: Callable[..., None]
    ) -> tuple[Tensor | None, Tensor | None]:
        """mu > 1: the sampling policy's log-probs of the rows trained (N', T), no-grad, and
        their entropies where the engine gave none (`fill_entropy`); mu = 1: none."""
        if self.spec.num_iterations <= 1:
            return None, None
        with torch.no_grad():
            passes = [self.forward(batch, piece, fill_entropy) for piece in pieces]
            pad(with_backward=False)
        old_logps = _cat([logps for logps, _ in passes], batch)  # (N', T)
        if not fill_entropy:
            return old_logps, None
        return old_logps, _cat([e.float() for _, e in passes if e is not None], batch)

    def iterate(
        self,
        batch: Rollout,
        pieces: list[slice],
        old_logps: Tensor | None,
        terms: LossTerms,
        pad: Callable[..., None],
        *,
        with_entropy: bool,
    ) -> tuple[list[dict[str, float]], tuple[Tensor, Tensor | None]]:
        """The mu optimizer steps: each iteration's metrics, and the first iteration's
        log-probs (with its entropies where `with_entropy` asked the first pass for them)."""
        history: list[dict[str, float]] = []
        first: tuple[Tensor, Tensor | None] | None = None
        for _ in range(self.spec.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            forward = partial(self.forward, batch, with_entropy=with_entropy and not history)
            metric_sums, logps = _accumulate_gradients(
                pieces, forward, old_logps, terms, self.step, idle=partial(pad, with_backward=True)
            )
            if not self.sharded:  # FSDP reduce-scattered the sums in backward
                self.ranks.sum_gradients(self.model.parameters())
            history.append(
                {**metric_sums(), **_optimizer_step(self.model, self.optimizer, self.spec)}
            )
            first = logps if first is None else first
        assert first is not None
        return history, first


def _result(
    rollout: Rollout,
    batch: Rollout,
    terms: LossTerms,
    history: list[dict[str, float]],
    first: tuple[Tensor, Tensor | None],
    entropies: tuple[Tensor | None, tuple[Tensor, Tensor] | None],
) -> UpdateResult:
    """The update's metrics averaged over its iterations, the first pass's log-probs spread
    over all N rows, and the sampling distribution's entropies: the rollout's, or those the
    update's passes found (`entropies`: the old-log-prob pass's, the skipped groups')."""
    masked = {**mask_share(terms), **_gap_metrics(first[0], batch, terms)}
    found, skipped = entropies
    entropy = rollout.entropy
    if entropy is None:  # the first pass's, and the skipped groups' from their own pass
        found = first[1] if found is None else found
        assert found is not None
        entropy = _spread(found, terms.rows, rollout)
        if skipped is not None:
            entropy = entropy.index_copy(0, *skipped)
    return UpdateResult(
        {**_mean_metrics(history), **masked}, _spread(first[0], terms.rows, rollout), entropy
    )


def _pieces(rollout: Rollout, spec: JobSpec) -> list[slice]:
    return row_slices(rollout.completion_ids.shape[0], spec.micro_batch_size)


def _entropy_pass(
    model: Any,
    rollout: Rollout,
    *,
    spec: JobSpec,
    share_prompt: bool,
    autocast: Callable[[], AbstractContextManager[Any]],
) -> Tensor:
    """(N, T) the policy's entropies of the rollout's completions (tempered, 0 on padding),
    no-grad, micro-batched: for rows the update will not run forward before it steps."""
    parts = []
    with torch.no_grad(), autocast():
        for piece in _pieces(rollout, spec):
            _, entropy = completion_logps_entropy(
                model, rollout, rows=piece, temperature=spec.temperature,
                share_prompt=share_prompt, entropy_grad=False,
            )  # fmt: skip
            parts.append(entropy.float())
    return _cat(parts, rollout)


def _filled(rollout: Rollout, entropy_pass: Callable[[Rollout], Tensor]) -> Rollout:
    """The rollout with its entropies, from `entropy_pass` where the engine gave none."""
    if rollout.entropy is not None:
        return rollout
    return replace(rollout, entropy=entropy_pass(rollout))


def _groups_without(groups: Tensor, rollout: Rollout) -> Tensor:
    """The rollout's group indices not in `groups`."""
    count = rollout.prompt_ids.shape[0]
    kept = torch.zeros(count, dtype=torch.bool, device=groups.device)
    kept[groups] = True
    return (~kept).nonzero().squeeze(1)


def _entropy_of_groups(
    rollout: Rollout, groups: Tensor, entropy_pass: Callable[[Rollout], Tensor]
) -> tuple[Tensor, Tensor] | None:
    """(rows, (n, T) entropies) of the given groups' completion rows; None for no group."""
    if len(groups) == 0:
        return None
    return group_rows(groups, rollout.num_generations), entropy_pass(rollout.select_groups(groups))


def _gap_metrics(logps: Tensor, batch: Rollout, terms: LossTerms) -> dict[str, float]:
    """generation/logprob_diff_mean and _max: |trainer's pre-update log-prob - engine's
    sampling log-prob| over the loss tokens of the rows trained, every rank's; none when the
    trainer sampled itself (no sampling_logps)."""
    if batch.sampling_logps is None:
        return {}
    mask = terms.loss_mask[terms.rows].to(logps.dtype)
    total, largest = logprob_gap(logps, batch.sampling_logps, mask)
    total_sum, count = terms.ranks.sum([float(total), float(mask.sum())])
    (top,) = terms.ranks.max([float(largest)])
    return {
        "generation/logprob_diff_mean": total_sum / max(count, 1.0),
        "generation/logprob_diff_max": top,
    }


def _accumulate_gradients(
    pieces: list[slice],
    current_logps: Callable[[slice], tuple[Tensor, Tensor | None]],
    old_logps: Tensor | None,
    terms: LossTerms,
    step: int,
    idle: Callable[[], None],
) -> tuple[Callable[[], dict[str, float]], tuple[Tensor, Tensor | None]]:
    """Forward and backward one micro-batch at a time; gradients add up in .grad. `idle`
    runs after them, before any other collective (FSDP's idle passes).

    Returns the step's loss and token-mean metrics (each piece's weighted by its unmasked
    tokens over the step's), summed over ranks while the gradients are (read by calling
    it), and the detached log-probs of every trained row (N', T) with their entropies when
    the forward passes computed them (else None).
    """
    loss, kept, kept_entropy = 0.0, [], []
    sums: dict[str, float] = {}
    for piece in pieces:
        logps, entropies = current_logps(piece)  # (n, T)
        old = logps.detach() if old_logps is None else old_logps[piece]
        bonus = entropies if terms.spec.entropy_coef != 0 else None
        piece_loss, metrics = terms.loss(logps, bonus, old, piece)
        _check_finite(piece_loss, step)
        piece_loss.backward()  # type: ignore[no-untyped-call]
        loss += float(piece_loss.detach())
        tokens = float(terms.loss_mask[terms.rows[piece]].sum())
        for key, value in metrics.items():
            sums[key] = sums.get(key, 0.0) + value * tokens
        kept.append(logps.detach())
        if entropies is not None:
            kept_entropy.append(entropies.detach().float())
    idle()
    summed = terms.ranks.sum_by_key({**sums, "loss": loss}, keys=(*METRIC_KEYS, "loss"))

    def step_metrics() -> dict[str, float]:
        totals = summed()
        step_loss = totals.pop("loss")
        means = {key: value / max(terms.step_tokens, 1.0) for key, value in totals.items()}
        return {**means, "loss": step_loss}

    entropy = _cat(kept_entropy, terms.loss_mask) if kept_entropy or not pieces else None
    return step_metrics, (_cat(kept, terms.loss_mask), entropy)


def _cat(parts: list[Tensor], like: Rollout | Tensor) -> Tensor:
    """Rows of the micro-batches in order; (0, T) for a rank that trains no row."""
    if parts:
        return torch.cat(parts)
    ids = like.completion_ids if isinstance(like, Rollout) else like
    return torch.zeros((0, ids.shape[1]), device=ids.device)


def _optimizer_step(
    model: Any, optimizer: torch.optim.Optimizer, spec: JobSpec
) -> dict[str, float]:
    """Clip the accumulated gradient and step; the pre-clip gradient norm."""
    grad_norm = _clip_gradients(model, spec.max_grad_norm)
    optimizer.step()
    return {"grad_norm": grad_norm}


def groups_with_signal(advantages: Tensor, num_generations: int) -> Tensor:
    """Indices of groups with a nonzero advantage. Without a KL term the others (all-equal
    rewards) add exactly 0 to loss and gradient, so their forward and backward are skipped."""
    if advantages.numel() == 0:  # a rank without groups
        return torch.zeros(0, dtype=torch.long, device=advantages.device)
    return advantages.view(-1, num_generations).ne(0).any(dim=1).nonzero().squeeze(1)


def _spread(logps: Tensor, rows: Tensor, rollout: Rollout) -> Tensor:
    """Per-token values of the trained rows placed in a zero (N, T) tensor (skipped rows 0)."""
    if len(rows) == rollout.completion_ids.shape[0]:
        return logps
    return logps.new_zeros(rollout.completion_ids.shape).index_copy(0, rows, logps)


def _zero_gradient_step(
    model: Any, optimizer: torch.optim.Optimizer, rollout: Rollout, iterations: int
) -> UpdateResult:
    """No group has signal: take the optimizer steps a zero gradient would (momentum and
    weight decay still act), without any forward pass."""
    for _ in range(iterations):
        for p in model.parameters():
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
        optimizer.step()
    metrics = {"clip_ratio/low": 0.0, "clip_ratio/high": 0.0, "clip_ratio/region": 0.0}
    logps = torch.zeros(rollout.completion_ids.shape, device=rollout.completion_ids.device)
    assert rollout.entropy is not None  # policy_update filled it
    return UpdateResult({**metrics, "grad_norm": 0.0, "loss": 0.0}, logps, rollout.entropy)


def _check_finite(loss: Tensor, step: int) -> None:
    if not bool(torch.isfinite(loss)):
        raise Diverged("NaN" if bool(torch.isnan(loss)) else "infinite", step=step)


def _clip_gradients(model: Any, max_norm: float | None) -> float:
    """Global gradient norm before clipping (inf max_norm measures without clipping)."""
    params = [p for p in model.parameters() if p.grad is not None]
    limit = float("inf") if max_norm is None else max_norm
    norm = torch.nn.utils.clip_grad_norm_(params, limit)
    return float(norm.full_tensor() if isinstance(norm, DTensor) else norm)


def _mean_metrics(history: list[dict[str, float]]) -> dict[str, float]:
    return {key: sum(m[key] for m in history) / len(history) for key in history[0]}
