#!/usr/bin/env python3
"""Independent numpy computation of the numbers in tests/unit/quantize_int8_test.cpp's
entropy_keeps_a_post_relu_tail test: the synthetic post-ReLU tensor, its 8192-bin |x| histogram,
and the entropy threshold as docs/quantization.md describes it (TensorRT's KL search, each
candidate range [0, T] measured at 4 sub-bins per quantization level), next to TensorRT's form
on the raw histogram (q == p at one bin per level), for comparison.

    /usr/bin/python3 tests/tools/entropy_reference.py
"""
import numpy as np

N_BINS, LEVELS, PER_LEVEL, CANDIDATES = 8192, 256, 4, 2048


def values(total=65536):
    u = (np.arange(total, dtype=np.float64) + 0.5) / total
    x = np.zeros(total, np.float64)
    spikes = (u >= 0.5) & (u < 0.7)  # four point masses of 5% each
    x[spikes] = 0.15 * (1 + np.floor((u[spikes] - 0.5) / 0.05))
    tail = u >= 0.7  # an exponential tail: 0.3 * exp(-2x) of all values lie above x
    x[tail] = -0.5 * np.log((1.0 - u[tail]) / 0.3)
    x[-1] = 40.0  # one outlier in 65536 values (in place of the tail's largest, 5.29)
    return x.astype(np.float32)


def histogram(x):
    amax = float(np.abs(x).max())
    b = np.minimum((np.abs(x).astype(np.float64) * (N_BINS / amax)).astype(np.int64), N_BINS - 1)
    return np.bincount(b, minlength=N_BINS).astype(np.float64), amax


def kl(p, q, eps=1e-4):
    p = np.where(p > 0, p, eps)
    q = np.where(q > 0, q, eps)
    p, q = p / p.sum(), q / q.sum()
    return float(np.sum(p * np.log(p / q)))


def quantized(s, levels):
    per = s.size // levels
    g = s.reshape(levels, per)
    nz = (g > 0).sum(1, keepdims=True)
    return np.where(g > 0, g.sum(1, keepdims=True) / np.maximum(nz, 1), 0).ravel()


def fixed_resolution(h, width, levels):
    m = levels * PER_LEVEL
    cum = np.concatenate([[0.0], np.cumsum(h)])
    edges = np.arange(m + 1) * (width / m)
    k = np.minimum(np.floor(edges).astype(np.int64), h.size - 1)
    below = cum[k] + (edges - k) * h[k]
    below[-1] = cum[width]
    s = np.maximum(np.diff(below), 0)
    p = s.copy()
    p[-1] += cum[-1] - cum[width]
    return kl(p, quantized(s, levels))


def raw(h, width, levels):
    p = h[:width].copy()
    p[-1] += h[width:].sum()
    q = np.zeros(width)
    merged = width / levels
    for j in range(levels):
        lo = int(np.floor(j * merged))
        hi = width if j + 1 == levels else int(np.floor((j + 1) * merged))
        seg = h[lo:hi]
        if (seg > 0).any():
            q[lo:hi][seg > 0] = seg.sum() / (seg > 0).sum()
    return kl(p, q)


def threshold(h, amax, measure, narrowest, step):
    h = h.copy()
    h[0] = h[1]
    if measure is fixed_resolution:  # point masses on a non-empty neighbourhood: levelled
        left, right = np.r_[0.0, h[:-1]], np.r_[h[1:], 0.0]
        spike = (left > 0) & (right > 0) & (h > left + right)
        spike[0] = spike[-1] = False
        h = np.where(spike, np.maximum(left, right), h)
    widths = list(range(h.size, narrowest - 1, -step))
    kls = [measure(h, w, LEVELS) for w in widths]
    best = widths[int(np.argmin(kls))]  # the first minimum: the widest
    return amax * best / h.size, best


if __name__ == "__main__":
    x = values()
    h, amax = histogram(x)
    t_new, w_new = threshold(h, amax, fixed_resolution, LEVELS * PER_LEVEL, N_BINS // CANDIDATES)
    print(f"amax {amax:.6f}; zeros {np.mean(x == 0):.3f}")
    print(f"fixed resolution: T = {t_new:.6f} (bin {w_new}), clipped {np.mean(x > t_new):.5f}; largest value below 40: {x[x < 40].max():.6f}")
    h2 = np.bincount(np.minimum((x.astype(np.float64) * (2048 / amax)).astype(np.int64), 2047), minlength=2048).astype(np.float64)
    t_old, w_old = threshold(h2, amax, raw, LEVELS, 1)
    print(f"raw 2048-bin histogram (before): T = {t_old:.6f} (bin {w_old}), clipped {np.mean(x > t_old):.5f}")
    # Note: outliers that are not rare are kept, in both forms, given enough values. The
    # positive side of N(0, 1) with 0.26% of the values at 40 (quantize_int8_test's
    # methods_give_valid_different_scales has that share, of 1536 values), with the levels the
    # two-sided rule gives that side (234):
    rs = np.random.RandomState(0)
    for n, share in ((1536, 1 / 384), (1_000_000, 1 / 384), (1_000_000, 1e-5)):
        g = rs.standard_normal(n).astype(np.float32)
        g[:max(1, int(n * share))] = 40
        g = g[g >= 0]
        gh, gmax = histogram(g)
        LEVELS = 234
        t1, _ = threshold(gh, gmax, fixed_resolution, LEVELS * PER_LEVEL, N_BINS // CANDIDATES)
        g2 = np.bincount(np.minimum((g.astype(np.float64) * (2048 / gmax)).astype(np.int64), 2047), minlength=2048)
        t2, _ = threshold(g2.astype(np.float64), gmax, raw, LEVELS, 1)
        print(f"N(0,1), {n} values, {share:.3%} at 40: T = {t1:.2f} (raw histogram: {t2:.2f})")
        LEVELS = 256
