"""The GRPO math, pure functions on tensors: group-relative advantages, the clipped objective
and its aggregations, the adaptive KL coefficient, the importance correction. Knows nothing of
models, engines or ranks."""
