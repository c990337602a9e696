"""``hercules serve``: an HTTP reward service for RL trainers, and trainer-side reward functions.

    problems.py   a problem given by built-in name or as code -> Problem
    cache.py      SQLite verdict cache keyed by the content hash of (problem, candidate, options)
    metrics.py    counters and latency percentiles for /metrics
    service.py    admission queue, in-flight de-duplication, cache, executor, reward (no HTTP)
    app.py        the aiohttp routes over the service
    client.py     a small standard-library client (used by the trainer-side reward functions)
    rl.py         TRL GRPO reward function and verl compute_score
    cli.py        the click command
"""
