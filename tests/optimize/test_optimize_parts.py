"""The optimiser's stages one by one: extraction, sampling, prompts, tags, budgets, storage,
backends (against a local scripted OpenAI-compatible server: scripted answers, no model)."""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from pathlib import Path

import pytest
from optimize_llm_server import OptimizeLLMServer, fenced

from hercules.harness.records import Speedups, Status, Verdict
from hercules.llm.client import ChatClient
from hercules.optimize.backends import (
    OpenAIBackend,
    RateLimiter,
    ReplayBackend,
    Sampling,
    replay_programs,
)
from hercules.optimize.budget import (
    Budget,
    Spend,
    plateaued,
    problem_stop,
    run_exhausted,
)
from hercules.optimize.extract import extract_code
from hercules.optimize.hardware import HardwareFacts
from hercules.optimize.pool import Pool
from hercules.optimize.prompt import render_prompt
from hercules.optimize.records import NO_CODE, Completion, Prompt, Slot, Variant
from hercules.optimize.sampling import (
    FAILED,
    bucket_index,
    buckets,
    sample_exemplars,
    softmax,
)
from hercules.optimize.storage import RunStore
from hercules.optimize.tags import technique_tags
from hercules.problems.model import Problem, ProblemFormatError

PROBLEM_CODE = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return x * torch.tanh(F.softplus(x))


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''
MODEL_NEW = "import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return F.mish(x)\n"


def _problem() -> Problem:
    return Problem(name="mish_small", code=PROBLEM_CODE, source="test")


def _verdict(status: Status, eager: float | None, flags: tuple[str, ...] = (), error: str | None = None) -> Verdict:
    return Verdict(status=status, correct=status in (Status.OK, Status.SUSPICIOUS), flags=flags, error=error,
                   max_abs_err=0.0, rel_err=0.0, ref_ms=1.0, cand_ms=1.0 / eager if eager else None,
                   speedup=Speedups(eager=eager, best=eager), sol_fraction=None, baselines_ms={"eager": 1.0},
                   seconds=2.0)


def _variant(round_: int, sample: int, status: Status, eager: float | None, flags=(), error=None, code=MODEL_NEW) -> Variant:
    return Variant(slot=Slot("mish_small", round_, sample), origin="model", code=code + f"# {round_}/{sample}\n",
                   status=status.value, reason=error, verdict=_verdict(status, eager, flags, error))


# ---- extraction ------------------------------------------------------------------------------
@pytest.mark.parametrize("text, found", [
    (fenced(MODEL_NEW), "fenced block"),
    ("Analysis...\n```py\n" + MODEL_NEW + "```\nDone.", "fenced block"),
    ("~~~python\n" + MODEL_NEW + "~~~\n", "fenced block"),
    ("The code:\n```python\n" + MODEL_NEW, "unterminated fenced block"),  # cut off by max_tokens
    ("Here it is.\n\n" + MODEL_NEW, "unfenced code"),
])
def test_extract_code_shapes(text, found):
    result = extract_code(text)
    assert result.reason == found
    assert "class ModelNew" in result.code and "F.mish(x)" in result.code
    assert "```" not in result.code and "~~~" not in result.code


def test_extract_prefers_last_parsing_python_block_and_ignores_reasoning():
    draft = MODEL_NEW.replace("F.mish(x)", "x  # draft")
    broken = MODEL_NEW.replace("return F.mish(x)", "return F.mish(x")
    cuda = "```cpp\n__global__ void k(float* x) {}\n```\n"
    text = (f"<think>```python\n{draft}```</think>\n" + cuda + f"```python\n{MODEL_NEW}```\n"
            f"Or perhaps:\n```python\n{broken}```\n")
    result = extract_code(text)
    assert result.reason == "fenced block"
    assert "return F.mish(x)\n" in result.code and "draft" not in result.code


def test_extract_reports_missing_code():
    assert extract_code("").code is None
    assert extract_code("I would use a fused kernel.").reason == "no code block defining class ModelNew"
    assert extract_code("```python\nprint(1)\n```").code is None


