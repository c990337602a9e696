"""The CUDA debugging benchmark (``hercules debug``): can a fixer repair broken CUDA without
giving up its speed?

Stages, each in its own module, frozen records between them:

    corpus      CUDABeaver-layout instances, validated (``load_corpus``); ``export`` adds new ones
    workspace   a fresh copy of the testbench per attempt; build and test in subprocesses
    reproduce   each instance's broken file and reference run first and compared with its label
                (reproduced / not reproduced / corpus defect / untested, with why); pass@k is
                scored over the reproduced instances; cached per instance, toolchain and device
    kbtask      KernelBench-style instances through the evaluation core (never a second evaluator)
    classifier  raw evidence -> failure category (build/link/env/OOM/illegal access/...)
    gate        performance gate (speedup >= p) and the degeneration detector
    fixers      replay / null / degenerate / OpenAI-compatible HTTP
    protocol    attempts, iterations, feedback level, history, temperature, seed
    metrics     unbiased pass@k, the p sweep (the report's headline), breakdowns; stagnation modes per trajectory
    store       SQLite + run directory (resumable); report: markdown and HTML
"""
