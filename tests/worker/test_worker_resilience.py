"""Workers in the real world: killed mid-run, cancelled, duplicate deliveries, bad jobs.

Real `celery worker` processes on PostgreSQL + Redis and on the embedded default; the
heartbeat is shortened so a lost worker is noticed in seconds.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from mlflow.entities import Run
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from app.queue import TRAIN_TASK, make_celery
from app.settings import Settings
from tests.fixtures.service import tiny_spec
from tests.local_http import serving
from tests.stack import REDIS_URL, Stack, create_pg_database, drop_pg_database, running_stack
from tests.step_gate import StepGate, gate, gated_reward
from tests.tracker_logs import (
    mlflow_history,
    mlflow_runs,
    wandb_exit_code,
    wandb_logs,
    wandb_metric,
)
from tests.worker.test_run_lifecycle import wait_for_final

FAST = {
    "GRPO_HEARTBEAT_SECONDS": "1",
    "GRPO_STALE_AFTER_SECONDS": "6",
    "GRPO_DECLINE_PAUSE_SECONDS": "1",
    "CUDA_VISIBLE_DEVICES": "",  # a worker started for no GPU, whatever this machine has
}


@pytest.fixture(scope="module")
def step_gate() -> Iterator[str]:
    """A StepGate on 127.0.0.1 (its host:port), for the module's stacks."""
    with serving(StepGate) as host:
        try:
            yield host
        finally:  # a held request ends before the server stops
            for event in list(StepGate.opened.values()):
                event.set()


def kill_worker(stack: Stack, name: str) -> None:
    """SIGKILL the stack's worker `name` and wait until its ranks (forked from its fork
    server, which end a moment after it) have ended too: nothing of it can store a step."""
    worker = psutil.Process(stack.processes[name].pid)
    tree = [worker, *worker.children(recursive=True)]
    worker.kill()
    stack.processes[name].wait()
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive, alive


@pytest.fixture(scope="module", params=["postgres", "embedded"])
def fast_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, step_gate: str
) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp(f"resilient-{request.param}")
    env = {**FAST, "GRPO_MODEL_ROOTS": str(data_dir / "models"), **mlflow_file_store(data_dir)}
    env["GRPO_REWARD_HOSTS"] = step_gate
    if request.param == "embedded":
        with running_stack(data_dir, extra_env=env) as stack:
            yield stack
        return
    url = create_pg_database()
    try:
        with running_stack(
            data_dir, database_url=url, broker_url=REDIS_URL, extra_env=env
        ) as stack:
            yield stack
    finally:
        drop_pg_database(url)


def mlflow_file_store(data_dir: Path) -> dict[str, str]:
    """One MLflow file store for the stack: no SQLite schema to create per run (13 s here)."""
    return {
        "GRPO_MLFLOW_URI": (data_dir / "mlruns").as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",
    }


def tracked_run(stack: Stack, run_id: str) -> Run:
    """The run's one MLflow run, once it has ended (trackers close as their attempt ends)."""
    uri = stack.env["GRPO_MLFLOW_URI"]
    deadline = time.monotonic() + 60
    while True:
        (run,) = mlflow_runs(uri, run_id)
        if run.info.status != "RUNNING" or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


def step_of(client: httpx.Client, run_id: str) -> int:
    return int(client.get(f"/api/runs/{run_id}").json()["step"])