# ---- pool and sampling -----------------------------------------------------------------------
def test_only_an_ok_verdict_without_flags_can_be_best():
    pool = Pool(_problem())
    pool.add(_variant(1, 0, Status.OK, 1.2))
    pool.add(_variant(1, 1, Status.SUSPICIOUS, 9.0, ("background_thread",), "threads left running"))
    pool.add(_variant(2, 0, Status.INCORRECT, None, ("result_cache",), "stale outputs"))
    # An ok status that nonetheless carries a flag must not win either (defence in depth).
    pool.add(_variant(2, 1, Status.OK, 50.0, ("side_stream",)))
    assert pool.best().name == "r1s0"
    assert pool.best_speedup() == pytest.approx(1.2)
    assert pool.best(max_round=0) is None
    assert pool.variants[0].name == "r0s0"  # the reference anchors the pool


def test_softmax_temperature():
    cold, hot = softmax([0.0, math.log(2.0)], 0.1), softmax([0.0, math.log(2.0)], 100.0)
    assert cold[1] > 0.99 and abs(hot[0] - hot[1]) < 0.01
    with pytest.raises(ValueError):
        softmax([1.0], 0.0)


def test_buckets_and_exemplars_one_per_bucket():
    pool = Pool(_problem())
    for i, s in enumerate((0.5, 1.3, 1.35, 2.5, 4.0)):
        pool.add(_variant(1, i, Status.OK, s))
    pool.add(_variant(2, 0, Status.INCORRECT, None, (), "wrong values"))
    assert bucket_index(1.0, True) == 1 and bucket_index(4.0, True) == 5 and bucket_index(9.0, False) == FAILED
    found = {b.index: len(b.members) for b in buckets(pool)}
    assert found == {FAILED: 1, 0: 1, 1: 1, 2: 2, 4: 1, 5: 1}
    picks = sample_exemplars(pool, 4, 1.0, random.Random(1))
    assert len(picks) == 4
    assert len({bucket_index(p.speedup(), p.honest or p.status == "reference") for p in picks}) == 4
    honest = [p.speedup() for p in picks if p.honest or p.status == "reference"]
    assert honest == sorted(honest)  # slowest first, best last
    # Cold sampling goes for the fastest buckets; hot sampling reaches the failures too.
    cold = [sample_exemplars(pool, 1, 0.05, random.Random(i))[0].speedup() for i in range(20)]
    assert all(s == 4.0 for s in cold)
    hot = {sample_exemplars(pool, 1, 50.0, random.Random(i))[0].status for i in range(60)}
    assert "incorrect" in hot


# ---- prompt ----------------------------------------------------------------------------------
def test_prompt_carries_exemplars_speedups_verdicts_hardware_and_rules():
    pool = Pool(_problem())
    pool.add(_variant(1, 0, Status.OK, 1.75))
    pool.add(_variant(1, 1, Status.SUSPICIOUS, 3.0, ("reference_fallback",), "except handler computes the result"))
    hw = HardwareFacts(device="cuda", name="NVIDIA H200", sm_count=132, memory_gib=140, l2_mib=60, capability="9.0",
                       bandwidth_gbs=4240.0, matmul_tflops={"bfloat16": 790.0})
    prompt = render_prompt(pool, pool.variants, hw)
    text = prompt.user
    assert "# Task: make `mish_small` faster" in text and PROBLEM_CODE.strip() in text
    assert "vs eager 1.75x" in text and "vs eager 3.00x" in text
    assert "suspicious, flags: reference_fallback -- except handler computes the result (REJECTED)" in text
    assert "NVIDIA H200" in text and "streaming multiprocessors: 132" in text and "4,240 GB/s" in text
    assert "790.0 TFLOP/s" in text
    assert "No caching of results" in text and "Performance analysis" in text and "Algorithm design" in text
    assert prompt.exemplars == ("r0s0", "r1s0", "r1s1")


