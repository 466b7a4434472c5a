"""Dr.GRPO pieces: group-mean advantages, the constant divisor, the clip, padded log-probs."""
import torch

from tests.conftest import make_tiny_llama
from vgrout import grpo, logprob
from vgrout.rollout import pack


def test_advantages_are_group_centred_without_std_division():
    r = torch.tensor([3.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 3.0])
    a = grpo.advantages(r, group_size=4)
    assert torch.allclose(a.view(2, 4).sum(1), torch.zeros(2))
    assert torch.allclose(a[:4], torch.tensor([2.25, -0.75, -0.75, -0.75]))
    # scaling rewards scales advantages: no std normalisation
    assert torch.allclose(grpo.advantages(10 * r, 4), 10 * a)


def test_logprobs_of_left_padded_rows_match_unpadded():
    model = make_tiny_llama()
    g = torch.Generator().manual_seed(0)
    p1, c1 = torch.randint(0, 97, (3,), generator=g).tolist(), torch.randint(0, 97, (5,), generator=g).tolist()
    p2, c2 = torch.randint(0, 97, (9,), generator=g).tolist(), torch.randint(0, 97, (2,), generator=g).tolist()
    batch = pack([p1, p2], [c1, c2], pad_id=0)
    with torch.no_grad():
        logp, mask = logprob.reference_token_logprobs(model, batch)
        for i, (p, c) in enumerate([(p1, c1), (p2, c2)]):
            alone, m1 = logprob.reference_token_logprobs(model, pack([p], [c], pad_id=0))
            got = logp[i][mask[i] > 0]
            assert got.shape[0] == len(c)
            assert torch.allclose(got, alone[0][m1[0] > 0], atol=1e-5)


def test_clip_stops_gradient_past_the_trust_region():
    logp_old = torch.zeros(1, 3)
    mask = torch.ones(1, 3)
    logp = torch.tensor([[0.5, 0.0, -0.5]], requires_grad=True)  # rho = e^.5, 1, e^-.5
    obj, rho = grpo.clipped_surrogate(logp, logp_old, torch.tensor([1.0]), mask, eps=0.2)
    obj.sum().backward()
    assert logp.grad[0, 0] == 0  # A>0 and rho > 1+eps: clipped
    assert logp.grad[0, 1] > 0 and logp.grad[0, 2] > 0
    assert torch.allclose(rho, torch.exp(logp.detach()))


def test_loss_divisor_is_constant_not_per_sequence_length():
    # one token with objective 1 counts the same in a short and in a long completion
    short = torch.tensor([[1.0, 0.0]])
    long = torch.tensor([[1.0] + [0.0] * 9])
    assert grpo.dr_grpo_loss(short, 1, 16) == grpo.dr_grpo_loss(long, 1, 16) == -1 / 16
