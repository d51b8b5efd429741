"""The run this worker holds, wired to the store (grpo/run/run.py with worker/store_sink.py):
every step, log line, checkpoint and evaluation is written under the worker's lease, and a
cancel or a stop ends the run at a step boundary. Each write waits out a database outage;
a run that gave up on the database stops, to be handed back (worker/run_writes.py).

It runs in rank 0's process, which the worker starts for the run (worker/ranks.py; one
process for most runs); the other ranks of a run on several are given no lease and write
nothing to the store.
"""

from __future__ import annotations

from collections.abc import Callable

from app.settings import get_settings
from app.store.lease import Lease
from grpo.report.trackers import Outcome
from grpo.run.environment import RunEnvironment
from grpo.run.run import Run
from grpo.spec import JobSpec
from grpo.spec.sources import LocalRoots
from grpo.training.reach import RunReach
from grpo.training.trainer import FitResult
from worker.store_sink import StoreSink


def train(held: Lease, spec: JobSpec, *, should_stop: Callable[[], bool]) -> FitResult:
    """Train the run this worker holds; `should_stop`: the worker was told to stop. Its
    trackers are closed with the run's outcome before the worker ends the run in the store:
    who sees it ended there finds its tracker runs ended too."""
    sink = StoreSink(held, spec, worker_stops=should_stop)
    return Run(spec, environment(held.run_id), [sink]).fit()


def outcome_of(result: FitResult, *, is_cancel_asked: Callable[[], bool]) -> Outcome:
    """Succeeded, cancelled, or (the worker is stopping) to be handed back to the queue;
    `is_cancel_asked`: the lease check."""
    if not result.is_stopped:
        return "succeeded"
    if is_cancel_asked():  # a cancel wins over a stop
        return "cancelled"
    return "handed_back"


def train_silently(run_id: str, spec: JobSpec) -> FitResult:
    """A rank other than 0: the same training, nothing written to the store (rank 0 reports
    the whole step; a stop reaches this rank through the trainer's own collective)."""
    return Run(spec, environment(run_id)).fit()


def environment(run_id: str) -> RunEnvironment:
    """Where the service's runs train: the operator's settings (GRPO_*)."""
    settings = get_settings()
    return RunEnvironment(
        workdir=settings.runs_dir / run_id,
        cache_dir=settings.resolved_cache_dir,
        run_id=run_id,
        reach=RunReach(
            datasets_dir=settings.datasets_dir,
            model_roots=LocalRoots(settings.local_path_base, tuple(settings.model_root_list)),
            data_roots=LocalRoots(settings.local_path_base, tuple(settings.data_root_list)),
            reward_hosts=tuple(settings.reward_host_list),
            token_envs=tuple(settings.reward_token_env_list),
            tool_hosts=tuple(settings.tool_host_list),
            vllm_server_hosts=tuple(settings.vllm_server_host_list),
            plugin_dirs=tuple(settings.plugin_dir_list),
        ),
        mlflow_uri=settings.mlflow_uri,
    )