# ---- tags ------------------------------------------------------------------------------------
def test_technique_tags():
    cuda = ('from torch.utils.cpp_extension import load_inline\nsrc = """__global__ void k(float4* x) {'
            ' __shared__ float t[32]; float v = expf(x[0].x); v = tanhf(v); v += __shfl_down_sync(0xffffffff, v, 1);}"""\n'
            'class ModelNew: pass\n')
    tags = technique_tags(cuda, PROBLEM_CODE)
    assert {"custom_cuda_kernel", "shared_memory_tiling", "vectorized_memory", "warp_primitives", "fusion"} <= set(tags)
    graphs = "import torch\ng = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    pass\nclass ModelNew: pass\n"
    assert "cuda_graphs" in technique_tags(graphs, PROBLEM_CODE)
    assert {"algebraic_rewrite", "fusion"} <= set(technique_tags(MODEL_NEW, PROBLEM_CODE))
    layout = "class ModelNew:\n    def forward(self, x):\n        return x.contiguous(memory_format=torch.channels_last)\n"
    assert "memory_layout" in technique_tags(layout, PROBLEM_CODE)
    assert "in_place" not in technique_tags("class ModelNew:\n    def __init__(self):\n        super().__init__()\n")


# ---- budgets ---------------------------------------------------------------------------------
def test_budget_and_plateau():
    budget = Budget(rounds=5, max_tokens=1000, gpu_minutes=1.0, patience=2, min_gain=0.05)
    assert run_exhausted(budget, Spend(999, 59.0)) is None
    assert "token budget" in run_exhausted(budget, Spend(1000, 0.0))
    assert "evaluation budget" in run_exhausted(budget, Spend(0, 60.0))
    assert not plateaued(budget, [None, 1.2])
    assert plateaued(budget, [1.0, 1.2, 1.21, 1.22])  # under 5% over two rounds
    assert not plateaued(budget, [1.0, 1.2, 1.21, 1.3])
    assert plateaued(budget, [None, None, None])
    assert problem_stop(budget, 5, [1.0]) == "5 rounds done"


# ---- storage ---------------------------------------------------------------------------------
def test_run_store_round_trip(tmp_path):
    store = RunStore(tmp_path / "run")
    slot = Slot("mish_small", 1, 0)
    prompt = Prompt(system="sys", user="user text", exemplars=("r0s0",))
    store.record_call(slot, prompt, Completion(text=fenced(MODEL_NEW), model="m", prompt_tokens=7, completion_tokens=5))
    variant = _variant(1, 0, Status.SUSPICIOUS, 2.0, ("background_thread",), "threads left running")
    store.record_variant(variant)
    store.record_variant(Variant(slot=Slot("mish_small", 1, 1), origin="model", code="", status=NO_CODE, reason="empty"))
    row = store.evaluation_started(slot, variant.code_hash)
    store.evaluation_finished(row)
    store.close()

    again = RunStore(tmp_path / "run")
    got = again.variants("mish_small")
    assert [v.name for v in got] == ["r1s0", "r1s1"]
    assert got[0].verdict.flags == ("background_thread",) and got[0].verdict.speedup.eager == 2.0
    assert got[0].code == variant.code and got[1].status == NO_CODE
    assert again.call(slot)[0] == prompt and again.call(slot)[1].completion_tokens == 5
    assert again.tokens_spent() == 12 and again.eval_seconds() == 2.0
    assert again.evaluations()[0]["finished_at"] is not None
    folder = tmp_path / "run" / "problems" / "mish_small" / "r1s0"
    assert "user text" in (folder / "prompt.md").read_text()
    assert json.loads((folder / "verdict.json").read_text())["status"] == "suspicious"