def wait_for_step(client: httpx.Client, run_id: str, step: int, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.get(f"/api/runs/{run_id}").json()
        if run["step"] >= step or run["status"] in ("succeeded", "failed", "cancelled"):
            return run
        time.sleep(0.2)
    raise TimeoutError(f"run {run_id} did not reach step {step}")


def test_killed_worker_run_resumes_on_another_worker_with_every_step_once(
    fast_stack: Stack, step_gate: str
) -> None:
    with fast_stack.client() as client:
        # killed while step 4's reward is held: steps 1-3 stored, the checkpoint at 2, so
        # the next attempt re-does step 3 (which the trackers must not hold twice)
        reward, path = gated_reward(step_gate, "killed", held_step=4)
        spec = tiny_spec(
            fast_stack, max_steps=6, save_steps=2, name="killed", rewards=[reward],
            reward_preflight_records=0,
            logging={"report_to": ["tensorboard", "mlflow", "wandb"]},
        )  # fmt: skip
        run_id = client.post("/api/runs", json=spec).json()["id"]
        assert gate(path, "reached").wait(timeout=300), fast_stack.logs()
        before = client.get(f"/api/runs/{run_id}").json()
        assert before["status"] == "running", before
        kill_worker(fast_stack, "worker")
        killed_at = time.monotonic()
        gate(path, "opened").set()
        fast_stack.start_worker("worker2")

        # the stale limit (6 s), a housekeeping period and a worker start: ~20 s; 300 s is a hang
        requeued_at = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            run = client.get(f"/api/runs/{run_id}").json()
            if run["attempts"] >= 2 and run["status"] == "running":
                requeued_at = time.monotonic()
                break
            time.sleep(0.2)
        assert requeued_at, f"run was not picked up again\n{fast_stack.logs()}"
        final = wait_for_final(client, run_id)
        assert final["status"] == "succeeded", f"{final['error']}\n{fast_stack.logs()}"
        assert final["attempts"] == 2

        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        assert [m["step"] for m in metrics] == list(range(1, 7))
        assert_tracked_once(fast_stack, run_id, {m["step"]: m["metrics"] for m in metrics})
        groups = client.get(f"/api/runs/{run_id}/steps/3/groups").json()["items"]
        assert [g["index"] for g in groups] == [0, 1]
        logs = " ".join(
            line["message"] for line in client.get(f"/api/runs/{run_id}/logs").json()["items"]
        )
        assert "requeued" in logs and "resum" in logs.lower()  # by the stale sweep, resumed
        print(f"\nkill at step {before['step']} -> running again on worker2: "
              f"{requeued_at - killed_at:.1f} s")  # fmt: skip


def assert_tracked_once(stack: Stack, run_id: str, stored: dict[int, dict[str, float]]) -> None:
    """The killed attempt sent steps its successor re-did after the checkpoint: the trackers
    still hold ONE run each, with no step twice. A step's time/step differs between attempts:
    TensorBoard shows the re-done step's (as the store), MLflow the first attempt's."""
    steps = list(stored)
    tracked = tracked_run(stack, run_id)
    assert tracked.info.status == "FINISHED"
    uri = stack.env["GRPO_MLFLOW_URI"]
    assert [step for step, _ in mlflow_history(uri, tracked, "reward")] == steps
    run_dir = stack.data_dir / "runs" / run_id
    board = EventAccumulator(str(run_dir / "tensorboard"))
    board.Reload()  # purged from the second attempt's first step
    assert [s.step for s in board.Scalars("time/step")] == steps
    board_times = [s.value for s in board.Scalars("time/step")]
    assert board_times == pytest.approx([stored[step]["time/step"] for step in steps], rel=1e-6)
    first, second = wandb_logs(run_dir)  # one W&B run id, one offline directory per attempt
    assert first.name == second.name and wandb_exit_code(second) == 0
    before = [step for step, _ in wandb_metric([first], "reward")]
    after = [step for step, _ in wandb_metric([second], "reward")]
    assert after == list(range(after[0], steps[-1] + 1))
    # none twice; the killed worker's W&B process may not have written its last steps (or any)
    assert before == list(range(1, len(before) + 1)) and len(before) < after[0]
    first_sent = dict(mlflow_history(uri, tracked, "time.step"))  # a file store's name
    kept = [step for step in steps if first_sent[step] != pytest.approx(stored[step]["time/step"])]
    print(
        f"\nW&B steps lost with the killed worker: {list(range(len(before) + 1, after[0]))}; "
        f"re-done steps whose first attempt MLflow keeps: {kept}"
    )


def test_cancel_stops_a_running_run_within_one_step_and_resume_finishes_it(
    fast_stack: Stack,
) -> None:
    with fast_stack.client() as client:
        spec = tiny_spec(
            fast_stack, max_steps=12, save_steps=5, logging={"report_to": ["mlflow", "wandb"]}
        )
        run_id = client.post("/api/runs", json=spec).json()["id"]
        at_cancel = wait_for_step(client, run_id, 2)
        assert client.post(f"/api/runs/{run_id}/cancel").json()["is_cancel_requested"]
        cancelled = wait_for_final(client, run_id)
        assert cancelled["status"] == "cancelled"
        assert cancelled["step"] <= at_cancel["step"] + 2  # the step in flight, then the boundary
        assert tracked_run(fast_stack, run_id).info.status == "KILLED"
        (wandb_log,) = wandb_logs(fast_stack.data_dir / "runs" / run_id)
        assert wandb_exit_code(wandb_log) == 130
        resumed = client.post(f"/api/runs/{run_id}/resume").json()
        assert resumed["status"] == "queued"
        final = wait_for_final(client, run_id)
        assert final["status"] == "succeeded", final["error"]
        steps = [m["step"] for m in client.get(f"/api/runs/{run_id}/metrics").json()["items"]]
        assert steps == list(range(1, 13))
        tracked = tracked_run(fast_stack, run_id)  # the same MLflow run, reopened
        assert tracked.info.status == "FINISHED"
        history = mlflow_history(fast_stack.env["GRPO_MLFLOW_URI"], tracked, "reward")
        assert [step for step, _ in history] == steps


def test_duplicate_delivery_of_a_finished_run_changes_nothing(fast_stack: Stack) -> None:
    with fast_stack.client() as client:
        run_id = client.post("/api/runs", json=tiny_spec(fast_stack, max_steps=2)).json()["id"]
        done = wait_for_final(client, run_id)
        events_before = client.get(f"/api/runs/{run_id}/metrics").json()
        settings = Settings(
            data_dir=fast_stack.data_dir, broker_url=fast_stack.env.get("GRPO_BROKER_URL")
        )
        make_celery(settings).send_task(TRAIN_TASK, args=[run_id], queue=fast_stack.queue)
        # A healthy run queued after the duplicate proves the worker got past it.
        after = client.post("/api/runs", json=tiny_spec(fast_stack, max_steps=1)).json()["id"]
        assert wait_for_final(client, after)["status"] == "succeeded"
        assert client.get(f"/api/runs/{run_id}").json() == done
        assert client.get(f"/api/runs/{run_id}/metrics").json() == events_before


def _write_dataset(stack: Stack, name: str, records: list[dict[str, object]]) -> str:
    path = stack.data_dir / "datasets" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _write_model_without_eos(stack: Stack) -> str:
    """A real local model whose tokenizer has no end-of-sequence token."""
    from grpo.models.loading import load_policy

    model, tokenizer = load_policy(
        "builtin:tiny", cache_dir=Path(stack.data_dir / "cache"), progress=False
    )
    target = stack.data_dir / "models" / "no-eos"
    tokenizer.eos_token = None
    model.config.eos_token_id = None
    model.generation_config.eos_token_id = None
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return str(target)


def _bad_job(stack: Stack, case: str) -> tuple[dict[str, object], str]:
    """Spec overrides that make a real worker fail in `case`, and the words its error must hold."""
    match case:
        case "missing_model":
            return {"model": str(stack.data_dir / "models" / "nope")}, "nope"
        case "empty_dataset":
            return {"data": {"source": _write_dataset(stack, "empty", [])}}, "empty"
        case "tokenizer_without_eos":
            return {"model": _write_model_without_eos(stack)}, "no EOS token"
        case "reward_raises":
            records = [
                {"id": "q1", "prompt": "1+1=", "answer": "2"},
                {"id": "q2", "prompt": "2+2="},
            ]
            source = _write_dataset(stack, "no-answer", [{"answer": None, **r} for r in records])
            return (
                {"data": {"source": source}, "rewards": [{"name": "accuracy"}]},
                "reward function 'accuracy' failed at step 1 on prompt 'q2': ValueError: the "
                "reference answer is empty",
            )
        case "diverging_loss":
            # lr 1 without clipping, 4 passes per batch: the k3 KL overflows at step 1 ("has a
            # digit" gives the random model mixed groups, so the update is not skipped)
            knobs = {"learning_rate": 1.0, "max_grad_norm": None, "num_iterations": 4}
            rewards = [{"name": "regex", "pattern": r"\d"}]
            return {**knobs, "beta": 0.04, "rewards": rewards}, "training diverged: loss is"
        case _:
            # 32768 sequences x 131072 positions: a 1 TiB KV cache the allocator refuses
            knobs = {"prompts_per_step": 64, "num_generations": 512}
            return {**knobs, "max_completion_length": 131072}, (
                "out of memory on cpu at step 1 (tried to allocate 1024.1 GiB): set "
                "micro_batch_size (unset: all 32768 completions per pass; try 16384) and "
                "generation_batch_size (unset: all 32768 decoded at once; try 16384), or lower "
                "num_generations (512), prompts_per_step (64) or max_completion_length (131072)"
            )


def test_a_failed_run_ends_its_tracker_runs_failed(fast_stack: Stack) -> None:
    overrides, expected = _bad_job(fast_stack, "reward_raises")
    spec = tiny_spec(fast_stack, **overrides, logging={"report_to": ["mlflow", "wandb"]})
    with fast_stack.client() as client:
        run_id = client.post("/api/runs", json=spec).json()["id"]
        failed = wait_for_final(client, run_id)
    assert failed["status"] == "failed" and expected in failed["error"]
    assert tracked_run(fast_stack, run_id).info.status == "FAILED"
    (wandb_log,) = wandb_logs(fast_stack.data_dir / "runs" / run_id)
    assert wandb_exit_code(wandb_log) == 1


BAD_JOBS = [
    "missing_model",
    "empty_dataset",
    "tokenizer_without_eos",
    "reward_raises",
    "diverging_loss",
    "out_of_memory",
]


# The embedded store alone: a failure is written as any other end of a run, which both stores
# prove in test_a_failed_run_ends_its_tracker_runs_failed; the cases differ only in the worker.
@pytest.mark.parametrize("fast_stack", ["embedded"], indirect=True)
def test_bad_jobs_fail_with_a_clear_message_and_the_same_worker_goes_on(
    fast_stack: Stack,
) -> None:
    jobs = {case: _bad_job(fast_stack, case) for case in BAD_JOBS}
    with fast_stack.client() as client:
        submitted = {}
        for case, (overrides, _) in jobs.items():
            response = client.post("/api/runs", json=tiny_spec(fast_stack, **overrides))
            assert response.status_code == 201, (case, response.text)
            submitted[case] = response.json()["id"]
        healthy = client.post("/api/runs", json=tiny_spec(fast_stack, max_steps=1)).json()["id"]
        done = wait_for_final(client, healthy)  # queued after every bad job: the worker went on
        assert done["status"] == "succeeded", done["error"]
        for case, run_id in submitted.items():
            failed = wait_for_final(client, run_id)
            assert failed["status"] == "failed", (case, failed)
            assert jobs[case][1] in failed["error"], (case, failed["error"])
            logs = client.get(f"/api/runs/{run_id}/logs").json()["items"]
            errors = [line["message"] for line in logs if line["level"] == "error"]
            # the error once, then its cause as a traceback (worker/job.py, grpo/cause.py)
            assert errors[0] == failed["error"] and len(errors) == 2, (case, errors)
            assert errors[1].startswith("Traceback"), (case, errors[1])
            assert errors[1].splitlines()[-1].startswith(failed["cause"]["type"]), errors[1]
            assert done["worker"] == failed["worker"], case


def test_runs_this_worker_cannot_fit_stay_queued_while_it_trains_the_next(
    fast_stack: Stack,
) -> None:
    with fast_stack.client() as client:
        gpu = client.post("/api/runs", json=tiny_spec(fast_stack, device="cuda:1")).json()["id"]
        big = tiny_spec(
            fast_stack, resources={"queue": fast_stack.queue, "min_free_memory_gb": 99999}
        )
        huge = client.post("/api/runs", json=big).json()["id"]
        healthy = client.post("/api/runs", json=tiny_spec(fast_stack, max_steps=1)).json()["id"]
        done = wait_for_final(client, healthy)
        assert done["status"] == "succeeded", done["error"]
        for run_id, reason in [
            (gpu, "device cuda:1 is not on this worker, which sees no GPU"),
            (huge, "needs 99999 GiB free on cpu; this worker has"),
        ]:
            assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
            messages = [
                line["message"] for line in client.get(f"/api/runs/{run_id}/logs").json()["items"]
            ]
            assert len(messages) == 1 and reason in messages[0], messages
            assert "left this run queued" in messages[0]
        workers = client.get("/api/workers").json()["items"]
        (worker,) = [w for w in workers if w["name"] == done["worker"]]
        assert worker["device"] == "cpu" and worker["free_memory_mb"] > 0
        for run_id in (gpu, huge):
            assert client.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"


def test_a_run_too_big_for_one_worker_reaches_the_worker_that_fits_it(fast_stack: Stack) -> None:
    queue = f"ranks-{uuid.uuid4().hex[:6]}"
    started = [fast_stack.start_worker("one-slot", queue=queue, devices="1")]
    try:
        with fast_stack.client() as client:
            two_ranks = {"queue": queue, "num_processes": 2}
            spec = tiny_spec(fast_stack, max_steps=1, resources=two_ranks)
            run_id = client.post("/api/runs", json=spec).json()["id"]
            deadline = time.monotonic() + 120
            while not client.get(f"/api/runs/{run_id}/logs").json()["items"]:
                assert time.monotonic() < deadline, "the one-slot worker never saw the run"
                time.sleep(0.5)
            (declined,) = client.get(f"/api/runs/{run_id}/logs").json()["items"]
            assert (
                "resources.num_processes is 2 but this worker holds 1 CPU slot"
                in (declined["message"])
            )
            # the small worker keeps sending the run back; the one that fits must get it
            started.append(fast_stack.start_worker("two-slots", queue=queue, devices="2"))
            deadline = time.monotonic() + 120
            while not (run := client.get(f"/api/runs/{run_id}").json())["worker"]:
                assert time.monotonic() < deadline, "no worker claimed the run"
                time.sleep(0.5)
            assert run["worker"].startswith("two-slots-")
            client.post(f"/api/runs/{run_id}/cancel")
    finally:
        for worker in started:
            worker.terminate()
            worker.wait(timeout=30)


@pytest.mark.parametrize("fast_stack", ["embedded"], indirect=True)
def test_an_async_run_killed_with_batches_queued_trains_every_prompt_of_its_epoch_once(
    fast_stack: Stack, step_gate: str
) -> None:
    """Asynchronous GRPO (issue 41 item 4) on a dataset of exactly one epoch: a trainer four
    updates a step (num_iterations) behind a producer that may run three steps ahead
    (max_staleness 2). Its worker is SIGKILLed once a taken batch left others queued; the
    run resumes from its checkpoint on another worker, and in the end every step is stored
    once and every prompt of the epoch trained exactly once: the queued batches died with
    the worker and their steps were sampled again from the same prompts (what a step
    samples depends only on the seed and the step). The producer's reward for step 13 is
    held until the kill, so the run cannot end before it, however fast the machine."""
    steps, per_step, held = 16, 2, 13
    prompts = [f"{i}+{i % 7}=" for i in range(steps * per_step)]
    records = [{"prompt": p, "answer": str(i + i % 7)} for i, p in enumerate(prompts)]
    source = _write_dataset(fast_stack, "one-epoch", records)
    reward, path = gated_reward(step_gate, "async-killed", held_step=held)
    spec = tiny_spec(
        fast_stack, name="async-killed", data={"source": source}, max_steps=steps,
        prompts_per_step=per_step, save_steps=2, max_completion_length=12,
        async_generation=True, max_staleness=2, num_iterations=4, rewards=[reward],
        reward_preflight_records=0,
    )  # fmt: skip
    with fast_stack.client() as client:
        run_id = client.post("/api/runs", json=spec).json()["id"]

        def queued_behind() -> bool:  # a stored step whose batch left another in the queue
            items = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
            return any(m["metrics"].get("async/queue_depth", 0) >= 1 for m in items)

        def is_stalled() -> bool:  # every step before the held one trained: nothing left
            return gate(path, "reached").is_set() and step_of(client, run_id) >= held - 1

        deadline = time.monotonic() + 300
        while not queued_behind() and not is_stalled() and time.monotonic() < deadline:
            time.sleep(0.1)
        before = client.get(f"/api/runs/{run_id}").json()
        assert before["status"] == "running" and before["step"] < steps, before
        # the worker that holds it (an earlier test of the module may have replaced the first)
        (name,) = [n for n in fast_stack.processes if before["worker"].startswith(f"{n}-")]
        kill_worker(fast_stack, name)
        gate(path, "opened").set()
        fast_stack.start_worker(name)  # another worker process under the same name
        final = wait_for_final(client, run_id)
        assert final["status"] == "succeeded", f"{final['error']}\n{fast_stack.logs()}"
        assert final["attempts"] == 2
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        assert [m["step"] for m in metrics] == list(range(1, steps + 1))
        assert all(m["metrics"]["async/dropped_stale"] == 0 for m in metrics)
        assert max(m["metrics"]["async/staleness_max"] for m in metrics) <= 2
        trained = []
        for step in range(1, steps + 1):
            groups = client.get(f"/api/runs/{run_id}/steps/{step}/groups").json()["items"]
            trained += [g["prompt"] for g in groups if not g["is_dropped"]]
        assert sorted(trained) == sorted(prompts)  # each prompt of the epoch, once
        logs = [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
        assert any("resumed from checkpoint at step" in m for m in logs), logs
        print(f"\nkilled at step {before['step']} of {steps}, batches queued behind it")
