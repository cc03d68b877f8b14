"""Branch decoding (``sample.compile(..., branches=n)``, docs/neural.md section 4):
candidate 0 is the greedy sequence, candidates 1..n are that sequence with one token
changed (the n changes the model was least sure against: the smallest logit margins
over the 2nd to 4th most likely tokens of each position), greedy after the change.

* on an untrained model (so nothing depends on a trained model's taste): candidate 0 is
  the plain greedy decode, every branch equals the greedy sequence before its position
  and takes its token there, the changes are the k - 1 cheapest, and every candidate is
  well-formed bytecode (assembled, VM-run);
* ``branch_force`` on a hand-made greedy decode: the EOS position counts, later ones
  do not, a short sequence leaves its extra rows to sampling;
* a program's candidates do not depend on the other programs of its batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from test_neural_grammar import CFG, LIM, SOURCES, _run_everything  # tests/ is on sys.path

from jaxcc.errors import Code
from jaxcc.neural import model as M
from jaxcc.neural import sample as S
from jaxcc.neural import vocab as V
from jaxcc.neural.inputs import source_features
from jaxcc.reference.host_lex import host_lex_many

K = 16


def _compiled(sources, params, key=3, branches=K - 1):
    toks, _ = host_lex_many(sources, LIM)
    c = S.compile(toks, params, jax.random.key(key), LIM, K, 0.8, 1.0, cfg=CFG,
                  branches=branches)  # fmt: skip
    src = source_features(toks, CFG.nlimits)
    first = S.sample(M.graphdef(CFG), params, src, jax.random.key(key), 1, LIM, 0.0, 1.0, True,
                     record_alt=True)  # fmt: skip
    return c, first


def test_branches_of_an_untrained_model():
    params = M.init_params(CFG, 4)
    c, first = _compiled(SOURCES, params)
    tok, g = np.asarray(c.samples.tokens), np.asarray(first.tokens[:, 0])
    alt, margin = np.asarray(first.alt[:, 0]), np.asarray(first.margin[:, 0])
    force = np.asarray(S.branch_force(first, K))
    assert bool(jnp.all(c.ok)), "every branch is a complete, grammatical program"
    assert not np.any(_run_everything(c.program) == Code.INVALID_BYTECODE)
    for b in range(len(SOURCES)):
        np.testing.assert_array_equal(tok[b, 0], g[b])  # candidate 0: the greedy sequence
        n = int(np.argmax(g[b] == V.EOS)) + 1
        cost = margin[b, :n]
        assert np.all(cost[np.isfinite(cost)] >= 0)  # the greedy token is the best one
        # the departures taken are the K - 1 cheapest (an untrained model's sequences are
        # long enough to have that many)
        taken = [margin[b, p, list(alt[b, p]).index(t)] for p, t in force[b, 1:]]
        np.testing.assert_allclose(sorted(taken), np.sort(cost[np.isfinite(cost)])[: K - 1])
        assert force[b, 0, 0] == -1
        for j in range(1, K):
            p, t = force[b, j]
            np.testing.assert_array_equal(tok[b, j, :p], g[b, :p])  # greedy before it
            assert tok[b, j, p] == t != g[b, p], (b, j, p)
        # the branches are distinct programs
        assert len({tuple(tok[b, j]) for j in range(K)}) == K


def test_fewer_branches_leave_the_rest_to_sampling():
    params = M.init_params(CFG, 4)
    c, first = _compiled(SOURCES[:2], params, branches=5)
    force = np.asarray(S.branch_force(first, K, 5))
    assert (force[:, 1:6, 0] >= 0).all() and (force[:, 6:, 0] == -1).all()
    tok, g = np.asarray(c.samples.tokens), np.asarray(first.tokens[:, 0])
    for b in range(2):
        np.testing.assert_array_equal(tok[b, 0], g[b])
        for j in range(1, 6):
            p = force[b, j, 0]
            np.testing.assert_array_equal(tok[b, j, :p], g[b, :p])
    assert bool(jnp.all(c.ok))


def test_branch_force_positions():
    L, R = 8, S.ALT_RANKS
    tokens = jnp.array([[[5, 6, 7, V.EOS, V.PAD, V.PAD, V.PAD, V.PAD]]], jnp.int32)
    inf = jnp.inf
    margin = (
        jnp.full((1, 1, L, R), inf)
        .at[0, 0, :4]
        .set(jnp.array([[0.5, 0.9, inf], [inf, inf, inf], [0.1, 0.2, 3.0], [0.3, inf, inf]]))
        .at[0, 0, 4:]
        .set(0.0)
    )  # after the EOS: never taken
    alt = 100 + 10 * jnp.arange(L, dtype=jnp.int32)[:, None] + jnp.arange(R, dtype=jnp.int32)[None]
    smp = S.Samples(tokens, jnp.zeros((1, 1)), jnp.ones((1, 1), bool), alt[None, None], margin)
    f = np.asarray(S.branch_force(smp, 9))[0]
    # row 0 greedy; then by cost 0.1 (t 2, rank 2), 0.2 (t 2, rank 3), 0.3 (t 3, the
    # EOS), 0.5 (t 0), 0.9 (t 0, rank 3), 3.0 (t 2, rank 4); position 1 has one allowed
    # token and 4.. come after the EOS; the last two rows are sampled
    np.testing.assert_array_equal(f[:, 0], [-1, 2, 2, 3, 0, 0, 2, -1, -1])
    np.testing.assert_array_equal(f[1:7, 1], [120, 121, 130, 100, 101, 122])
    np.testing.assert_array_equal(np.asarray(S.branch_force(smp, 9, 2))[0, :, 0],
                                  [-1, 2, 2, -1, -1, -1, -1, -1, -1])  # fmt: skip


def test_branches_do_not_depend_on_the_batch():
    # two batches of the same shape as test_branches_of_an_untrained_model's (one compile
    # for the file), the same programs in another order
    params = M.init_params(CFG, 4)
    batch, _ = _compiled(SOURCES, params)
    other, _ = _compiled([SOURCES[0], SOURCES[3], SOURCES[1], SOURCES[2]], params)
    # randomness (the rows left to sampling) is per program index: compare at index 0,
    # whose neighbours differ
    np.testing.assert_array_equal(np.asarray(other.samples.tokens[0]),
                                  np.asarray(batch.samples.tokens[0]))  # fmt: skip
    # and the branches themselves (rows with a forced position) are deterministic:
    # SOURCES[1] at index 2 of one batch and index 1 of the other
    np.testing.assert_array_equal(np.asarray(other.samples.tokens[2]),
                                  np.asarray(batch.samples.tokens[1]))  # fmt: skip


def test_hybrid_sample_each_passes_branches_on():
    from jaxcc.neural import hybrid as H

    params = M.init_params(CFG, 4)
    toks, _ = host_lex_many(SOURCES[:2], LIM)
    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(3), i))(jnp.arange(2))
    cands, ok, _ = H.sample_each(toks, params, keys, 4, LIM, 0.8, 1.0, True, CFG, branches=3)
    greedy, _, _ = H.sample_each(toks, params, keys, 1, LIM, 0.0, 1.0, True, CFG)
    assert bool(jnp.all(ok))
    op = np.asarray(cands.op)
    np.testing.assert_array_equal(op[:, 0], np.asarray(greedy.op)[:, 0])
    for b in range(2):  # one-token departures: programs other than the greedy one
        rows = [np.concatenate([np.ravel(np.asarray(x[b, j])) for x in cands]) for j in range(4)]
        assert sum(not np.array_equal(r, rows[0]) for r in rows[1:]) >= 2
