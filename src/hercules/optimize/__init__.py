"""The optimisation loop (``hercules optimize``): contrastive, score-annotated prompting.

For each problem a pool of evaluated variants (seeded with the reference at 1.0x and any given
candidates). Each round samples exemplars by speedup bucket, renders a prompt with their measured
speedups and verdicts, asks a model backend for new code, evaluates it through the evaluation
core (``hercules.harness.evaluate``, run by ``hercules.executor``: threads or Ray workers) and
adds it to the pool. Only a verdict with status ``ok`` and no flag can ever be the best;
everything else stays as a negative exemplar.

Modules, one concern each:

    records    the frozen records passed between the stages (Variant, Slot, ...)
    pool       the variants of one problem, the best honest one
    sampling   exemplars by speedup bucket (temperature-scaled softmax over buckets)
    hardware   the device facts shown in the prompt (measured ceilings, SM count, CPU facts)
    prompt     rendering: problem, exemplars, hardware, rules, the requested answer shape
    extract    the code out of a completion
    backends   OpenAI-compatible (async, rate-limited, token usage) and replay backends
    budget     rounds, tokens, evaluation minutes, plateau
    storage    SQLite + run directory: every prompt, completion, code and verdict; resume
    tags       optimisation techniques read from the code
    loop       the orchestration
    report     markdown + HTML report, best candidate files
    export     failing variants to the debugging corpus
    cli        ``hercules optimize``
"""
