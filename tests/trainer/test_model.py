"""The tiny GPT: sampling log-probs equal the training forward's; left padding changes nothing."""

from __future__ import annotations

import torch

from snooze.trainer.model import ModelConfig, TinyGPT, completion_logprobs, greedy, sample
from snooze.trainer.tokenizer import EOS, CharTokenizer


def _model() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=2, d_model=32, n_head=2))


def test_sampled_logprobs_match_the_training_forward() -> None:
    model, tok = _model(), CharTokenizer()
    ids, mask = (torch.from_numpy(x) for x in tok.encode_prompts(["12+7=", ">abcdef=", "#a:ab="]))
    out = sample(model, ids, mask, 4, 8, 0.7, torch.Generator().manual_seed(1))
    assert out.tokens.shape[0] == 12 and out.prompt_ids.shape[0] == 12
    lp = completion_logprobs(model, out.prompt_ids, out.prompt_mask, out.tokens, out.mask, 0.7)
    assert torch.allclose(lp, out.logprobs, atol=1e-5)
    grouped = completion_logprobs(model, out.prompt_ids, out.prompt_mask, out.tokens, out.mask, 0.7, group_size=4)
    assert torch.allclose(grouped, lp, atol=1e-5)
    assert (out.logprobs[~out.mask] == 0).all() and (out.logprobs[out.mask] < 0).all()
    ended = (out.tokens == EOS) & out.mask
    assert (ended.sum(dim=1) <= 1).all()  # nothing sampled after an EOS


def test_left_padding_does_not_change_a_prompt_s_completion() -> None:
    model, tok = _model(), CharTokenizer()
    alone = greedy(model, *(torch.from_numpy(x) for x in tok.encode_prompts(["#a:ab="])), 6)
    padded = greedy(model, *(torch.from_numpy(x) for x in tok.encode_prompts(["#a:ab=", ">abcdefghi="])), 6)
    assert torch.equal(alone[0], padded[0, : alone.shape[1]])


def test_parameter_count_of_the_default_shape() -> None:
    n = sum(p.numel() for p in TinyGPT(ModelConfig()).parameters())
    assert 350_000 < n < 500_000


def test_grouped_training_forward_has_the_same_gradients() -> None:
    """Running each prompt once for its group (``group_size``) changes the work, not the gradient."""
    model, tok = _model(), CharTokenizer()
    ids, mask = (torch.from_numpy(x) for x in tok.encode_prompts(["12+7=", ">abcdef="]))
    out = sample(model, ids, mask, 3, 8, 1.0, torch.Generator().manual_seed(2))
    grads = []
    for g in (1, 3):
        model.zero_grad()
        completion_logprobs(
            model, out.prompt_ids, out.prompt_mask, out.tokens, out.mask, 1.0, group_size=g
        ).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert torch.allclose(grads[0], grads[1], atol=1e-5) and grads[0].abs().sum() > 0
