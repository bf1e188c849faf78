"""`python train.py ...` from a checkout: the same command as `hogwild-train` (hogwild_dqn/train.py)."""

import sys

from hogwild_dqn.train import main

if __name__ == "__main__":
    sys.exit(main())
