"""Scale benchmark: the scheduler at 10M prompts over 3 datasets, against a dict-per-prompt baseline.

    python benchmarks/scale.py --prompts 10000000

Measures, for the scheduler (``snooze.Scheduler`` over ``Source.from_ids`` with int ids):

- ``bytes_per_prompt``: bytes of the committed checkpoint per prompt (what a save writes), and
  ``memory_bytes_per_prompt``: the scheduler's own arrays per prompt (prompt tables + the cached
  permutation of the current epoch; the dataset's ids belong to the data, not the state);
- ``ms_per_1k_candidates``: wall time of ``propose`` + ``report`` + ``finish_step`` per 1,000 candidates
  (median over steps), rewards precomputed outside the timer, in a late-run state (60% of prompts
  asleep, so draws skip);
- ``save_s`` and ``load_s`` (load = ``Scheduler.load`` with freshly built sources, fingerprints included).

and the same for ``DictScheduler`` below: one Python dict entry per prompt, one Python step per
encounter, JSON state. ``--policy predictive`` measures ``policy="predictive"`` and, in the same run,
the design note's rule beside it (``seed_*`` keys and ``predictive_over_seed_*`` ratios; the design note
is the blog post this project implements: docs/concepts.md, "The design note"). The baseline is
measured at ``--dict-prompts`` (default 1M: a dict per prompt at 10M needs several GB) and its
per-prompt figures and save/load times are extrapolated linearly to ``--prompts`` (marked
``dict_extrapolated_from``). ``--screen K`` measures partial groups (``SchedulerConfig.screen_size=K``: a
candidate is then a screen of K rollouts or the rest of one); run by ``benchmarks/versus.py --script
benchmarks/scale.py`` against a tree without partial groups, that tree measures its whole groups, so the
ratio is the partial-group path against the old whole-group path, per candidate. The last line is one JSON
object.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
import tempfile
import time
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import numpy as np

import snooze

NAMES = ("math", "code", "logic")
SHARES = (0.5, 0.3, 0.2)
KIND_P = (0.5, 0.35, 0.1, 0.05)  # signal, too easy, too hard, flat
G = 8


def _sizes(n: int) -> list[int]:
    sizes = [int(n * s) for s in SHARES]
    sizes[0] += n - sum(sizes)
    return sizes


def _sources(n: int) -> dict[str, snooze.Source]:
    out, start = {}, 0
    for name, k in zip(NAMES, _sizes(n)):
        out[name] = snooze.Source.from_ids(name, np.arange(start, start + k, dtype=np.int64))
        start += k
    return out


def _rewards(rng: np.random.Generator, n: int) -> np.ndarray:
    """``[n, G]`` rewards with the KIND_P mix of outcomes (not timed)."""
    kind = rng.choice(4, size=n, p=KIND_P)
    out = np.empty((n, G))
    out[kind == 1] = 1.0
    out[kind == 2] = 0.0
    out[kind == 3] = 0.5
    sig = kind == 0
    out[sig] = rng.integers(0, 2, size=(int(sig.sum()), G))
    out[sig, 0], out[sig, 1] = 0.0, 1.0
    return out


def _config(
    mix: str = "quota", skip: str = "counter", policy: str = "snooze", screen: int | None = None
) -> snooze.SchedulerConfig:
    extra = {} if screen is None else {"screen_size": screen}  # (a tree without partial groups takes no screen_size)
    return snooze.SchedulerConfig(
        **extra,
        batch_size=256,
        gen_batch_size=1024,
        group_size=G,
        policy=policy,
        options=snooze.SnoozeOptions(factor=5, skip=skip) if policy == "snooze" else None,
        mix=mix,
        weights=dict(zip(NAMES, SHARES)),
        max_gen_rounds=4,
    )


def _late_run_predictive(sched: Any, rng: np.random.Generator) -> None:
    """``policy="predictive"``: 60% of prompts solved 3 times in a row and not due (predicted far below
    the stream's rate), the rest seen once with signal; the stream's rate at 0.5."""
    pol = sched._parts.policy
    pol.clock = 3 * pol.pass_size
    pol.rate[:] = (50.0, 100.0)
    pol.codes[:, :, 8] = (0.0, 100.0)  # E8 (eight or more too-easy groups): never signal
    for t in sched._parts.memory.tables:
        asleep = rng.random(t.n) < 0.6
        t.columns["code"][:] = np.where(asleep, 8, 1 + 8).astype(np.uint8)  # E8, or S+ run of one
        t.columns["looked"][:] = pol.clock  # just looked at: ages 0, periods of 4+ passes ahead
        t.streak[:] = np.where(asleep, 3, 0).astype(np.uint8)
    pol._update_low()


def _late_run(tables: list[Any], rng: np.random.Generator) -> None:
    """60% of prompts asleep with 1..5 encounters to go, as late in a run (``skip="history"``: 60% solved
    so far, the rest at random pass rates)."""
    for t in tables:
        asleep = rng.random(t.counter.shape[0]) < 0.6
        if "history" in t.columns:
            t.columns["history"][:] = np.where(asleep, 255, rng.integers(1, 256, size=asleep.shape[0])).astype(np.uint8)
        else:
            t.counter[asleep] = rng.integers(1, 6, size=int(asleep.sum()), dtype=np.int32)
        t.flags[asleep] |= 2
        t.recount()


def _time_steps(sched: Any, steps: int, rng: np.random.Generator) -> float:
    """ms per 1,000 candidates of propose + report + finish_step (rewards made outside the timer).

    The median over steps of each step's cost per candidate: robust to other processes on a shared machine."""
    k = getattr(sched.config, "screen_size", None)
    per_step = []
    for _ in range(steps):
        spent, n = 0.0, 0
        while (
            sched.wants_round() if k is not None else not sched.batch_full and sched.round < sched.config.max_gen_rounds
        ):
            t0 = time.perf_counter()
            cands = sched.propose()
            spent += time.perf_counter() - t0
            if not cands:
                break
            parts = _reports(cands, k, rng)
            t0 = time.perf_counter()
            for part, r in parts:
                if len(part):
                    sched.report(part, r)
            spent += time.perf_counter() - t0
            n += len(cands)
        t0 = time.perf_counter()
        sched.finish_step()
        spent += time.perf_counter() - t0
        per_step.append(1e6 * spent / max(n, 1))
    return float(np.median(per_step))


def _reports(cands: Any, k: int | None, rng: np.random.Generator) -> list[tuple[Any, np.ndarray]]:
    """A round's reports, rewards made outside the timer: one of whole groups; with partial groups (``--screen K``)
    two of one width each (its rests, ``G - K`` rewards, and its screens, ``K``), the fast spelling of a mixed round.
    A candidate is one handed out by ``propose`` (a screen or a rest); the loop then runs while ``wants_round()``."""
    if k is None:
        return [(cands, _rewards(rng, len(cands)))]
    rest = cands.n != k
    return [
        (cands[rest], _rewards(rng, int(rest.sum()))[:, k:]),
        (cands[~rest], _rewards(rng, int((~rest).sum()))[:, :k]),
    ]


def bench_snooze(
    n: int, steps: int, mix: str = "quota", skip: str = "counter", policy: str = "snooze", screen: int | None = None
) -> dict[str, float]:
    rng = np.random.default_rng(0)
    sched = snooze.Scheduler(_sources(n), _config(mix, skip, policy, screen), seed=0)
    if policy == "predictive":
        _late_run_predictive(sched, rng)
    else:
        _late_run(sched._parts.memory.tables, rng)
    _time_steps(sched, 3, rng)  # warm-up: each dataset's epoch permutation is drawn once per epoch
    ms = _time_steps(sched, steps, rng)
    columns = sum(int(c.nbytes) for t in sched._parts.memory.tables for c in t.columns.values())
    memory = columns + sum(s.permutation().nbytes for s in sched._parts.streams)
    with tempfile.TemporaryDirectory(prefix="snooze-scale-") as tmp:
        t0 = time.perf_counter()
        file = sched.save(Path(tmp) / "ckpt")
        save_s = time.perf_counter() - t0
        fresh = _sources(n)
        t0 = time.perf_counter()
        loaded = snooze.Scheduler.load(Path(tmp) / "ckpt", fresh)
        load_s = time.perf_counter() - t0
        size = file.stat().st_size
    assert loaded.step_index == sched.step_index
    return {
        "bytes_per_prompt": size / n,
        "memory_bytes_per_prompt": memory / n,
        "ms_per_1k_candidates": ms,
        "save_s": save_s,
        "load_s": load_s,
    }


class DictScheduler:
    """The straightforward implementation: ``{(dataset, id): [counter, easy_snoozed]}``, Python loops."""

    def __init__(self, sizes: list[int], cfg: snooze.SchedulerConfig, seed: int) -> None:
        self.config, self.seed, self.sizes = cfg, seed, sizes
        self.prompts: dict[tuple[str, int], list[int]] = {}
        start = 0
        for name, k in zip(NAMES, sizes):
            for i in range(start, start + k):
                self.prompts[(name, i)] = [0, 0]
            start += k
        self.ids = [list(range(s, s + k)) for s, k in zip(np.cumsum([0, *sizes[:-1]]).tolist(), sizes)]
        self.epoch, self.cursor = [0] * len(NAMES), [0] * len(NAMES)
        self.orders = [self._order(d) for d in range(len(NAMES))]
        self.pending: dict[int, tuple[str, int]] = {}
        self.ticket, self.round, self.batch, self.totals = 0, 0, [], {"gen": 0, "skipped": 0, "new": 0, "regressed": 0}

    def _order(self, d: int) -> list[int]:
        rng = np.random.default_rng([self.seed, zlib.crc32(NAMES[d].encode()), self.epoch[d]])
        return [self.ids[d][i] for i in rng.permutation(self.sizes[d]).tolist()]

    @property
    def batch_full(self) -> bool:
        return len(self.batch) >= self.config.batch_size

    def propose(self) -> list[tuple[int, str, int]]:
        self.round += 1
        out = []
        for d, share in enumerate(SHARES):
            want = round(self.config.gen_size * share)
            while want > 0:
                pid = self.orders[d][self.cursor[d]]
                self.cursor[d] += 1
                if self.cursor[d] == self.sizes[d]:
                    self.epoch[d], self.cursor[d] = self.epoch[d] + 1, 0
                    self.orders[d] = self._order(d)
                p = self.prompts[(NAMES[d], pid)]
                if p[0] > 0:
                    p[0] -= 1
                    self.totals["skipped"] += 1
                    continue
                self.pending[self.ticket] = (NAMES[d], pid)
                out.append((self.ticket, NAMES[d], pid))
                self.ticket += 1
                want -= 1
        return out

    def report(self, cands: list[tuple[int, str, int]], rewards: np.ndarray) -> None:
        lo, hi = self.config.reward_range
        for (t, name, pid), row in zip(cands, rewards.tolist()):
            key = self.pending.pop(t)
            mean, spread = sum(row) / len(row), max(row) - min(row)
            p = self.prompts[key]
            self.totals["gen"] += 1
            if spread > 0:
                if p[1]:
                    p[1], self.totals["regressed"] = 0, self.totals["regressed"] + 1
                if len(self.batch) < self.config.batch_size:
                    self.batch.append((name, pid, row))
            elif mean >= lo + self.config.easy_threshold * (hi - lo):
                self.totals["new"] += p[0] == 0
                p[0] += self.config.options.factor
                p[1] = 1

    def finish_step(self) -> list[tuple[str, int, list[float]]]:
        batch, self.batch, self.round = self.batch, [], 0
        return batch

    def save(self, path: Path) -> None:
        state = {
            "prompts": [[k[0], k[1], v[0], v[1]] for k, v in self.prompts.items()],
            "epoch": self.epoch,
            "cursor": self.cursor,
            "ticket": self.ticket,
            "totals": self.totals,
        }
        path.write_text(json.dumps(state))

    def load(self, path: Path) -> None:
        state = json.loads(path.read_text())
        self.prompts = {(a, b): [c, e] for a, b, c, e in state["prompts"]}
        self.epoch, self.cursor, self.ticket = state["epoch"], state["cursor"], state["ticket"]
        self.orders = [self._order(d) for d in range(len(NAMES))]


def bench_dict(n: int, steps: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    gc.collect()
    tracemalloc.start()
    sched = DictScheduler(_sizes(n), _config(), seed=0)
    mem = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    for key in sched.prompts:  # the same late-run state: 60% asleep
        if rng.random() < 0.6:
            sched.prompts[key][:] = [int(rng.integers(1, 6)), 1]
    ms = _time_steps(sched, steps, rng)
    with tempfile.TemporaryDirectory(prefix="snooze-scale-dict-") as tmp:
        path = Path(tmp) / "state.json"
        t0 = time.perf_counter()
        sched.save(path)
        save_s = time.perf_counter() - t0
        size = path.stat().st_size
        t0 = time.perf_counter()
        sched.load(path)
        load_s = time.perf_counter() - t0
    return {
        "memory_bytes_per_prompt": mem / n,
        "bytes_per_prompt": size / n,
        "ms_per_1k_candidates": ms,
        "save_s": save_s,
        "load_s": load_s,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=10_000_000, help="prompts over the 3 datasets")
    p.add_argument("--dict-prompts", type=int, default=1_000_000, help="prompts for the dict baseline (extrapolated)")
    p.add_argument("--steps", type=int, default=100, help="timed training steps (about 1,000 candidates each)")
    p.add_argument("--mix", choices=("quota", "stream"), default="quota", help="the scheduler's mixing mode")
    p.add_argument("--skip", choices=("counter", "history"), default="counter", help="the snooze skipping rule")
    p.add_argument(
        "--policy",
        choices=("snooze", "predictive"),
        default="snooze",
        help="the policy measured (default snooze); predictive is measured beside snooze, the rule of the design "
        "note (the blog post this project implements: docs/concepts.md, 'The design note')",
    )
    p.add_argument(
        "--screen",
        type=int,
        default=None,
        help="partial groups: SchedulerConfig.screen_size (K of the 8 rollouts first); ms per 1,000 candidates then "
        "counts screens and rests alike (docs/concepts.md, 'Partial groups')",
    )
    args = p.parse_args(argv)
    if args.screen is not None and "screen_size" not in {f.name for f in dataclasses.fields(snooze.SchedulerConfig)}:
        # an older tree (benchmarks/versus.py --script runs this file with it): its whole groups are the baseline
        print(f"--screen {args.screen}: this snooze has no partial groups; measuring whole groups", file=sys.stderr)
        args.screen = None
    n, nd = args.prompts, min(args.dict_prompts, args.prompts)
    if args.policy == "predictive":  # side by side: warm both code paths (imports, first save) before timing either
        bench_snooze(3000, 2, args.mix)
        bench_snooze(3000, 2, args.mix, policy="predictive")
    ours = bench_snooze(n, args.steps, args.mix, args.skip, args.policy, args.screen)
    seed = bench_snooze(n, args.steps, args.mix) if args.policy == "predictive" else None
    base = bench_dict(nd, args.steps)
    scale = n / nd
    out: dict[str, Any] = {
        "prompts": n,
        "mix": args.mix,
        "skip": args.skip,
        "policy": args.policy,
        "screen": args.screen,  # the screen_size measured (None: whole groups)
        **{k: round(v, 4) for k, v in ours.items()},
    }
    out.update({f"dict_{k}": round(v, 4) for k, v in base.items() if k not in ("save_s", "load_s")})
    out.update({"dict_save_s": round(base["save_s"] * scale, 3), "dict_load_s": round(base["load_s"] * scale, 3)})
    out["dict_extrapolated_from"] = nd
    for key in ("bytes_per_prompt", "memory_bytes_per_prompt", "ms_per_1k_candidates", "save_s", "load_s"):
        out[f"ratio_{key}"] = round(out[f"dict_{key}"] / max(out[key], 1e-9), 1)
    if seed is not None:
        out.update({f"seed_{k}": round(v, 4) for k, v in seed.items()})
        out.update({f"predictive_over_seed_{k}": round(ours[k] / max(seed[k], 1e-9), 3) for k in seed})
    out["targets_met"] = bool(
        out["bytes_per_prompt"] <= 16 and out["ms_per_1k_candidates"] <= 1.0 and out["save_s"] + out["load_s"] <= 2.0
    )
    for key in ("bytes_per_prompt", "memory_bytes_per_prompt", "ms_per_1k_candidates", "save_s", "load_s"):
        print(
            f"{key:>26}: snooze {out[key]:>10.4g}   dict {out['dict_' + key]:>10.4g}   "
            f"dict/snooze {out['ratio_' + key]:>8.1f}x"
        )
    if seed is not None:
        for key in ("bytes_per_prompt", "memory_bytes_per_prompt", "ms_per_1k_candidates", "save_s", "load_s"):
            print(
                f"{key:>26}: predictive {ours[key]:>10.4g}   snooze {seed[key]:>10.4g}   "
                f"predictive/snooze {out['predictive_over_seed_' + key]:>8.3f}"
            )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
