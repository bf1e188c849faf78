"""How near Atari-5's estimate comes to the measured 57-game median at 10M frames: for Dopamine's DQN, Rainbow and
IQN (TF and JAX), whose runs cover 55 of the 57 games (no Defender, no Surround; the Atari-5 paper keeps an
algorithm with 40), each game's mean over its 5 runs at iteration 9 (frames 9-10M, training returns, sticky 0.25),
human-normalized with Atari-5's own reference scores (`Atari-Human.csv`), their median against
`hogwild_dqn.tools.atari5.estimate` of the same means on the five games. The paper fit its regression on papers'
final scores, mostly after 200M frames: this says how far its band (±10.4%) holds this early in training.

    python docs/published/atari5_at_10m.py <mirror of google/dopamine> <mirror of maitchison/Atari-5>

(git directories, as `fetch` leaves them; the snapshots read are in NOTES.md.)
"""

import csv
import io
import json
import statistics
import subprocess
import sys

from hogwild_dqn.tools import atari5

AGENTS = ("DQN", "Rainbow", "IQN")
FILES = (("", "TF"), ("_CNN", "JAX"))  # <game>.json: Dopamine's legacy TF agents; <game>_CNN.json: its JAX ones


def show(repo: str, path: str) -> bytes | None:
    done = subprocess.run(["git", "--git-dir", repo, "show", f"HEAD:{path}"], capture_output=True)
    return done.stdout if done.returncode == 0 else None


def main(dopamine: str, atari5_repo: str) -> None:
    rows = csv.DictReader(io.StringIO(show(atari5_repo, "Atari-Human.csv").decode()))
    reference = {r["Game"].replace(" ", "").lower(): (float(r["Random"]), float(r["Human"])) for r in rows}
    five = {g.lower(): g for g in atari5.GAMES}
    print("| agent | games | measured median | Atari-5 estimate (band) | estimate / measured |")
    print("| --- | --- | --- | --- | --- |")
    for suffix, family in FILES:
        runs: dict[str, dict[str, list[float]]] = {}
        for game in reference:
            data = show(dopamine, f"baselines/atari/data/{game}{suffix}.json")
            for r in json.loads(data) if data else []:
                if r["Iteration"] == 9:
                    runs.setdefault(r["Agent"], {}).setdefault(game, []).append(r["Value"])
        for agent in AGENTS:
            means = {g: statistics.mean(v) for g, v in runs[agent].items()}
            median = statistics.median((m - reference[g][0]) / (reference[g][1] - reference[g][0])
                                       for g, m in means.items())
            estimate, low, high = atari5.estimate({five[g]: means[g] for g in five})
            print(f"| {agent} (Dopamine {family}) | {len(means)} | {median:.3f} | {estimate:.3f} "
                  f"({low:.3f}-{high:.3f}) | {estimate / median:.2f} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
