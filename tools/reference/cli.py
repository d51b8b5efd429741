"""The CLI reference: every `grpo` command's help, printed by its own argparse parser
(grpo/cli/main.py for train and eval, app/cli.py for the service commands, worker/cli.py
for `grpo worker`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator

from app.cli import build_parser as service_parser
from grpo.cli.commands import SERVICE_COMMANDS, SUMMARIES
from grpo.cli.main import build_parser as library_parser
from tools.reference.markdown import GENERATED
from worker.cli import build_parser as worker_parser

COLUMNS = "100"  # argparse wraps help to the terminal; the page must not depend on one
INTRO = """\
`grpo train` and `grpo eval` run the library in this terminal, with no server. The other
commands are the service's: `grpo up` and `grpo worker` start it, and the client commands
(`submit`, `runs`, `logs`, `cancel`, `resume`, `clone`, `datasets`, `doctor`, `export`) talk
to a running server at `GRPO_URL` with the bearer token `GRPO_TOKEN` (or `--url`,
`--token`). Every command and its one-line summary are in one table, grpo/cli/commands.py.
`python -m grpo.cli` is the same command."""


def page() -> str:
    parts = ["# CLI", GENERATED.format(what="the `grpo` command's argparse parsers"), INTRO]
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        parts.append(help_block(library_parser()))
        here = [c for c in subcommands(library_parser()) if c[0] not in SERVICE_COMMANDS]
        commands = [*here, *with_actions(subcommands(service_parser()))]
        commands.append(("worker", SUMMARIES["worker"], worker_parser()))
        parts += [section(name, summary, parser) for name, summary, parser in commands]
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous
    return "\n\n".join(parts) + "\n"


def subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, summaries.get(name, ""), sub


def with_actions(
    commands: Iterator[tuple[str, str, argparse.ArgumentParser]],
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """Each command, then its own subcommands (`datasets upload`) as commands of their own."""
    for name, summary, parser in commands:
        yield name, summary, parser
        for action, action_summary, sub in subcommands(parser):
            yield f"{name} {action}", action_summary, sub


def section(name: str, summary: str, parser: argparse.ArgumentParser) -> str:
    summary = summary or (parser.description or "").split("\n")[0]
    return "\n\n".join(p for p in (f"## `grpo {name}`", summary, help_block(parser)) if p)


def help_block(parser: argparse.ArgumentParser) -> str:
    return f"```text\n{parser.format_help().rstrip()}\n```"
