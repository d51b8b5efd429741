"""The settings reference: every GRPO_* variable of app.settings.Settings with its type,
default and docstring, read from the settings' JSON schema."""

from __future__ import annotations

from app.settings import Settings
from tools.reference.markdown import (
    GENERATED,
    code,
    constraint_text,
    default_text,
    first_line,
    table,
    type_text,
)

HEADER = ("Variable", "Field", "Type", "Default", "Constraint", "Description")
INTRO = """\
Every URL, path, limit and secret of the service is one `Settings` field, read from the
environment variable `{prefix}` + its name in capitals (case does not matter), and read
nowhere else. Unset, the service is the embedded default: SQLite (WAL) and Celery over
kombu's filesystem transport, both under `GRPO_DATA_DIR`. A `null` default is worked out at
start, as its description says.

Not settings, but read by the worker: the variables an `http` reward's `token_env` names
(any `GRPO_REWARD_TOKEN_*`, or one listed in `GRPO_REWARD_TOKEN_ENVS`), and `GRPO_CACHE_DIR`
is also read by `grpo train` and `grpo eval`, which run without the server."""


def page() -> str:
    schema = Settings.model_json_schema()
    prefix = str(Settings.model_config.get("env_prefix", ""))
    rows = []
    for name, prop in schema["properties"].items():
        env = f"{prefix}{name}".upper()
        rows.append((
            f'<a id="{env.lower()}"></a>{code(env)}',
            code(name),
            type_text(prop, code),
            default_text(prop, required=name in schema.get("required", [])),
            constraint_text(prop),
            str(prop.get("description", "")),
        ))  # fmt: skip
    return "\n\n".join([
        "# Settings",
        GENERATED.format(what="`app.settings.Settings`"),
        first_line(Settings.__doc__) or "",
        INTRO.format(prefix=prefix),
        table(HEADER, rows, raw=1),
    ]) + "\n"  # fmt: skip
