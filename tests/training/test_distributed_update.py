"""One update on 2 ranks equals one process on the union (grpo/parallel/ranks.py, update.py).

A fixed rollout of 3 prompts x G 4 from builtin:tiny is trained once in this process and
once by 2 gloo ranks spawned here: rank 0 owns groups 0-1, rank 1 group 2 (the uneven
split a prompts_per_step of 3 gives). Every loss_type with beta > 0, mu > 1 and
micro-batching (pieces that split groups), the variants whose step-wide terms cross
ranks (entropy threshold, truncation mask, skipped groups, a rank with no trained row),
and FSDP with gradient checkpointing (the policy prepared and put in update mode as the
trainer does, so blocks recompute their forward, FSDP hooks and all, in backward):
both ranks must end with the single process's parameters (fp32, atol 1e-6) and report its
metrics. The `blind/` jobs give the ranks the rollout without its entropies (as vLLM's
comes): the update's own passes find them, the entropy threshold and skipped groups
included, and the ranks still take the single process's step.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from grpo.parallel.launch import leave_group
from grpo.parallel.ranks import SINGLE, Ranks
from grpo.parallel.sharding import shard_model, shard_models
from grpo.rollout.policy import prepare_policy, update_mode
from grpo.rollout.rollout import Rollout, group_rows
from grpo.spec import JobSpec
from grpo.training.logprobs import completion_logps
from grpo.training.reference import ReferencePolicy
from grpo.training.step_loss import UpdateInputs, loss_mask_of
from grpo.training.update import policy_update
from tests.stack import free_port
from tests.training.test_update import ADVANTAGES, rollout_and_reference
from tests.training.test_update import spec as update_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LOSS_TYPES = ("grpo", "bnpo", "dapo", "dr_grpo", "cispo")
CASES: dict[str, dict[str, Any]] = {
    "kl_mu3_micro": dict(beta=0.1, num_iterations=3, micro_batch_size=5, max_grad_norm=0.05),
    "masked_truncated": dict(
        mask_truncated_completions=True, beta=0.1, num_iterations=2, micro_batch_size=3
    ),
    "entropy_mask_bonus": dict(
        entropy_coef=0.05, top_entropy_quantile=0.5, num_iterations=2, micro_batch_size=5
    ),
    "beta0_skips_groups": dict(beta=0.0, num_iterations=2, micro_batch_size=2),
}
RANK1_FLAT = torch.tensor([1.2, -0.4, 0.3, -1.1, 0.5, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0])
"""Group 2 (all of rank 1) has no signal: with beta 0 rank 1 trains no row at all."""


def job(loss_type: str, case: str, sharding: str = "ddp", **overrides: Any) -> JobSpec:
    resources = {"sharding": sharding}
    knobs = {**CASES[case], "loss_type": loss_type, "resources": resources, **overrides}
    if loss_type == "cispo":
        knobs["epsilon_high"] = 5.0
    return update_spec(**knobs)


def all_jobs() -> list[tuple[str, JobSpec, torch.Tensor]]:
    """Every case on ddp; on fsdp every loss_type with beta, mu 3 and micro-batches, grpo
    with each other case (fsdp runs the flat groups a ddp rank skips as rows), and grpo's
    first case with gradient checkpointing."""
    jobs = [(f"{t}/{c}", job(t, c), ADVANTAGES) for t in LOSS_TYPES for c in CASES]
    jobs += [
        (f"fsdp/{t}/kl_mu3_micro", job(t, "kl_mu3_micro", "fsdp"), ADVANTAGES) for t in LOSS_TYPES
    ]
    jobs += [(f"fsdp/grpo/{c}", job("grpo", c, "fsdp"), ADVANTAGES) for c in list(CASES)[1:]]
    checkpointed = job("grpo", "kl_mu3_micro", "fsdp", gradient_checkpointing=True)
    jobs += [("fsdp/grpo/kl_mu3_micro/checkpointed", checkpointed, ADVANTAGES)]
    flat = job("dapo", "beta0_skips_groups")
    fsdp_flat = job("dapo", "beta0_skips_groups", "fsdp")
    blind = [
        ("blind/grpo/entropy_mask_bonus", job("grpo", "entropy_mask_bonus"), ADVANTAGES),
        ("blind/fsdp/grpo/entropy_mask", job("grpo", "entropy_mask_bonus", "fsdp"), ADVANTAGES),
        ("blind/dapo/rank1_flat", flat, RANK1_FLAT),
        ("blind/fsdp/dapo/rank1_flat", fsdp_flat, RANK1_FLAT),
    ]
    return [
        *jobs,
        ("dapo/rank1_flat", flat, RANK1_FLAT),
        ("fsdp/dapo/rank1_flat", fsdp_flat, RANK1_FLAT),
        *blind,
    ]


def update(
    data: dict[str, Any], spec: JobSpec, advantages: torch.Tensor, ranks: Ranks, blind: bool = False
) -> Any:
    """Train a copy of the model on this rank's groups; parameters and metrics after.
    `blind`: the rollout without its entropies."""
    rollout: Rollout = data["rollout"]
    rollout = replace(rollout, entropy=None) if blind else rollout
    groups = torch.tensor(list(ranks.groups(3)))
    rows = group_rows(groups, 4)
    mask = loss_mask_of(rollout, spec)
    model = prepare_policy(copy.deepcopy(data["model"]), spec)  # checkpointing, as the trainer
    is_sharded = ranks.is_distributed and spec.resources.sharding == "fsdp"
    if is_sharded:
        shard_model(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.learning_rate)  # see test_update
    with update_mode(model, spec):
        result = policy_update(
            model,
            optimizer,
            rollout.select_groups(groups),
            UpdateInputs(
                advantages[rows],
                data["ref_logps"][rows] if spec.beta > 0 else None,
                mask[rows],
                spec.beta,
            ),
            spec=spec,
            autocast=nullcontext,
            step=1,
            ranks=ranks,
        )
    full = [p.full_tensor() if is_sharded else p for p in model.parameters()]  # type: ignore[operator]
    return torch.cat([p.detach().flatten() for p in full]), result.metrics


def _rank_main(rank: int, ports: tuple[int, int], data_path: str, out_dir: str) -> None:
    """One spawned rank, in two process groups one after the other (a spawn imports torch
    and the trainer again, a group costs nothing): the sharded reference of
    test_a_rank_without_groups_still_gathers_the_sharded_reference in a fresh group, then
    every job on its groups; results saved for the parent."""
    torch.set_num_threads(1)
    data = torch.load(data_path, weights_only=False)
    _reference_rank(rank, ports[0], data, out_dir)
    address = f"tcp://127.0.0.1:{ports[1]}"
    dist.init_process_group("gloo", init_method=address, rank=rank, world_size=2)
    try:
        ranks = Ranks(rank, 2)
        results = {
            name: update(data, spec, adv, ranks, blind=name.startswith("blind/"))
            for name, spec, adv in all_jobs()
        }
        torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    finally:
        leave_group()


@pytest.fixture(scope="module")
def data(tmp_path_factory, grpo_cache_dir) -> dict[str, Any]:
    model, rollout, ref_logps = rollout_and_reference(
        job("grpo", "kl_mu3_micro"), tmp_path_factory.mktemp("run"), grpo_cache_dir
    )
    return {"model": model, "rollout": rollout, "ref_logps": ref_logps}


@pytest.fixture(scope="module")
def ranks_folder(data, tmp_path_factory) -> Path:
    """Where the 2 spawned ranks left their results (_rank_main)."""
    folder = tmp_path_factory.mktemp("ranks")
    torch.save(data, folder / "data.pt")
    ports = (free_port(), free_port())
    mp.spawn(_rank_main, args=(ports, str(folder / "data.pt"), str(folder)), nprocs=2)
    return folder


@pytest.fixture(scope="module")
def rank_results(ranks_folder) -> list[dict[str, Any]]:
    return [torch.load(ranks_folder / f"rank{r}.pt", weights_only=False) for r in range(2)]


@pytest.mark.parametrize(
    ("name", "spec", "advantages"), [pytest.param(*j, id=j[0]) for j in all_jobs()]
)
def test_two_ranks_take_the_single_process_step(data, rank_results, name, spec, advantages):
    params, metrics = update(data, spec, advantages, SINGLE)
    assert metrics["grad_norm"] > 0
    for rank, results in enumerate(rank_results):
        rank_params, rank_metrics = results[name]
        torch.testing.assert_close(rank_params, params, atol=1e-6, rtol=0, msg=f"rank {rank}")
        assert rank_metrics.keys() == metrics.keys()
        for key, value in metrics.items():
            assert rank_metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-7), (rank, key)
    moved = params - torch.cat([p.detach().flatten() for p in data["model"].parameters()])
    assert moved.abs().max() > 1e-3  # the step is large enough for 1e-6 to mean something


def test_groups_are_dealt_in_contiguous_slices_in_rank_order():
    assert [list(Ranks(r, 3).groups(8)) for r in range(3)] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert [list(Ranks(r, 2).groups(3)) for r in range(2)] == [[0, 1], [2]]
    assert list(SINGLE.groups(5)) == [0, 1, 2, 3, 4]


GROUP_THREADS = ("gloo", "tcpstore")
"""Parts of the names of the threads a gloo group runs: its workers, its transport loop
and (rank 0) the store's server."""