# ---- backends --------------------------------------------------------------------------------
def test_openai_backend_counts_tokens_retries_and_limits_rate():
    prompt = Prompt(system="s", user="# Task: make `p` faster\n" + "x" * 400)
    with OptimizeLLMServer({"p": [fenced(MODEL_NEW)] * 4}, fail_first=1) as server:
        client = ChatClient(base_url=server.base_url, model="scripted", retries=2, backoff_s=0.05)
        backend = OpenAIBackend(client, Sampling(temperature=0.3, max_tokens=256, top_p=0.9), concurrency=4,
                                requests_per_s=20.0)

        async def three():
            return await asyncio.gather(*(backend.complete(Slot("p", 1, i), prompt) for i in range(3)))

        started = time.perf_counter()
        results = asyncio.run(three())
        elapsed = time.perf_counter() - started
    assert all(r.error is None and "ModelNew" in r.text for r in results)
    assert sum(r.attempts for r in results) == 4  # the 503 was retried
    assert all(r.prompt_tokens == len(prompt.user) // 4 and not r.tokens_estimated for r in results)
    assert elapsed >= 0.09  # three starts at most 20 per second
    body = server.requests[-1]["body"]
    assert body["temperature"] == 0.3 and body["max_tokens"] == 256 and body["top_p"] == 0.9


def test_openai_backend_estimates_tokens_and_survives_a_dead_server():
    prompt = Prompt(system="s", user="# Task: make `p` faster")
    with OptimizeLLMServer({"p": ["no code here"]}, usage=False) as server:
        result = asyncio.run(OpenAIBackend(ChatClient(base_url=server.base_url, model="m")).complete(Slot("p", 1, 0), prompt))
        port = server.httpd.server_address[1]
    assert result.tokens_estimated and result.completion_tokens == len("no code here") // 4
    dead = ChatClient(base_url=f"http://127.0.0.1:{port}/v1", model="m", retries=0, timeout=2)
    failed = asyncio.run(OpenAIBackend(dead).complete(Slot("p", 1, 0), prompt))
    assert failed.error and failed.text == ""


def test_rate_limiter_spaces_starts():
    async def starts():
        limiter = RateLimiter(50.0)
        times = []
        for _ in range(4):
            await limiter.wait()
            times.append(time.monotonic())
        return times

    times = asyncio.run(starts())
    assert times[-1] - times[0] >= 0.055


def test_replay_backend_from_a_cuda_l1_file(tmp_path):
    release = tmp_path / "h200.json"
    records = [{"level_id": 1, "task_id": 7, "ref_code": PROBLEM_CODE, "custom_code": MODEL_NEW, "score_default": 1.9},
               {"level_id": 1, "task_id": 8, "ref_code": PROBLEM_CODE, "custom_code": None}]
    release.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    from hercules.problems.loaders import load_source

    problems = load_source(release).problems
    programs = replay_programs(release, problems)
    assert programs == {"level1_task7": [MODEL_NEW]}
    backend = ReplayBackend(programs, samples_per_round=1)
    first = asyncio.run(backend.complete(Slot("level1_task7", 1, 0), Prompt("", "")))
    assert extract_code(first.text).code.strip() == MODEL_NEW.strip()
    assert asyncio.run(backend.complete(Slot("level1_task7", 2, 0), Prompt("", ""))) is None
    with pytest.raises(ProblemFormatError):
        replay_programs(release, [_problem()])


# ---- the release-format file of the GPU benchmark --------------------------------------------
RELEASE = Path(__file__).resolve().parents[2] / "benchmarks" / "optimize_replay_h200.jsonl"


def test_benchmark_release_file_holds_well_formed_cuda_candidates():
    from hercules.problems.loaders import load_source

    loaded = load_source(RELEASE)
    assert loaded.kind == "cuda-l1" and len(loaded.problems) == 5 and len(loaded.candidates) == 4
    for candidate in loaded.candidates:
        code = candidate.code
        assert extract_code(fenced(code)).code.strip() == code.strip()
        assert "class ModelNew" in code and "load_inline(" in code and "getCurrentCUDAStream" in code
        assert code.count("<<<") == code.count("C10_CUDA_KERNEL_LAUNCH_CHECK()")  # every launch checked
        assert "use_fast_math" not in code  # fp32 accuracy: no approximate maths
        assert "custom_cuda_kernel" in technique_tags(code)


def test_replay_on_a_machine_without_the_device_has_no_best(tmp_path):
    """CUDA candidates are `skipped` on the CPU: skipped is not ok, so there is no best."""
    from click.testing import CliRunner

    from hercules.cli import main

    done = CliRunner().invoke(main, ["optimize", "--backend", "replay", "--replay", str(RELEASE), "--limit", "2",
                                     "--device", "cpu", "--baselines", "eager", "--cache-dir", str(tmp_path / "c"),
                                     "--out", str(tmp_path / "run"), "--json"])
    assert done.exit_code == 0, done.output
    problems = json.loads(done.stdout)["problems"]
    assert [p["name"] for p in problems] == ["level1_task1", "level1_task2"]
    for p in problems:
        assert p["best_status"] is None and p["best_code_path"] is None and p["statuses"] == {"skipped": 1}


def test_failed_model_calls_leave_no_variant_and_are_asked_again_on_resume(tmp_path):
    """A server that cannot be reached stops the problem with the error; the slots stay open, and
    the rerun (server back) asks for them again. The scripted answer is a CUDA candidate, which
    the core reports `skipped` at once on a machine without a GPU (no evaluation cost here)."""
    from hercules.executor import make_executor
    from hercules.harness.evaluate import EvalOptions
    from hercules.optimize.loop import FAILED_CALL, LoopConfig, Optimizer

    cuda = RELEASE.read_text().splitlines()[0]
    code = json.loads(cuda)["custom_code"]
    problem = Problem(name="p", code=PROBLEM_CODE, source="test")
    hardware = HardwareFacts(device="cpu", name="test cpu", cpu_cores=2)
    config = LoopConfig(samples=2, budget=Budget(rounds=2),
                        eval_options=EvalOptions(device="cpu", baselines=("eager",), cache_dir=tmp_path / "cache"))

    def run(base_url: str) -> dict:
        store = RunStore(tmp_path / "run")
        executor = make_executor(device="cpu", workers=1)
        backend = OpenAIBackend(ChatClient(base_url=base_url, model="m", retries=0, timeout=5))
        try:
            return asyncio.run(Optimizer([problem], backend, executor, store, hardware, config).run())
        finally:
            executor.close()
            store.close()

    with OptimizeLLMServer({}) as server:
        dead = server.base_url
    states = run(dead)
    assert states["p"].stop_reason.startswith(FAILED_CALL) and states["p"].rounds_done == 1
    store = RunStore(tmp_path / "run")
    assert [v.status for v in store.variants("p")] == ["reference"]
    assert store.call(Slot("p", 1, 0))[1].error
    store.close()

    with OptimizeLLMServer({"p": [fenced(code)] * 4}) as server:
        states = run(server.base_url)
        asked = len(server.requests)
    assert asked == 4 and states["p"].rounds_done == 2 and states["p"].stop_reason == "2 rounds done"
    store = RunStore(tmp_path / "run")
    statuses = [v.status for v in store.variants("p") if v.origin == "model"]
    assert statuses == ["skipped"] * 4 and store.call(Slot("p", 1, 0))[1].error is None
    store.close()


def test_seed_candidates_and_a_replay_folder(tmp_path):
    """--candidates seeds round 0, a folder DIR/<problem>/*.py replays programs in order; CUDA
    programs are `skipped` at once on the CPU, which keeps this test free of evaluation cost."""
    from click.testing import CliRunner

    from hercules.cli import main

    cuda = json.loads(RELEASE.read_text().splitlines()[0])["custom_code"]
    problem = tmp_path / "mish_small.py"
    problem.write_text(PROBLEM_CODE)
    for folder, count in (("seeds", 1), ("replay", 2)):
        (tmp_path / folder / "mish_small").mkdir(parents=True)
        for i in range(count):
            (tmp_path / folder / "mish_small" / f"{i}.py").write_text(cuda + f"\n# {folder} {i}\n")
    done = CliRunner().invoke(main, ["optimize", "--problem", str(problem), "--candidates", str(tmp_path / "seeds"),
                                     "--backend", "replay", "--replay", str(tmp_path / "replay"), "--rounds", "3",
                                     "--samples", "1", "--device", "cpu", "--cache-dir", str(tmp_path / "c"),
                                     "--out", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    assert "mish_small" in done.stdout and "Hercules optimize" in done.stdout  # the table, on stdout
    store = RunStore(tmp_path / "run")
    got = [(v.name, v.origin, v.status, v.code.splitlines()[-1]) for v in store.variants("mish_small")]
    store.close()
    assert got == [("r0s0", "reference", "reference", "    return []"), ("r0s1", "seed", "skipped", "# seeds 0"),
                   ("r1s0", "replay", "skipped", "# replay 0"), ("r2s0", "replay", "skipped", "# replay 1")]


def test_a_verdict_of_an_evaluation_the_stop_killed_is_not_stored(tmp_path):
    """The stop kills the workers under an evaluation a moment before the loop is cancelled; the
    failed verdict that comes back in that moment is the stop's doing and must leave the slot open
    (a rerun evaluates it), not be stored as the candidate's ``runtime_error``. The loop here is
    run without the cancellation (plain ``asyncio.run``), so only the drop can keep it out."""
    import signal
    import threading

    from hercules import interrupt
    from hercules.executor import make_executor
    from hercules.harness.evaluate import EvalOptions
    from hercules.optimize.loop import LoopConfig, Optimizer

    slow = PROBLEM_CODE.replace("class Model(", "class ModelNew(").replace(
        "    def forward(self, x):\n", "    def forward(self, x):\n        import time\n        time.sleep(60)\n")
    problem = Problem(name="p", code=PROBLEM_CODE, source="test")
    hardware = HardwareFacts(device="cpu", name="test cpu", cpu_cores=2)
    config = LoopConfig(samples=1, budget=Budget(rounds=1),
                        eval_options=EvalOptions(device="cpu", baselines=("eager",), trials=1,
                                                 cache_dir=tmp_path / "cache"))
    store = RunStore(tmp_path / "run")
    executor = make_executor(device="cpu", workers=1)
    backend = ReplayBackend({"p": [slow]}, label="replay")

    def stop_once_a_worker_runs() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(interrupt.descendants()) < 2:
            time.sleep(0.2)
        time.sleep(2.0)
        interrupt.request_stop(signal.SIGINT)

    stopper = threading.Thread(target=stop_once_a_worker_runs, daemon=True)
    stopper.start()
    try:
        asyncio.run(Optimizer([problem], backend, executor, store, hardware, config).run())
        assert interrupt.STOP.is_set(), "the stop never came: the test did not exercise the race"
    finally:
        stopper.join(timeout=130)
        interrupt.STOP.clear()
        executor.close()
    assert [v.status for v in store.variants("p")] == ["reference"]
    store.close()


def test_export_takes_only_failures_that_were_the_candidates(tmp_path):
    """``optimize export-failures`` makes debugging instances from the candidate's own failures; one
    whose cause was the harness or a kill from outside is not the candidate's code failing."""
    from dataclasses import replace as replaced

    from hercules.harness.records import Cause
    from hercules.optimize.export import export_failures

    store = RunStore(tmp_path / "run")
    store.add_problem(Problem(name="mish_small", code=PROBLEM_CODE, source="test"))
    for sample, cause in enumerate((Cause.CANDIDATE_ERROR, Cause.HARNESS, Cause.EXTERNAL_KILL)):
        failed = _variant(1, sample, Status.RUNTIME_ERROR, None, error=f"failed: {cause.value}")
        store.record_variant(replaced(failed, verdict=replaced(failed.verdict, cause=cause)))
    store.close()
    written = export_failures(tmp_path / "run", tmp_path / "corpus")
    assert len(written) == 1  # the candidate's own error (sample 0) alone
    assert "# 1/0" in (written[0] / "broken_start.py").read_text()
