"""What the snooze sync trainer's round barrier costs in verl, on the CPU stand-ins of the verl tests.

verl's own sync loop with DAPO filtering (``trainer.v1.trainer_mode=sync``,
``algorithm.filter_groups.enable=True``) refills as soon as it evicts a zero-spread group (two new prompts
per group evicted, up to ``max_inflight_gen_batches`` batches in flight), so generation never waits for a
round to end. The snooze sync trainer (``trainer.v1.trainer_mode=snooze``) runs the scheduler's step loop:
a round of ``data.gen_batch_size`` prompts is submitted, every group of it is reported, then the next round
is submitted: each round waits for its slowest group. ``snooze_colocate_async`` has no rounds to wait for:
verl refills one prompt per group that cannot train, and generation runs a batch ahead of training.

Each arm is one run of verl 0.9.1's own ``fit()`` (``tests/integrations/_verl_fit.py``: verl's trainer,
agent loop, reward loop and TransferQueue; a one-layer model on CPU in place of the FSDP workers and the
vLLM server), all with DAPO's rule (verl's filter, or ``policy=dynamic_sampling``), on a pool where most
prompts are always solved, so that a step needs several rounds. The rollout server takes ``--delay``
seconds per token, as a GPU server is slow next to the replay buffer's polls; requests run concurrently,
as on a batching server. Every arm's replay buffer looks at TransferQueue every ``POLL`` seconds (the
snooze arms' ``poll_interval``; verl's sync buffer, which takes no such setting from its config, is built
with the same value here), so that the arms differ in how they submit work, not in how often they look.
Steps after the first are measured (verl's ``timing_s/step`` and ``timing_s/gen``,
medians), with the groups generated per step. Usage (about 2 minutes an arm on 2 cores)::

    PYTHONPATH=src:tests python benchmarks/verl_round_barrier.py --out runs/verl_barrier

``--run ARM FOLDER`` is one arm, in a process of its own (verl's Ray actors are named per process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
B, G = 2, 4  # data.train_batch_size, actor_rollout_ref.rollout.n (the stand-ins' sizes)
POLL = 0.02  # seconds between a replay buffer's looks at TransferQueue, in every arm
ROWS = [("gsm", i, "easy") for i in range(9)] + [("math", 10 + i, "odd") for i in range(3)]
"""9 prompts every rollout solves (no signal) and 3 the tiny model solves about half the time."""

ARMS: dict[str, tuple[str, list[str]]] = {
    "verl-dapo": ("sync", []),  # verl's own loop, filter_groups.enable=True (_verl_fit adds it for mode "sync")
    "verl-dapo-inflight3": ("sync", ["algorithm.filter_groups.max_inflight_gen_batches=3"]),
    "snooze-sync": ("snooze", ["trainer.v1.snooze.policy=dynamic_sampling"]),
    "snooze-sync-gen3x": ("snooze", ["trainer.v1.snooze.policy=dynamic_sampling", f"data.gen_batch_size={3 * B}"]),
    "snooze-colocate-async": ("snooze_colocate_async", ["trainer.v1.snooze.policy=dynamic_sampling"]),
}


def run_arm(arm: str, folder: Path, steps: int) -> None:
    """One arm in this process: ``_verl_fit``'s run with this benchmark's pool, steps and overrides."""
    from integrations import _verl_fit as fit

    mode, extra = ARMS[arm]
    fit.ROWS, fit.STEPS, fit.SAVE_FREQ = ROWS, steps, 0  # no checkpoints, no validation during training
    base = fit.overrides
    poll = [f"trainer.v1.snooze.poll_interval={POLL}"] if mode != "sync" else []
    fit.overrides = lambda m: [*base(m), "trainer.val_before_train=False", *poll, *extra]  # type: ignore[assignment]
    if mode == "sync":
        _poll_verls_buffer_every(POLL)
    fit.main([mode, str(folder)])


def _poll_verls_buffer_every(seconds: float) -> None:
    """verl's sync trainer builds its ``ReplayBuffer`` with the class's default ``poll_interval`` (2 s)."""
    from verl.trainer.ppo.v1 import replay_buffer

    init = replay_buffer.ReplayBuffer.__init__

    def with_poll(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{**kwargs, "poll_interval": seconds})

    replay_buffer.ReplayBuffer.__init__ = with_poll  # type: ignore[method-assign]


def _arm_process(arm: str, folder: Path, steps: int, delay: float) -> subprocess.CompletedProcess:
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", SNOOZE_TINY_CPU_DELAY=str(delay))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    env.pop("RAY_ADDRESS", None)
    with open(folder / "run.log", "wb") as out:
        argv = [sys.executable, __file__, "--run", arm, str(folder), "--steps", str(steps)]
        return subprocess.run(argv, stdout=out, stderr=out, env=env, timeout=900, start_new_session=True)


def measure(folder: Path, mode: str) -> dict[str, Any]:
    """Medians over the steps after the first, from verl's file log."""
    lines = [json.loads(x)["data"] for x in (folder / "log" / "fit" / f"{mode}.jsonl").read_text().splitlines()]
    train = [d for d in lines if "timing_s/step" in d][1:]
    groups = [d.get("snooze/gen/groups") for d in train]
    if groups[0] is None:  # verl's loop: the batch's groups, those its DAPO filter evicted, the surplus it discarded
        dapo = ("evicted_samples", "discarded_surplus_samples")  # (counts of groups: verl counts prompt uids)
        groups = [B + sum(d.get(f"training/filter_groups/{k}", 0) for k in dapo) for d in train]
    return {
        "steps": len(train),
        "step_s": round(statistics.median(d["timing_s/step"] for d in train), 2),
        "gen_s": round(statistics.median(d["timing_s/gen"] for d in train), 2),
        "groups_per_step": round(statistics.mean(groups), 1),
        "rounds_per_step": round(statistics.mean(d["snooze/gen/rounds"] for d in train), 1)
        if "snooze/gen/rounds" in train[0]
        else None,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "verl_barrier", help="output folder")
    p.add_argument("--steps", type=int, default=8, help="training steps per arm (the first is not measured)")
    p.add_argument("--delay", type=float, default=0.2, help="seconds the rollout server takes per token")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, among {', '.join(ARMS)}")
    p.add_argument("--measured", action="store_true", help="read the arms' logs already in --out; run nothing")
    p.add_argument("--run", nargs=2, metavar=("ARM", "FOLDER"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.run:
        run_arm(args.run[0], Path(args.run[1]), args.steps)
        return
    results = {}
    for arm in args.arms.split(","):
        t0 = time.monotonic()
        done = None if args.measured else _arm_process(arm, args.out / arm, args.steps, args.delay)
        if done is not None and done.returncode != 0:
            raise SystemExit(f"{arm}: exited {done.returncode}; see {args.out / arm / 'run.log'}")
        results[arm] = measure(args.out / arm, ARMS[arm][0])
        if done is not None:
            results[arm]["wall_s"] = round(time.monotonic() - t0)
        print(f"{arm:<24} " + "  ".join(f"{k}={v}" for k, v in results[arm].items()), flush=True)
    record = {"delay_s_per_token": args.delay, "batch": B, "group": G, "rows": len(ROWS), "arms": results}
    (args.out / "barrier.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
