"""The rows "PPO2 (OpenAI baselines)" of atari_10m.csv: each game's ppo2 curve on openai/baselines'
benchmarks_atari10M.htm (mean of 6 runs, as plotted; x in agent steps), read at 2.5M steps = 10M frames.

The page gives no numbers for its curves, only SVG plots: each subplot's first thick line is ppo2 (the page's
table lists ppo2 first, and the curves come in the table's order); a point's value is its y coordinate mapped
through the subplot's own tick labels (a label's baseline sits 4.18 units below its grid line), interpolated
linearly between the two points either side of 2.5M steps (the curves have 100 points, ~0.1M steps apart).

    git --git-dir=<mirror of openai/baselines> show HEAD:benchmarks_atari10M.htm > b.htm
    python docs/published/baselines_ppo2.py b.htm >> docs/published/atari_10m.csv
"""

import re
import sys

GAMES = ("Pong", "Breakout", "SpaceInvaders", "BeamRider", "Qbert", "Seaquest")
STEPS = 2_500_000
PROTOCOL = ("no sticky actions (NoFrameskip-v4), training returns of whole games, life-loss terminals, up to 30 "
            "no-op starts, FIRE reset, ppo2's Atari defaults (Nature CNN; 128 steps, 4 epochs x 4 minibatches, clip "
            "0.1, lr 2.5e-4 annealed over 10M agent steps); 6 runs' mean read off the plotted curve at 2.5M agent "
            "steps")
SOURCE = "openai/baselines benchmarks_atari10M.htm (ppo2 curve, 2.5M timesteps)"


def ppo2_at(page: str, game: str, steps: float) -> float:
    """The ppo2 curve of `game`'s subplot at `steps`."""
    title = page.index(f'y="23.04">{game}</text>')
    axes = page.rindex('<g id="axes_', 0, title)
    plot = page[axes:title]
    ticks = [(float(y) - 4.18, float(v)) for y, v in
             re.findall(r'<text[^>]*text-anchor:end;[^>]*y="([\d.]+)">(-?[\d.]+)</text>', plot) if v != "1e7"]
    xs = re.findall(r'text-anchor:middle;[^>]*x="([\d.]+)" y="114.798281">([\d.]+)</text>', plot)
    assert xs[0][1] == "0.0" and xs[-1][1] == "1.0", game  # x axis: 0 to 1e7 steps
    x0, x1 = float(xs[0][0]), float(xs[-1][0])
    (ya, va), (yb, vb) = ticks[0], ticks[-1]
    path, colour = re.findall(r'<path clip-path="[^"]*" d="([^"]+)"[^>]*style="[^"]*stroke:(#[0-9a-f]{6})'
                              r'[^"]*stroke-width:1.5', plot)[0]
    assert colour == "#66c2a5", game  # the palette's first colour: ppo2's
    points = [(float(x), float(y)) for x, y in re.findall(r"([\d.]+) ([\d.]+)", path)]
    x = x0 + steps / 1e7 * (x1 - x0)
    i = max(k for k, p in enumerate(points) if p[0] <= x)
    (xa, ya_), (xb, yb_) = points[i], points[i + 1]
    y = ya_ + (yb_ - ya_) * (x - xa) / (xb - xa)
    return va + (y - ya) * (vb - va) / (yb - ya)


if __name__ == "__main__":
    page = open(sys.argv[1]).read()
    for game in GAMES:
        print(f'{game},PPO2 (OpenAI baselines),{STEPS * 4},{ppo2_at(page, game, STEPS):.1f},6,"{PROTOCOL}","{SOURCE}"')