def group_threads() -> list[str]:
    """The names of this process's threads that belong to a process group (Linux)."""
    names = []
    for task in Path("/proc/self/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return sorted(n for n in names if any(part in n for part in GROUP_THREADS))


def _reference_rank(rank: int, port: int, data: dict[str, Any], out_dir: str) -> None:
    """A sharded reference on 2 ranks, rank 1 without groups (dynamic sampling can leave a
    rank none): both must take part in gathering its weights. The rank then leaves the
    group as a run's rank does, and the group's threads must have ended there, not run on
    into the interpreter's shutdown (see leave_group)."""
    address = f"tcp://127.0.0.1:{port}"
    timeout = timedelta(seconds=60)  # the old code hung here: fail instead
    dist.init_process_group("gloo", init_method=address, rank=rank, world_size=2, timeout=timeout)
    try:
        logps = _reference_logps(rank, data)
        threads = {"in group": group_threads()}
    finally:
        leave_group()
    threads["left"] = group_threads()
    torch.save({"logps": logps, "threads": threads}, Path(out_dir) / f"ref{rank}.pt")


def _reference_logps(rank: int, data: dict[str, Any]) -> torch.Tensor:
    """The sharded reference's log-probs of this rank's rows (rank 1: none); the sharded
    models end with the call."""
    model = copy.deepcopy(data["model"])
    reference = ReferencePolicy(model)
    shard_models(model, reference.frozen)
    rollout: Rollout = data["rollout"]
    mine = rollout if rank == 0 else rollout.select_groups(torch.zeros(0, dtype=torch.long))
    return reference.logps(model, mine, temperature=1.5, micro_batch_size=None)


def test_a_rank_without_groups_still_gathers_the_sharded_reference(data, ranks_folder):
    with torch.no_grad():
        expected = completion_logps(data["model"], data["rollout"], temperature=1.5)
    results = [torch.load(ranks_folder / f"ref{r}.pt") for r in range(2)]
    torch.testing.assert_close(results[0]["logps"], expected, atol=1e-6, rtol=0)
    assert results[1]["logps"].shape == (0, expected.shape[1])
    for rank, result in enumerate(results):
        assert result["threads"]["in group"], rank  # else the names no longer match
        assert result["threads"]["left"] == [], rank
