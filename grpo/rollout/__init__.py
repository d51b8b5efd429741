"""Where each step's scored groups come from: the Rollout type and the native decode loop,
next-token sampling, stop strings, rounds of sampling and scoring, dynamic sampling, and the
synchronous and asynchronous sources the trainer takes its groups from."""
