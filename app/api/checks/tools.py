"""Checks on a spec's tool entries that need this server's settings and environment: each
entry's kind (grpo/tools/registry.py) says what this server refuses (an endpoint host
outside GRPO_TOOL_HOSTS / GRPO_REWARD_HOSTS, a token variable the token rule forbids, a
function neither installed nor in a plugin folder, an environment not installed, no
bubblewrap for `code`). A built-in model whose chat template cannot render tools is refused
here too; for other models the API cannot see the
tokenizer, and the worker refuses at the start of the run. Each refusal is a 422 naming
the field, every refusal listed. Runs nothing it checks.
"""

from __future__ import annotations

from app.api.checks.refusal import Problem, problem, refuse
from app.settings import Settings
from grpo.spec import JobSpec
from grpo.spec.tools import TOOL_MODELS
from grpo.tools.kind import ToolServerFacts
from grpo.tools.registry import tool_kind_of


def check_tools(spec: JobSpec, settings: Settings) -> None:
    """Raise a 422 naming `tools.<i>.<field>` (or `tools`) for each refusal."""
    refuse(tool_problems(spec, settings))


def tool_problems(spec: JobSpec, settings: Settings) -> list[Problem]:
    found: list[Problem] = []
    if not spec.tools:
        return found
    if spec.model.startswith("builtin:") and spec.model not in TOOL_MODELS:
        why = (
            f"{spec.model}'s chat template cannot render tools; use one of {TOOL_MODELS} "
            "or a model whose chat template takes `tools`"
        )
        found.append(problem("tools", why))
    server = ToolServerFacts(
        tool_hosts=tuple(settings.tool_host_list),
        token_envs=tuple(settings.reward_token_env_list),
        plugin_dirs=tuple(settings.plugin_dir_list),
    )
    for i, entry in enumerate(spec.tools):
        refusal = tool_kind_of(entry).check(entry, server)
        if refusal is not None:
            loc = f"tools.{i}.{refusal.field}" if refusal.field else f"tools.{i}"
            found.append(problem(loc, refusal.message))
    return found
