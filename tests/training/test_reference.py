"""Reference updates (grpo/training/reference.py): TR-DPO's soft mix and the plain copy, by hand."""

import torch

from grpo.training.reference import ReferencePolicy, mix_weights


def test_mix_moves_each_float_weight_alpha_of_the_way_and_copies_integer_buffers():
    ref = {"w": torch.tensor([0.0, 10.0]), "steps": torch.tensor([1])}
    policy = {"w": torch.tensor([1.0, 20.0]), "steps": torch.tensor([7])}
    mix_weights(ref, policy, 0.6)  # 0.6 * policy + 0.4 * ref
    torch.testing.assert_close(ref["w"], torch.tensor([0.6, 16.0]))
    assert ref["steps"].item() == 7


def test_reference_sync_with_alpha_mixes_and_with_one_copies():
    policy = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        policy.weight.copy_(torch.tensor([[0.0, 4.0]]))
    reference = ReferencePolicy(policy)
    with torch.no_grad():
        policy.weight.copy_(torch.tensor([[2.0, 0.0]]))
    reference.sync(policy, 0.25)  # 0.25 * [2, 0] + 0.75 * [0, 4]
    torch.testing.assert_close(reference.frozen.weight, torch.tensor([[0.5, 3.0]]))
    reference.sync(policy)
    torch.testing.assert_close(reference.frozen.weight, torch.tensor([[2.0, 0.0]]))
    assert not reference.frozen.weight.requires_grad
