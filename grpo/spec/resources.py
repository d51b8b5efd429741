"""The `resources` section of a JobSpec: which queue takes the job, the memory it needs and
how many ranks on how many machines run it. Pydantic only, imports without torch."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from grpo.spec.config import SECTION_CONFIG, SpecInt


class ResourcesSpec(BaseModel):
    """Where the job runs."""

    model_config = SECTION_CONFIG
    queue: str = Field("default", pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    """Celery queue; workers started for a GPU class listen on its queue."""
    min_free_memory_gb: float | None = Field(None, gt=0, le=100_000)
    """Free memory (GiB) the job needs on its device (on each rank's GPU with several ranks); a
    worker with less leaves it queued."""
    num_processes: SpecInt = Field(1, ge=1, le=64)
    """Ranks of one run on each of its `num_nodes` machines (torch.distributed data
    parallel): one per GPU on CUDA (NCCL), CPU processes with gloo otherwise; torchrun's
    `--nproc-per-node`. Whole groups are dealt to ranks, so prompts_per_step must be at
    least the ranks in all (num_nodes x num_processes); the update equals one process on
    the union."""
    num_nodes: SpecInt = Field(1, ge=1, le=64)
    """Machines the run spans, each running `num_processes` ranks: torchrun's `--nnodes`
    (TRL through accelerate: `num_machines`, whose `num_processes` counts the ranks of all
    machines, this field's num_nodes x num_processes). `grpo train` runs such a spec with
    `--nnodes` equal to it and `--rdzv-endpoint` on every machine. Through the service
    each node is taken by one worker that has GRPO_WORKER_ADDRESS set, and the run starts
    once all are (a gang of workers: docs/how-to/deployment.md)."""
    sharding: Literal["ddp", "fsdp"] = "ddp"
    """ddp: every rank holds the whole model, gradients are all-reduced. fsdp (FSDP2
    `fully_shard`, full fine-tuning only): each rank holds 1/num_processes of the weights,
    gradients and optimizer state (grpo/parallel/sharding.py, docs/scaling.md)."""
