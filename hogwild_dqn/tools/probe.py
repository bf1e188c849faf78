"""What a trained actor-critic's network does over one game: the torso's features, the LSTM cells and gates, the
policy's entropy. Made to see the A3C-LSTM's collapse (docs/notebook/a3c-lstm.md) in numbers.

    python -m hogwild_dqn.tools.probe RUN_DIR [--steps 400] [--best] [--seed 0]

Plays `--steps` agent steps of an evaluation game (the run's env, its policy as the evaluator acts) and prints:
- torso: the mean of its outputs, their largest value, and how much they vary over the game (the mean over units
  of each unit's standard deviation over time) against their size (the mean over units of |mean|): a network
  whose features no longer follow the screen has a small ratio; the share of its units that are ever active
  (above 0) in the game; and the gradient that reaches it from the heads (the norm per step of the gradient of
  a fixed random projection of the policy and value outputs with respect to the torso's output): near 0, the
  torso has stopped learning;
- LSTM (--net lstm): the mean and largest |c| (tanh(c) saturates from about 3), the share of input, forget
  and output gate values beyond 0.01 or 0.99 (saturated sigmoids pass almost no gradient) and of cell
  candidates tanh(g) beyond +-0.99;
- the policy's entropy (discrete actions) against its maximum, ln(actions): at the maximum it is uniform.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch

from hogwild_dqn.commands import command
from hogwild_dqn.config import ConfigError, Parser
from hogwild_dqn.distributions import gaussian, log_prob_entropy
from hogwild_dqn.envs import make_env
from hogwild_dqn.evaluation.policy import load_policy
from hogwild_dqn.metrics import feature_spread
from hogwild_dqn.networks import is_recurrent


def gates(lstm: torch.nn.LSTMCell, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The LSTM cell's input, forget and output gates and its candidate tanh(g) for input x and state h (torch's
    gate order i, f, g, o)."""
    z = x @ lstm.weight_ih.T + lstm.bias_ih + h @ lstm.weight_hh.T + lstm.bias_hh
    i, f, g, o = z.chunk(4, dim=-1)
    return torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o), torch.tanh(g)


def torso_gradient(net: torch.nn.Module, feats: torch.Tensor, starts: list[int]) -> float:
    """The mean norm per step of the gradient that reaches the torso's output `feats` (steps, units) from the
    heads, for a fixed random projection of their outputs; an LSTM replays the steps from zero states at each
    game's start (`starts`)."""
    with torch.enable_grad():
        x = feats.clone().requires_grad_(True)
        if is_recurrent(net):
            cell_in = net.cell_input(x)
            hs, state = [], None
            for t in range(len(x)):
                state = net.initial_state(1) if t in starts else state
                state = net.lstm(cell_in[t:t + 1], state)
                hs.append(state[0])
            x_heads = torch.cat(hs)
        else:
            x_heads = x
        out = torch.cat([net.pi(x_heads).flatten(1), net.v(x_heads)], 1)
        weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(0))
        (out * weights).sum().backward()
    return float(x.grad.norm(dim=1).mean())


@torch.no_grad()
def probe(run_dir: Path, steps: int, best: bool, seed: int) -> dict:
    policy = load_policy(run_dir, best=best, seed=seed)
    net, cfg = policy.net, policy.cfg
    if not hasattr(net, "torso") or not hasattr(net, "pi"):
        raise ConfigError(f"{run_dir}: probe reads actor-critic networks (--algo a3c); this run is {cfg.algo}")
    env = make_env(cfg, seed, for_eval=True)
    obs, _ = env.reset()
    policy.reset()
    feats, cells, saturated, entropies, starts = [], [], [], [], [0]
    for _ in range(steps):
        x = torch.as_tensor(np.asarray(obs)).unsqueeze(0)
        feats.append(net.torso(x)[0])
        if is_recurrent(net):
            h, c = policy.state
            cell_in = net.cell_input(feats[-1][None])  # the torso's output, layer-normalized with --lstm-norm
            i, f, o, g = gates(net.lstm, cell_in, h)
            saturated.append(torch.stack([((s < 0.01) | (s > 0.99)).float().mean() for s in (i, f, o)]
                                         + [(g.abs() > 0.99).float().mean()]))
            cells.append(c[0].abs())
        logits = net.pi(net.lstm(cell_in, policy.state)[0] if is_recurrent(net) else feats[-1][None])
        if gaussian(logits) is None:  # the entropy the A3C loss rewards (the action passed is not used for it)
            entropies.append(float(log_prob_entropy(logits, torch.zeros(1, dtype=torch.long))[1][0]))
        obs, _, term, trunc, _ = env.step(policy.act(obs))
        if term or trunc:
            obs, _ = env.reset()
            policy.reset()
            starts.append(len(feats))
    env.close()
    f = torch.stack(feats)
    variation, size = feature_spread(f)
    out = {"frames": policy.frames, "source": str(policy.source), "steps": steps,
           "torso_mean": float(f.mean()), "torso_max": float(f.max()),
           "torso_variation": variation, "torso_size": size, "torso_active": float((f > 0).any(0).float().mean())}
    if getattr(net, "value_torso", None) is None:  # the heads read this torso alone
        out["torso_gradient"] = torso_gradient(net, f, starts)
    if cells:
        c, s = torch.stack(cells), torch.stack(saturated)
        out.update(cell_mean=float(c.mean()), cell_max=float(c.max()),
                   saturated_input=float(s[:, 0].mean()), saturated_forget=float(s[:, 1].mean()),
                   saturated_output=float(s[:, 2].mean()), saturated_candidate=float(s[:, 3].mean()))
    if entropies:
        out.update(entropy=float(np.mean(entropies)), entropy_max=math.log(int(net.pi.out_features)))
    return out


@command("probe", interrupted="stopped (Ctrl-C)")
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m hogwild_dqn.tools.probe", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--steps", type=int, default=400, help="agent steps to play (default 400)")
    p.add_argument("--best", action="store_true", help="best.pt's weights rather than the last (checkpoint.pt)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.steps < 2:
        raise ConfigError(f"--steps must be at least 2, got {args.steps}")
    if args.seed < 0:
        raise ConfigError(f"--seed must be an integer >= 0, got {args.seed}")
    r = probe(args.run_dir, args.steps, args.best, args.seed)
    print(f"{r['source']} ({r['frames']:,} frames), {r['steps']} steps of a game")
    print(f"torso: mean {r['torso_mean']:.3f}, largest {r['torso_max']:.2f}, variation over time "
          f"{r['torso_variation']:.4f} against size {r['torso_size']:.4f} (ratio "
          f"{r['torso_variation'] / max(r['torso_size'], 1e-12):.3f}), {r['torso_active']:.0%} of its units active"
          + (f", gradient from the heads {r['torso_gradient']:.4f} per step" if "torso_gradient" in r else ""))
    if "cell_mean" in r:
        print(f"cells: |c| mean {r['cell_mean']:.2f}, largest {r['cell_max']:.1f}; saturated gates: input "
              f"{r['saturated_input']:.0%}, forget {r['saturated_forget']:.0%}, output {r['saturated_output']:.0%}; "
              f"saturated candidates {r['saturated_candidate']:.0%}")
    if "entropy" in r:
        print(f"policy entropy {r['entropy']:.3f} of at most {r['entropy_max']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
