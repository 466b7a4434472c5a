"""Dr.GRPO pieces: group-mean advantages, the constant divisor, the clip, padded log-probs."""
import math

import pytest
import torch

from tests.conftest import make_tiny_llama
from vgrout.engine import logprob
from vgrout.engine.rollout import pack
from vgrout.train import grpo


def test_advantages_are_group_centred_without_std_division():
    r = torch.tensor([3.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 3.0])
    a = grpo.advantages(r, group_size=4)
    assert torch.allclose(a.view(2, 4).sum(1), torch.zeros(2))
    assert torch.allclose(a[:4], torch.tensor([2.25, -0.75, -0.75, -0.75]))
    # scaling rewards scales advantages: no std normalisation
    assert torch.allclose(grpo.advantages(10 * r, 4), 10 * a)


def test_a_students_baseline_centres_the_student_rows_and_measures_the_teacher_rows_against_them():
    """train.baseline students: each group's baseline is the mean of its student rows, so the
    teacher rows' rewards do not enter the students' advantages."""
    r = torch.tensor([0.5, 3.5, 3.5, 3.0, 0.0, 0.5, 3.5, 3.5])
    students = torch.tensor([True, True, False, False] * 2)
    a = grpo.advantages(r, 4, students)
    assert torch.allclose(a, torch.tensor([-1.5, 1.5, 1.5, 1.0, -0.25, 0.25, 3.25, 3.25]))
    assert torch.allclose(a[students].view(2, 2).sum(1), torch.zeros(2))
    # raising a teacher row's reward changes only that row's advantage
    r2 = r.clone()
    r2[2] += 1
    assert torch.equal(grpo.advantages(r2, 4, students) != a, torch.arange(8) == 2)
    # every row: the group mean, as without a mask
    assert torch.equal(grpo.advantages(r, 4, torch.ones(8, dtype=torch.bool)), grpo.advantages(r, 4))
    with pytest.raises(ValueError, match="no baseline row"):
        grpo.advantages(r, 4, torch.tensor([True, True, False, False] + [False] * 4))


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


# -- bounded importance weights ----------------------------------------------------------------

EPS, CAP, DUAL = 0.2, 2.0, 3.0


def _grid():
    """One row per advantage (both signs), its tokens over a grid of (π_old_mask/π_sample, ρ):
    importance ratios from e^-3 to e^10 (the review saw 22,394 ≈ e^10 on keep rows), ρ from e^-2
    to e^2. Returns logπ_sample, logπ_old (mask), logπ and A."""
    li, lr = torch.meshgrid(torch.linspace(-3, 10, 27), torch.linspace(-2, 2, 201), indexing="ij")
    adv = torch.tensor([-5.0, -1.0, -0.1, 0.1, 1.0, 5.0])
    prox = torch.full((len(adv), li.numel()), -1.0)
    return prox - li.reshape(1, -1), prox, prox + lr.reshape(1, -1), adv


def test_the_effective_weight_on_any_token_is_at_most_the_bound_and_reaches_it():
    """∂obj/∂logπ = weff·A with weff = w·ρ where the gradient flows, 0 where a clip holds the
    objective; the largest weff over every token is grpo.weight_bound = max(c·(1+ε), c_dual) = 3
    at the defaults: above the cap c (the PPO clip bounds ρ only where A > 0), and reached."""
    behav, prox, logp, adv = _grid()
    logp.requires_grad_(True)
    obj, st = grpo.bounded_surrogate(logp, prox, behav, adv, torch.ones_like(prox), EPS, CAP, DUAL)
    obj.sum().backward()
    g = logp.grad / adv[:, None]
    torch.testing.assert_close(g, st.weff, rtol=1e-5, atol=1e-6)  # weff is the gradient's weight
    assert torch.all(st.weff[st.clip_ppo | st.clip_dual] == 0) and st.clip_is.any()
    bound = grpo.weight_bound(EPS, CAP, DUAL)
    assert bound == max(CAP * (1 + EPS), DUAL) == 3.0
    assert 0 <= g.min() and g.max() <= bound * (1 + 1e-6)
    assert g[adv > 0].max() <= CAP * (1 + EPS) * (1 + 1e-6)
    assert g.max() >= 0.98 * bound and g.max() > CAP * (1 + EPS)  # reached, on an A < 0 token


