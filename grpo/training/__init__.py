"""The training loop: the trainer, the policy update and the step-wide inputs of its loss,
per-token log-probs, the reference policy, the optimizer and its schedule."""
