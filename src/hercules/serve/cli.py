"""``hercules serve``: the reward service's command."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import click

from hercules.cli_common import evaluation_options, fail

from hercules.interrupt import exit_stopped, signal_name, stop_on_signals
from hercules.reward import BASELINES, TRANSFORMS


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0 for all).")
@click.option("--port", default=8700, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", type=int, default=None,
              help="Evaluations at once (local: default two per GPU; Ray on CPU: number of actors).")
@click.option("--max-timed", type=int, default=None,
              help="Timed evaluations at once, the rest queued (default: what the host can time honestly: "
                   "on a CPU one per HERCULES_WORKER_THREADS (2) cores, so none shares the cores another is "
                   "timing; on GPUs --workers, bounded by the cores, each measurement holding its GPU alone).")
@click.option("--ray-address", default=None, help="Evaluate on a Ray cluster (one actor per GPU); 'local' "
              "starts a local Ray instance.")
@click.option("--retries", default=2, show_default=True, type=click.IntRange(min=0),
              help="Re-runs of an evaluation whose worker or actor was killed under it.")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SQLite verdict cache, kept across restarts (default: serve-verdicts.sqlite in the cache "
                   "folder, $HERCULES_CACHE_DIR or ~/.cache/hercules; the path is printed at start).")
@click.option("--no-cache", is_flag=True, help="Evaluate every submission, even one seen before.")
@click.option("--queue-size", default=256, show_default=True, type=int, help="Submissions waiting at most.")
@click.option("--admission-timeout", default=30.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds a submission waits for room in a full queue before HTTP 429.")
# Every evaluation flag but --no-timing: a reward is a speedup.
@evaluation_options(exclude=("no_timing",), check_present="ray_address")
@click.option("--reward-transform", type=click.Choice(TRANSFORMS), default="log", show_default=True)
@click.option("--reward-baseline", type=click.Choice(BASELINES), default="eager", show_default=True,
              help="Which speedup the reward is computed from.")
@click.option("--normalize", is_flag=True, help="Normalise scored rewards by the running mean and std.")
@click.option("--clip-min", type=float, default=None)
@click.option("--clip-max", type=float, default=None)
@click.option("--incorrect-penalty", default=-1.0, show_default=True, type=float,
              help="Reward of incorrect, failing or code-less submissions.")
@click.option("--flagged-penalty", default=-1.0, show_default=True, type=float,
              help="Reward of correct submissions that an anti-hacking check flagged.")
def serve_command(host, port, workers, max_timed, ray_address, retries, cache_path, no_cache, queue_size,
                  admission_timeout, evaluation, reward_transform, reward_baseline, normalize,
                  clip_min, clip_max, incorrect_penalty, flagged_penalty) -> None:
    """Serve verdicts and rewards over HTTP for RL trainers.

    POST /v1/evaluate with a problem (built-in name or KernelBench code) and a candidate (ModelNew
    code, or a model's completion to extract it from); get back the verdict and a reward. Batches go
    to /v1/evaluate/batch; /health and /metrics report the queue, latency and cache hits.

    Every error is one JSON line ({"error": ...}). Ctrl-C (SIGINT) or SIGTERM stops it within
    seconds: evaluations in flight are killed and answered as lost (nothing of them cached), exit
    status 130 (143).

    \b
    Examples:
      hercules serve --port 8700
      hercules serve --device cpu --workers 2 --budget 0.05 --trials 2 --cache runs/serve/verdicts.sqlite
      hercules serve --ray-address local --reward-baseline best --normalize --clip-min -3 --clip-max 3
      python -c 'import json; print(json.dumps({"problem": "mish_fp32", "candidate": open("src/hercules/suite/candidates/mish_fp32/torch_mish.py").read()}))' | curl -s localhost:8700/v1/evaluate -d @-
    """
    from hercules.executor import make_executor
    from hercules.reward import RewardConfig
    from hercules.serve.app import run_server
    from hercules.serve.service import build_service

    if queue_size < 1:
        fail("--queue-size must be at least 1")
    if workers is not None and workers < 1:
        fail("--workers must be at least 1")
    if max_timed is not None and max_timed < 1:
        fail("--max-timed must be at least 1")
    try:
        reward = RewardConfig(transform=reward_transform, baseline=reward_baseline, normalize=normalize,
                              clip_min=clip_min, clip_max=clip_max, incorrect_penalty=incorrect_penalty,
                              flagged_penalty=flagged_penalty)
        executor = make_executor(ray_address=ray_address, device=evaluation.device, workers=workers, retries=retries)
    except (ValueError, RuntimeError) as exc:
        fail(str(exc))
    if cache_path is None:
        cache_path = evaluation.cache_dir / "serve-verdicts.sqlite"
    try:
        service = build_service(executor, reward=reward, cache_path=None if no_cache else cache_path,
                                queue_size=queue_size, admission_timeout_s=admission_timeout, base=evaluation,
                                max_timed=max_timed)
    except (OSError, sqlite3.Error) as exc:
        executor.close()
        fail(f"--cache {cache_path}: cannot open the verdict cache ({exc})")
    banner = (f"hercules serve: http://{host}:{port} on {', '.join(executor.devices)} "
              f"({service.limit.at_once} timed evaluation(s) at once: {service.limit.why}), "
              f"cache {'off' if no_cache else cache_path}")
    # SIGINT/SIGTERM: evaluations in flight killed and answered as lost (nothing cached), exit
    # status 130 or 143 within seconds. The banner comes once the address is bound: an address
    # that cannot be used gets its one error line, not a banner of a server that never served.
    with stop_on_signals() as stop:
        try:
            run_server(service, host=host, port=port, print_fn=lambda *_: click.echo(banner, err=True))
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    if stop.is_set():
        click.echo(f"hercules serve: stopped by {signal_name()}", err=True)
        exit_stopped()
