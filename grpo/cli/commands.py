"""Every command of `grpo`, in one table: its name, the module that runs it, and the one
line `grpo --help` shows for it.

`train` and `eval` run the library in this process (grpo/cli/main.py); the others are the
service's, handed to app.cli (the server and its client) or worker.cli in a fresh process.
Both parsers take their summaries from here, so `grpo --help` lists every command.
Standard library only: app/ reads it too.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    name: str
    module: str
    """`grpo.cli` (this process), `app.cli` or `worker.cli` (a fresh process)."""
    summary: str


COMMANDS: tuple[Command, ...] = (
    Command("train", "grpo.cli", "train from a spec YAML in this terminal, no server"),
    Command("eval", "grpo.cli", "greedy accuracy of a model or checkpoint on a task's test split"),
    Command("convert", "grpo.cli", "turn a TRL GRPOConfig YAML into a JobSpec YAML"),
    Command("vllm-serve", "grpo.cli", "start a vLLM server for vllm_mode server runs"),
    Command("up", "app.cli", "start API, dashboard and one worker (data in ./data)"),
    Command("worker", "worker.cli", "start a worker that trains queued runs"),
    Command("migrate", "app.cli", "bring the database schema up to date"),
    Command("submit", "app.cli", "submit a spec (YAML or JSON) to the server; -f follows it"),
    Command("runs", "app.cli", "list runs with their status, step and reward"),
    Command("logs", "app.cli", "print a run's log lines"),
    Command("cancel", "app.cli", "cancel a run (a running one stops at the next step)"),
    Command("resume", "app.cli", "continue a cancelled or failed run: last checkpoint, or step 0"),
    Command("clone", "app.cli", "start a new run with a run's spec, changed by --set field=value"),
    Command("datasets", "app.cli", "upload a JSONL file of prompts, or list uploaded datasets"),
    Command("plugins", "app.cli", "add a Python file of reward/tool functions, or list them"),
    Command("rewards", "app.cli", "test a spec's rewards on samples, or probe them for holes"),
    Command("rescore", "app.cli", "replay a run's stored completions under other rewards"),
    Command("doctor", "app.cli", "what is going wrong with a run, the evidence, what to change"),
    Command("export", "app.cli", "download a run's checkpoint model into a directory"),
)

SUMMARIES = {c.name: c.summary for c in COMMANDS}
SERVICE_COMMANDS = {c.name: c.module for c in COMMANDS if c.module != "grpo.cli"}
"""Commands run in a fresh process: name -> module."""
