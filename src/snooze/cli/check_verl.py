"""``snooze check-verl OVERRIDES...``: a verl command line checked for the snooze trainer, with no cluster.

The overrides are those given to ``python3 -m verl.trainer.main_ppo``; what is checked, in verl's order, is
:mod:`snooze.integrations.verl._check`'s. One line per step; exit status 0 when nothing would be refused,
2 when something would (each problem on its line, saying what to change).
"""

from __future__ import annotations

import argparse
import sys

HELP = "Check verl overrides for the snooze trainer without a cluster: compose verl's config and report every error."

_WIDTH = 16  # the step column


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "overrides",
        nargs="+",
        metavar="OVERRIDE",
        help="Hydra overrides, as given to python3 -m verl.trainer.main_ppo (e.g. trainer.v1.trainer_mode=snooze "
        "+trainer.v1.snooze.policy=snooze '+trainer.v1.snooze.options={factor:1}')",
    )
    parser.add_argument(
        "--config-name", default="ppo_trainer", help="verl's config to compose, as main_ppo's (default ppo_trainer)"
    )
    parser.add_argument(
        "--config-path",
        default=None,
        metavar="DIR",
        help="folder of the config, as main_ppo's --config-path (default verl's own, verl/trainer/config)",
    )


def run(args: argparse.Namespace) -> int:
    import contextlib

    from snooze.integrations.verl import check_overrides

    with contextlib.redirect_stdout(sys.stderr):  # verl prints as it builds; stdout holds the report alone
        found = check_overrides(args.overrides, args.config_name, args.config_path)
    for f in found:
        print(f"{f.status.upper() if f.status == 'error' else f.status:<8} {f.step:<{_WIDTH}} {f.detail}")
    errors = sum(f.status == "error" for f in found)
    if errors:
        print(f"snooze check-verl: error: {errors} problem(s): verl would stop on them (see above)", file=sys.stderr)
        return 2
    return 0
