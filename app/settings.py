"""Settings: every URL, path and secret of the service, read from GRPO_* variables.

With nothing set, the embedded default: SQLite (WAL) and Celery over kombu's filesystem
transport, both under the data directory. Read through get_settings(); nothing else reads
the environment.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.identity import Identity, parse_api_tokens
from grpo.spec.endpoints import host_entries
from grpo.spec.vllm import DEFAULT_VLLM_SERVER_HOSTS


class Settings(BaseSettings):
    """The service's configuration: one field per GRPO_* environment variable."""

    # attribute docstrings: the docs' settings reference is written from them; a bad value
    # is named, never echoed (tokens, URLs with passwords)
    model_config = SettingsConfigDict(
        env_prefix="GRPO_",
        extra="ignore",
        use_attribute_docstrings=True,
        hide_input_in_errors=True,
    )

    data_dir: Path = Path("data")
    """Runs' files, checkpoints, uploaded datasets, and the embedded database and broker."""
    database_url: str | None = None
    """SQLAlchemy URL, e.g. `postgresql+psycopg://user@host/db`; default
    `sqlite:///<data_dir>/grpo.db` (WAL)."""
    broker_url: str | None = None
    """Celery broker, e.g. `redis://host:6379/0`; default `filesystem://` under
    `<data_dir>/broker`."""
    cache_dir: Path | None = None
    """Built-in models (the warm-started one is made here once) and other caches; default
    `~/.cache/grpo`."""
    api_processes: int | None = Field(None, ge=1)
    """API server processes `grpo up` starts; default one per 2 CPUs, 1 to 4 (streams and
    reloads are cheap; the CPUs are the worker's training)."""
    host: str = "127.0.0.1"
    """Interface the server binds to; loopback unless told otherwise."""
    allowed_hosts: str = ""
    """Comma-separated extra names the server answers to in the Host header (besides its
    bind address and loopback names); `*` for any. Bound to 0.0.0.0 with none listed: any."""
    allowed_origins: str = ""
    """Comma-separated origins (`https://lab.example.org`) whose pages may call the API;
    same-origin requests are always allowed, any other Origin is refused."""
    port: int = 8000
    """Port the server listens on (`grpo up`)."""
    api_tokens: str = ""
    """Comma-separated bearer tokens, each `name:role:token` (role `admin`, `member` or
    `viewer`) or a bare token (an admin); when set, every write needs one (app/identity.py)."""
    read_requires_token: bool = False
    """When tokens are set, also require one for reads."""
    url: str | None = None
    """Server the CLI's client commands talk to; default http://<host>:<port>."""
    token: str | None = None
    """Bearer token the CLI's client commands send."""
    default_queue: str = "default"
    """Queue a worker listens on when none is given."""
    worker_devices: str | None = None
    """Devices a worker holds when `grpo worker` gets no `--devices`: GPU indices
    (`0,1,2,3`), or without CUDA a number of CPU slots; default all GPUs, else one slot per CPU."""
    worker_address: str | None = Field(None, pattern=r"^[A-Za-z0-9.:\-\[\]%]{1,253}$")
    """The address (IP or host name) by which the other machines of a run on several
    (`resources.num_nodes` > 1) reach this worker's machine: node 0's worker serves the
    run's rendezvous on it (a free port), and every node's ranks exchange tensors over the
    network interface that holds it. Unset: this worker takes no part in runs of several
    machines (it leaves them queued for workers that have one); runs on one machine need
    none. A generation worker's vLLM servers listen on it (unless `--serve-host` says
    otherwise; unset: 127.0.0.1), so training workers on other machines reach them."""
    gang_formation_seconds: float = Field(120.0, gt=0)
    """How long a worker holding a node of a run on several machines waits for the other
    nodes to be claimed before it releases its node and sends the run back to its queue,
    and how long the nodes' launchers wait for each other at the rendezvous once the gang
    formed (a node lost then is seen sooner, by its claim's heartbeat)."""
    gang_storage_seconds: float = Field(60.0, gt=0)
    """How long a node of a run on several machines waits to see another node's marker in
    the run's directory before it fails the run for not sharing GRPO_DATA_DIR
    (worker/shared_storage.py): a network filesystem may take its attribute cache's time
    (NFS: up to 60 s) to show another machine's new file."""
    check_hub_models: bool = True
    """Refuse at submit a Hugging Face model id that is neither in this machine's Hugging
    Face cache nor answered for by the hub within seconds (grpo/spec/hub.py), instead of
    the worker failing after its download retries. Set false when the workers run on other
    machines with their own caches and the API's machine cannot reach the hub."""
    model_roots: str = ""
    """Comma-separated directories that local model paths (and local JSONL files) in a
    spec may point into; relative paths in a spec resolve against the data directory."""
    reward_hosts: str = ""
    """Comma-separated `host[:port]`s that `http` rewards and `judge` rewards may call
    (checked at submit and on the worker); a bare host allows all its ports. Empty: no
    reward endpoint is allowed."""
    tool_hosts: str | None = None
    """Comma-separated `host[:port]`s that `http` tools may call (checked at submit and on
    the worker); unset: the reward hosts (GRPO_REWARD_HOSTS)."""
    vllm_server_hosts: str = ",".join(DEFAULT_VLLM_SERVER_HOSTS)
    """Comma-separated `host[:port]`s that a `vllm_mode: server` run's vLLM server
    (vllm_server_base_url, or vllm_server_host:vllm_server_port) may be at, matched as
    GRPO_REWARD_HOSTS (checked at submit and on the worker, which sends the server requests
    and the run's weights). Default: this machine only; empty: no server mode."""
    reward_token_envs: str = ""
    """Comma-separated worker environment variables that a spec's `token_env` may name,
    besides those starting GRPO_REWARD_TOKEN_ (always allowed); never any other GRPO_*
    variable, listed or not (grpo/spec/token_env.py)."""
    plugin_dirs: str | None = None
    """Folders (separated by `:`, os.pathsep) of plain Python files whose public top-level
    functions `python` rewards and tools may name, by the function's own name, as they name
    installed entry points (grpo/spec/plugins.py); API and workers must see the same files.
    Unset: `<data_dir>/plugins`, where `grpo plugins add` copies files. The workers import a
    file when a run starts, so a new or changed file counts from the next run, no restart."""
    mlflow_uri: str | None = None
    """MLflow tracking URI that runs with `logging.report_to: [mlflow]` log to (a server, or
    `sqlite:////abs/mlflow.db` offline); default a SQLite store in each run's directory."""
    header_timeout_seconds: float = Field(10.0, gt=0)
    """How long a connection may take to send a request's headers (from its opening, or
    from its previous response) before the server closes it (app/server.py)."""
    body_timeout_seconds: float = Field(30.0, gt=0)
    """How long the server waits for a request's body beyond what its bytes earn at
    GRPO_BODY_MIN_BYTES_PER_SECOND, and the longest it waits for any one chunk of it; past
    either, the answer is 408 and the connection is closed (app/api/limits.py). A body that
    keeps up that rate (a large dataset over a slow link) is never cut."""
    body_min_bytes_per_second: int = Field(10_000, gt=0)
    """The slowest a request body may arrive once GRPO_BODY_TIMEOUT_SECONDS is spent: each
    byte received gives the body 1/this seconds more."""
    max_body_bytes: int = 1_000_000
    """Largest request body accepted (datasets have their own limit)."""
    max_dataset_bytes: int = 64_000_000
    """Largest JSONL dataset upload."""
    max_dataset_lines: int = 500_000
    """Most records in one uploaded dataset."""
    max_dataset_columns: int = Field(1_000, ge=1)
    """Most columns in one uploaded dataset: a parquet file's leaf columns (each field of a
    struct counts), or the distinct top-level fields of a JSONL dataset's records."""
    max_dataset_nesting: int = Field(16, ge=2)
    """Deepest a dataset field's value may nest lists and objects (structs, maps) one inside
    another: text and numbers are 0, a chat prompt (a list of message objects) is 2."""
    max_dataset_record_bytes: int = Field(1_000_000, ge=1_000)
    """Largest record: a JSONL line's bytes, or what a parquet row decodes to (its text and
    binary values' bytes, fixed-width values' widths, and 8 bytes a value), counted before
    the row is expanded. Past it the upload is a 413 naming the line or row."""
    max_dataset_decoded_bytes: int = Field(512_000_000, ge=1_000_000)
    """Most a parquet upload may decode to, all rows together, counted as for
    GRPO_MAX_DATASET_RECORD_BYTES: a small file whose dictionary-encoded column repeats a
    large value over many rows is refused (413) here, whatever its size on disk."""
    max_dataset_column_chunk_bytes: int = Field(64_000_000, ge=1_000_000)
    """Largest decompressed size of one parquet column chunk (one column of one row group),
    read from the file's footer before anything is decoded (413); write a larger file in
    smaller row groups."""
    max_dataset_parquet_footer_bytes: int = Field(4_000_000, ge=10_000)
    """Largest parquet footer (the schema and every column chunk's metadata), checked
    from the file's last bytes before it is parsed (413): parsing takes about 15 times its
    size in memory."""
    stream_poll_seconds: float = Field(0.5, gt=0)
    """How often a live stream re-reads the database when nothing wakes it."""
    stream_queue_events: int = Field(256, ge=1)
    """Most events a live stream's client may lag behind before the server closes it (the
    client resumes with Last-Event-ID; other streams never wait for it)."""
    heartbeat_seconds: float = Field(5.0, gt=0)
    """How often a running job refreshes its heartbeat."""
    stale_after_seconds: float = Field(60.0, gt=0)
    """A running run whose heartbeat is older than this has lost its worker."""
    max_retries: int = Field(3, ge=0)
    """Requeues of a run whose worker died before it is marked failed."""
    decline_pause_seconds: float = Field(5.0, ge=0)
    """How long a worker holds a run it cannot fit before sending it back to its queue."""
    preload_runs: bool = True
    """Fork each run's processes from a server that has the run's code imported (torch,
    transformers, the trainer: ~5 s of CPU a run saved; the worker forks it from itself as
    it starts, worker/fork_server.py), while the worker's imports are unchanged on disk
    (worker/preload.py); off: no server, and each run's processes are spawned and import
    it afresh."""
    stop_grace_seconds: float = Field(20.0, gt=0)
    """How long a stopping worker waits for its job's next step boundary (to checkpoint and
    hand the run back) before it hands the run back without it and exits."""
    db_outage_wait_seconds: float = Field(120.0, ge=0)
    """How long a running job waits for a database it cannot reach (connection refused or
    lost, the server restarting): its writes (steps, log lines, heartbeats, lease checks,
    checkpoint rows) are tried again with backoff and the run goes on, no retry spent, with
    one log line saying how long it waited. Past this the run stops without the step in
    flight and, once the database answers, is handed back to the queue as a stopping
    worker's run is; it resumes from its last checkpoint, or from step 0 if it saved none
    (the hand-back's log line says which). Workers that saw an outage hold
    their stale-run sweep for GRPO_STALE_AFTER_SECONDS after it, so a run is not requeued
    for a heartbeat the outage stopped."""
    redispatch_after_seconds: float = Field(300.0, gt=0)
    """A queued run nobody claimed this long after its task was sent is sent again (a send
    that failed is sent again at the next sweep)."""

    @field_validator("api_tokens")
    @classmethod
    def _check_api_tokens(cls, value: str) -> str:
        parse_api_tokens(value)
        return value

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir.resolve() / 'grpo.db'}"

    @property
    def resolved_api_processes(self) -> int:
        return self.api_processes or max(1, min(4, (os.cpu_count() or 1) // 2))

    @property
    def server_url(self) -> str:
        return self.url or f"http://{self.host}:{self.port}"

    @property
    def resolved_broker_url(self) -> str:
        return self.broker_url or "filesystem://"

    @property
    def is_filesystem_broker(self) -> bool:
        return self.resolved_broker_url.startswith("filesystem://")

    @property
    def broker_dir(self) -> Path:
        return self.data_dir.resolve() / "broker"

    @property
    def runs_dir(self) -> Path:
        return self.data_dir.resolve() / "runs"

    @property
    def datasets_dir(self) -> Path:
        return self.data_dir.resolve() / "datasets"

    @property
    def resolved_cache_dir(self) -> Path:
        return self.cache_dir or Path.home() / ".cache" / "grpo"

    @property
    def token_identities(self) -> list[tuple[str, Identity]]:
        return parse_api_tokens(self.api_tokens)

    @property
    def reward_host_list(self) -> list[str]:
        return host_entries(self.reward_hosts)

    @property
    def tool_host_list(self) -> list[str]:
        if self.tool_hosts is None:
            return self.reward_host_list
        return host_entries(self.tool_hosts)

    @property
    def vllm_server_host_list(self) -> list[str]:
        return host_entries(self.vllm_server_hosts)

    @property
    def reward_token_env_list(self) -> list[str]:
        return [n.strip() for n in self.reward_token_envs.split(",") if n.strip()]

    @property
    def plugin_dir_list(self) -> list[Path]:
        """GRPO_PLUGIN_DIRS' folders, resolved; unset: `<data_dir>/plugins`."""
        if self.plugin_dirs is None:
            return [self.data_dir.resolve() / "plugins"]
        return [Path(p.strip()).resolve() for p in self.plugin_dirs.split(os.pathsep) if p.strip()]

    @property
    def model_root_list(self) -> list[Path]:
        return [Path(p.strip()).resolve() for p in self.model_roots.split(",") if p.strip()]

    @property
    def data_root_list(self) -> list[Path]:
        """Where a local JSONL `data.source` may be: uploaded datasets and the model roots."""
        return [self.datasets_dir, *self.model_root_list]

    @property
    def local_path_base(self) -> Path:
        """What a relative local path in a spec is relative to: the data directory."""
        return self.data_dir.resolve()


@lru_cache
def get_settings() -> Settings:
    return Settings()
