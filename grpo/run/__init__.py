"""A run wired the same way from every door (`grpo train`, `from grpo import train, Trainer`,
the service's worker): grpo/run/run.py. Empty, so that grpo.run.sink loads no torch."""
