"""Helpers shared by test modules (not tests themselves)."""

import json
import subprocess
import sys
import tempfile


def run_python_json(code: str, env: dict, *, flags=(), prefix=()) -> tuple[dict, str]:
    """Run ``code`` in a fresh ``python -W error`` and return (the JSON its last stdout line holds, stderr).

    The working directory is the temp dir, not the repository, whose ``softmax_scale/`` would
    otherwise shadow what ``PYTHONPATH`` points at (``-c`` puts the cwd first on the path).
    """
    cmd = [*prefix, sys.executable, *flags, "-W", "error", "-c", code]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tempfile.gettempdir())
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


def naive_first(params, inputs, factors, heads, eps):
    """FIRST's model (softmax_scale.train.first) one sequence and one head at a time, in float64.

    Returns the logits ``[B]`` and the softmax probabilities and scores of the query ``$`` in
    every layer, ``[layers, B, H, T]`` each.
    """
    import math

    import numpy as np

    def ln(y, g, b):
        mu = y.mean(axis=1, keepdims=True)
        return (y - mu) / np.sqrt(((y - mu) ** 2).mean(axis=1, keepdims=True) + eps) * g + b

    out, probs, rows = [], [], []
    for seq in np.asarray(inputs):
        t = seq.size
        x = np.array(params["embed"], np.float64)[seq]
        x[1, 0] += 1.0  # the mark on the first bit
        seq_p, seq_s = [], []
        for li, layer in enumerate(params["layers"]):
            p = {k: np.asarray(v, np.float64) for k, v in layer.items()}
            dh = x.shape[1] // heads
            att = np.zeros_like(x)
            lp, ls = [], []
            for h in range(heads):
                cols = slice(h * dh, (h + 1) * dh)
                q, k, v = x @ p["wq"][:, cols], x @ p["wk"][:, cols], x @ p["wv"][:, cols]
                f = factors[li, h] if np.ndim(factors) == 3 else factors
                s = p["s"][h] if "s" in p else 1.0
                scores = np.array([[f[i] * s * (q[i] @ k[j]) / math.sqrt(dh) for j in range(t)] for i in range(t)])
                w = np.exp(scores - scores.max(axis=1, keepdims=True))
                w /= w.sum(axis=1, keepdims=True)
                att[:, cols] = w @ v
                lp.append(w[0])
                ls.append(scores[0])
            seq_p.append(lp)
            seq_s.append(ls)
            x = ln(x + att @ p["wo"] + p["bo"], p["g1"], p["b1"])
            x = ln(x + np.maximum(x @ p["w1"], 0.0) @ p["w2"] + p["bf"], p["g2"], p["b2"])
        out.append(x[0] @ np.asarray(params["w_out"], np.float64) + float(params["b_out"]))
        probs.append(seq_p)
        rows.append(seq_s)
    return np.array(out), np.moveaxis(np.array(probs), 0, 1), np.moveaxis(np.array(rows), 0, 1)


def mean_kl(p_logits, q_logits):
    """Mean over positions of KL(p || q) of the softmaxes of two ``[positions, vocab]`` logit arrays (nats)."""
    import numpy as np

    def log_softmax(x):
        x = x - x.max(axis=1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=1, keepdims=True))

    lp, lq = log_softmax(p_logits), log_softmax(q_logits)
    return float(np.mean(np.sum(np.exp(lp) * (lp - lq), axis=1)))
