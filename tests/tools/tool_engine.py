"""A scripted Engine for the tool-loop tests (not a test module): each completion is what
`reply(context_text)` says for its row's context, then EOS, cut at max_new_tokens; it
records every request. With `with_logps` its sampling log-prob of the j-th token of every
completion is -(j + 1) / 10 (as vLLM gives them), else it gives none (as native). It
implements the Engine protocol as any engine does."""

from collections.abc import Callable

import torch

from grpo.engines.engine import GenerationRequest
from grpo.rollout.rollout import Rollout


class ScriptedEngine:
    name = "scripted"

    def __init__(self, tokenizer, reply: Callable[[str], str], *, with_logps=False) -> None:
        self.tokenizer, self.reply, self.requests = tokenizer, reply, []
        self.with_logps = with_logps

    def generate(self, request: GenerationRequest) -> Rollout:
        self.requests.append(request)
        rows = []
        for ids, mask in zip(request.prompt_ids, request.prompt_mask, strict=True):
            context = self.tokenizer.decode(ids[mask.bool()].tolist())
            text = self.reply(context)
            tokens = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            rows.append((tokens + [self.tokenizer.eos_token_id])[: request.max_new_tokens])
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        ended = torch.tensor([r[-1] == self.tokenizer.eos_token_id for r in rows])
        logps = -(torch.arange(width) + 1.0)[None, :] / 10 * mask if self.with_logps else None
        return Rollout(
            request.prompt_ids, request.prompt_mask, ids, mask, ~ended, mask * 0.5,
            sampling_logps=logps,
        )  # fmt: skip

    def load_weights(self, model) -> None:
        pass

    def close(self) -> None:
        pass