def test_the_importance_weight_is_capped_and_carries_no_gradient():
    prox = torch.tensor([[-1.0, -1.0, -1.0]], requires_grad=True)
    behav = torch.tensor([[-1.0, -1.5, -12.0]])  # ratios 1, e^0.5, e^11
    w, ratio = grpo.importance_weight(prox, behav, CAP)
    assert not w.requires_grad and not ratio.requires_grad
    torch.testing.assert_close(w, torch.tensor([[1.0, math.exp(0.5), CAP]]))
    assert ratio[0, 2] > 1e4


def test_w_is_one_where_the_row_trains_in_its_sampling_mode():
    """logp_behav = logp_prox (masks agree, or a teacher row): the bounded surrogate is the plain
    clipped surrogate, value and gradient, whatever the ratio ρ."""
    prox = torch.tensor([[-1.0, -2.0, -0.5, -3.0]])
    lp = (prox + torch.tensor([[0.5, 0.0, -0.5, 0.1]])).requires_grad_(True)
    lp2 = lp.detach().clone().requires_grad_(True)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    for adv in (torch.tensor([1.5]), torch.tensor([-1.5])):
        obj, st = grpo.bounded_surrogate(lp, prox, prox, adv, mask, EPS, CAP, DUAL)
        ref, rho = grpo.clipped_surrogate(lp2, prox, adv, mask, EPS)
        assert torch.equal(obj, ref) and torch.equal(st.rho, rho)
        assert torch.equal(st.ratio_is, mask) and not st.clip_is.any() and not st.clip_dual.any()
        obj.sum().backward()
        ref.sum().backward()
        assert torch.equal(lp.grad, lp2.grad)
        lp.grad, lp2.grad = None, None


def test_dual_clip_bounds_the_loss_of_a_negative_advantage_with_a_huge_ratio():
    """A < 0 and ρ = e^10: PPO's min(ρA, clip(ρ)A) is ρA (unbounded below, the gradient grows with
    ρ); the dual clip floors the objective at c_dual·A and stops the gradient."""
    prox = torch.tensor([[-12.0, -1.0]])
    lp = torch.tensor([[-2.0, -1.0]], requires_grad=True)  # ρ = e^10, 1
    adv, mask = torch.tensor([-1.0]), torch.ones(1, 2)
    ppo, _ = grpo.clipped_surrogate(lp.detach(), prox, adv, mask, EPS)
    assert ppo[0, 0] < -2e4  # what nothing bounded before
    obj, st = grpo.bounded_surrogate(lp, prox, prox, adv, mask, EPS, CAP, DUAL)
    assert obj[0, 0] == -DUAL and st.clip_dual.tolist() == [[True, False]]
    torch.testing.assert_close(obj[0, 1], torch.tensor(-1.0))
    obj.sum().backward()
    assert lp.grad[0, 0] == 0 and lp.grad[0, 1] == -1.0
    # through the weight too: w = c = 2 and ρ = 1.6 is w·ρ = 3.2 > c_dual, floored
    lp = torch.tensor([[-1.0 + math.log(1.6)]], requires_grad=True)
    obj, st = grpo.bounded_surrogate(lp, torch.tensor([[-1.0]]), torch.tensor([[-9.0]]), adv, torch.ones(1, 1),
                                     EPS, CAP, DUAL)
    assert obj.item() == -DUAL and st.clip_is.item() and st.clip_dual.item() and st.weff.item() == 0


def test_a_tie_with_the_dual_clip_keeps_the_whole_gradient():
    """A < 0, ρ = 1 (π_old is the train forward's own logπ) and w capped at c = c_dual: w·ρ·A
    equals the floor c_dual·A. The objective is that value and its gradient the whole c·A, as
    the step log's weff says; torch.maximum at the tie would split it in half."""
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    behav = torch.tensor([[-5.0, -2.0]])  # token 0: π_old/π_sample = e^4, capped at c; token 1: w = 1
    mask = torch.ones(1, 2)
    adv = torch.tensor([-1.5])
    obj, st = grpo.bounded_surrogate(logp, logp.detach(), behav, adv, mask, EPS, DUAL, DUAL)
    obj.sum().backward()
    torch.testing.assert_close(obj.detach(), torch.tensor([[DUAL * -1.5, -1.5]]))
    torch.testing.assert_close(logp.grad, torch.tensor([[DUAL * -1.5, -1.5]]))
    assert not st.clip_dual.any() and torch.equal(st.weff, torch.tensor([[DUAL, 1.0]]))
