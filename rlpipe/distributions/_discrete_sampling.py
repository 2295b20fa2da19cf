"""Poisson and binomial draws over backend arrays, from uniform draws of a device generator's state (so they run
on NumPy and CuPy alike), by torch's algorithms: products of uniforms (Poisson, rate < 10) and Hormann's
transformed rejection PTRS (rate >= 10); sums of geometric waits (binomial, n min(p, 1-p) < 10) and BTRS,
whose acceptance test here uses the exact log-probability ratio (lgamma) instead of Stirling tails."""
import numpy as np

from .._tensor import wrap
from ..random import _generator_for


def _draws(device):
    """(uniform(shape), xp, backend) for the device's default generator."""
    state = _generator_for(device, None)._state
    be = device._backend
    return (lambda shape: state.uniform(shape, np.float64)), be.xp, be


def poisson(rate):
    """Poisson(rate) draws, one per element of the tensor ``rate``, as a tensor of its dtype."""
    uniform, xp, be = _draws(rate.device)
    lam = rate.detach()._data.astype(xp.float64)
    with np.errstate(all="ignore"):
        out = xp.where(lam < 10, _poisson_small(uniform, xp, lam), _poisson_ptrs(uniform, xp, be, lam))
    return _like(out, rate)


def _poisson_small(uniform, xp, lam):
    """Knuth's method: the number of uniforms whose running product stays above exp(-lam)."""
    limit = xp.exp(-lam)
    product = xp.ones_like(lam)
    count = xp.zeros_like(lam)
    active = lam < 10
    while bool(active.any()):
        product = product * uniform(lam.shape)
        active = active & (product > limit)
        count = count + active
    return count


def _poisson_ptrs(uniform, xp, be, lam):
    """Hormann's PTRS for rate >= 10 (other elements computed with a stand-in rate and discarded)."""
    lam = xp.maximum(lam, 10.0)
    log_lam = xp.log(lam)
    b = 0.931 + 2.53 * xp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    log_inv_alpha = xp.log(1.1239 + 1.1328 / (b - 3.4))
    v_r = 0.9277 - 3.6224 / (b - 2)
    out = xp.zeros_like(lam)
    active = xp.ones(lam.shape, dtype=bool)
    while bool(active.any()):
        u = uniform(lam.shape) - 0.5
        v = uniform(lam.shape)
        us = 0.5 - xp.abs(u)
        k = xp.floor((2 * a / us + b) * u + lam + 0.43)
        quick = (us >= 0.07) & (v <= v_r)
        rejected = (k < 0) | ((us < 0.013) & (v > us))
        exact = xp.log(v) + log_inv_alpha - xp.log(a / (us * us) + b) <= -lam + k * log_lam - be.lgamma(k + 1)
        take = active & (quick | (~rejected & exact))
        out = xp.where(take, k, out)
        active = active & ~take
    return out


def binomial(total_count, probs):
    """Binomial(total_count, probs) draws, one per element of the (broadcast, same-shape) tensors."""
    uniform, xp, be = _draws(probs.device)
    n = total_count.detach()._data.astype(xp.float64)
    p = probs.detach()._data.astype(xp.float64)
    flipped = p > 0.5
    q = xp.where(flipped, 1 - p, p)
    with np.errstate(all="ignore"):
        small = n * q < 10
        k = xp.where(small, _binomial_inversion(uniform, xp, n, q, small), _binomial_btrs(uniform, xp, be, n, q))
    k = xp.where((q == 0) | (n == 0), 0.0, k)
    return _like(xp.where(flipped, n - k, k), probs)


def _binomial_inversion(uniform, xp, n, q, active):
    """The number of geometric waits (successes) that fit in n trials."""
    log_q = xp.log1p(-q)
    total = xp.zeros_like(n)
    count = xp.zeros_like(n)
    active = active & (q > 0) & (n > 0)
    while bool(active.any()):
        total = total + xp.ceil(xp.log(uniform(n.shape)) / log_q)
        active = active & (total <= n)
        count = count + active
    return count


def _binomial_btrs(uniform, xp, be, n, q):
    """Hormann's BTRS for n q >= 10 (other elements computed with stand-in values and discarded)."""
    stand_in = n * q < 10
    n = xp.where(stand_in, 100.0, n)
    q = xp.where(stand_in, 0.5, q)
    spread = xp.sqrt(n * q * (1 - q))
    b = 1.15 + 2.53 * spread
    a = -0.0873 + 0.0248 * b + 0.01 * q
    c = n * q + 0.5
    v_r = 0.92 - 4.2 / b
    log_odds = xp.log(q / (1 - q))
    alpha = (2.83 + 5.1 / b) * spread
    m = xp.floor((n + 1) * q)
    log_f_m = -be.lgamma(m + 1) - be.lgamma(n - m + 1) + m * log_odds
    out = xp.zeros_like(n)
    active = xp.ones(n.shape, dtype=bool)
    while bool(active.any()):
        u = uniform(n.shape) - 0.5
        v = uniform(n.shape)
        us = 0.5 - xp.abs(u)
        k = xp.floor((2 * a / us + b) * u + c)
        inside = (k >= 0) & (k <= n)
        quick = (us >= 0.07) & (v <= v_r)
        log_f_k = -be.lgamma(k + 1) - be.lgamma(n - k + 1) + k * log_odds
        exact = xp.log(v * alpha / (a / (us * us) + b)) <= log_f_k - log_f_m
        take = active & inside & (quick | exact)
        out = xp.where(take, k, out)
        active = active & ~take
    return out


def _like(array, like):
    """A tensor of ``like``'s dtype and device holding ``array``."""
    return wrap(array.astype(like._data.dtype, copy=False), like.device)
