"""Click commands ``generate`` and ``compile`` (registered in the top-level ``hercules`` group).

    hercules generate --preset tiny-llama --device cpu --new-tokens 32 --compare-eager --json
    hercules generate --preset qwen3-4b --new-tokens 128 --fidelity --json   # + the fidelity gate
    hercules compile --preset qwen3-1.7b --device cuda --json

With ``--json`` exactly one JSON object goes to stdout; logs and warnings go to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import warnings

import click


def _load(preset: str | None, checkpoint: str | None, device: str, dtype: str, seed: int):
    from .presets import build_model, get_preset, load_checkpoint

    if bool(preset) == bool(checkpoint):
        raise click.UsageError("give exactly one of --preset NAME or --checkpoint DIR")
    if preset:
        try:
            p = get_preset(preset)
        except KeyError as e:
            raise click.UsageError(str(e)) from None
        return build_model(p, dtype=dtype, device=device, seed=seed), p.name
    return load_checkpoint(checkpoint, dtype=dtype, device=device), checkpoint


def _device(device: str | None) -> str:
    if device:
        from hercules.cli_common import check_device

        return check_device(device)  # one line for a GPU that is not here, not torch's assertion
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _sync(device: str) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _common(f):
    opts = [
        click.option("--preset", default=None, help="tiny-llama, tiny-qwen3, llama-3.2-1b, qwen3-1.7b, qwen3-4b"),
        click.option("--checkpoint", default=None, type=click.Path(exists=True, file_okay=False),
                     help="local folder with config.json + safetensors"),
        click.option("--device", default=None, help="cuda or cpu (default: cuda if available)"),
        click.option("--dtype", default="auto", help="bf16 | fp16 | fp32 | auto (bf16 on CUDA, fp32 on CPU)"),
        click.option("--batch", default=1, show_default=True, type=click.IntRange(min=1)),
        click.option("--advisor", type=click.Choice(["rules", "none", "http"]), default="rules", show_default=True),
        click.option("--budget", default=48, show_default=True, type=click.IntRange(min=0),
                     help="measured candidates, whole model"),
        click.option("--languages", default="torch,triton,cuda", show_default=True),
        click.option("--cache-dir", default=None, type=click.Path(file_okay=False)),
        click.option("--no-cache", is_flag=True, help="ignore and do not write the decision cache"),
        click.option("--max-seq-len", default=None, type=click.IntRange(min=1), help="KV-cache capacity to compile for"),
        click.option("--seed", default=0, show_default=True, type=int),
        click.option("--threads", default=None, type=click.IntRange(min=1), help="torch CPU threads (CPU runs only)"),
        click.option("--json", "as_json", is_flag=True, help="print one JSON object"),
        click.option("--llm-base-url", default=None, help="http advisor (else HERCULES_LLM_BASE_URL)"),
        click.option("--llm-model", default=None, help="http advisor (else HERCULES_LLM_MODEL)"),
        click.option("--exact", is_flag=True, help="no search: HF-identical PyTorch ops, no CUDA graph"),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _setup(threads, as_json):
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    warnings.simplefilter("default")
    if threads:
        import torch

        torch.set_num_threads(threads)


def _compile(model, device, batch, advisor, budget, languages, cache_dir, no_cache, max_seq_len, seed,
             llm_base_url, llm_model, exact=False):
    from .api import compile_model

    opts = {}
    if advisor == "http":
        opts = {"base_url": llm_base_url, "model": llm_model}
    return compile_model(model, device=device, advisor=advisor, budget=budget, cache_dir=cache_dir,
                         use_cache=not no_cache, batch_size=batch, max_seq_len=max_seq_len,
                         languages=tuple(x for x in languages.split(",") if x), seed=seed, advisor_options=opts,
                         exact=exact)


@click.command("generate")
@_common
@click.option("--new-tokens", default=128, show_default=True, type=click.IntRange(min=1))
@click.option("--prompt-len", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--compare-eager", is_flag=True, help="also run HF eager generate: tokens, logits, tok/s")
@click.option("--sample", is_flag=True, help="sample instead of greedy")
@click.option("--temperature", default=1.0, type=click.FloatRange(min=0, min_open=True))
@click.option("--top-k", default=None, type=click.IntRange(min=1))
@click.option("--top-p", default=None, type=click.FloatRange(0, 1, min_open=True))
@click.option("--bandwidth-gbs", default=None, type=click.FloatRange(min=0.0, min_open=True),
              help="device copy rate for the weights-read roofline (default: this device's, measured "
                   "before the run; the H200's measured 4,240 GB/s)")
@click.option("--fidelity", is_flag=True,
              help="teacher-forced KL against a float32 copy of the model, for Hercules and for HF in the same "
                   "dtype, and the gate (kl_hercules <= kl_hf); the copy takes 4 bytes a parameter while it runs")
def generate_cmd(preset, checkpoint, device, dtype, batch, advisor, budget, languages, cache_dir, no_cache,
                 max_seq_len, seed, threads, as_json, llm_base_url, llm_model, exact, new_tokens, prompt_len,
                 compare_eager, sample, temperature, top_k, top_p, bandwidth_gbs, fidelity):
    """Decode with the compiled model (random prompt), optionally against HF eager.

    \b
    Examples:
      hercules generate --preset tiny-llama --device cpu --new-tokens 32 --compare-eager --json
      hercules generate --preset tiny-qwen3 --device cpu --exact --new-tokens 16
    """
    import torch

    _setup(threads, as_json)
    device = _device(device)
    model, name = _load(preset, checkpoint, device, dtype, seed)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, prompt_len), generator=g).to(device)
    msl = max_seq_len or (prompt_len + new_tokens)
    t0 = time.perf_counter()
    dec = _compile(model, device, batch, advisor, budget, languages, cache_dir, no_cache, msl, seed,
                   llm_base_url, llm_model, exact)
    compile_s = time.perf_counter() - t0
    kw = dict(do_sample=sample, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)

    dec.generate(ids, new_tokens, **kw)  # warm-up: graph capture, kernel JIT
    _sync(device)
    t0 = time.perf_counter()
    out = dec.generate(ids, new_tokens, **kw)
    _sync(device)
    secs = time.perf_counter() - t0
    new = out[:, prompt_len:]
    result = {
        "model": name, "device": device, "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "batch": batch, "prompt_len": prompt_len, "new_tokens": int(new.shape[1]), "sample": bool(sample),
        "tok_s": batch * new_tokens / secs, "tok_s_per_sequence": new_tokens / secs, "seconds": secs,
        "compile_s": compile_s,
        "cache_hit": dec.plan.cache_hit, "plan": dec.plan.implementations(),
        "plan_why": {k: d.why for k, d in dec.plan.decisions.items()},
        "step_check": dec.plan.step_check, "advisor": dec.plan.advisor,
        "advisor_warnings": dec.plan.advisor_warnings, "measurements": dec.plan.measurements,
    }
    from .regions import model_spec, roofline_tok_s

    if torch.device(device).type == "cuda":
        from .bench import roofline_bandwidth

        bandwidth = bandwidth_gbs * 1e9 if bandwidth_gbs else roofline_bandwidth(device)
        result["roofline_bandwidth_gbs"] = bandwidth / 1e9
        roof = roofline_tok_s(model_spec(model), bandwidth) * batch
        result["roofline_tok_s"] = roof
        result["roofline_fraction"] = result["tok_s"] / roof
    if compare_eager:
        gkw = dict(max_new_tokens=new_tokens, do_sample=bool(sample))
        if sample:
            gkw.update(temperature=temperature, top_k=top_k, top_p=top_p)
        with torch.no_grad():
            model.generate(ids, **gkw)  # warm-up
            _sync(device)
            t0 = time.perf_counter()
            ref = model.generate(ids, **gkw)
            _sync(device)
            esecs = time.perf_counter() - t0
        result["eager_tok_s"] = batch * new_tokens / esecs
        result["speedup_vs_eager"] = result["tok_s"] / result["eager_tok_s"]
        if sample:
            result["tokens_match"] = None
            result["note"] = "sampling: Hercules and HF draw different random numbers; tokens are not compared"
        else:
            ref_new = ref[:, prompt_len:]
            eq = (ref_new == new)
            result["tokens_match"] = bool(eq.all())
            result["token_agreement"] = float(eq.float().mean())
            mism = (~eq).any(dim=0).nonzero()
            result["first_mismatch"] = int(mism[0]) if mism.numel() else None
            # logits on identical contexts: teacher-force Hercules with eager's tokens
            with torch.no_grad():
                hf = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, output_logits=True,
                                    return_dict_in_generate=True)
                hf_logits = torch.stack(hf.logits).float()
                _, ours = dec.generate(ids, new_tokens, forced=hf.sequences[:, prompt_len:], return_logits=True)
            diffs = (ours - hf_logits).abs().amax(dim=(1, 2))
            result["max_logit_diff"] = float(diffs.max())
            result["max_logit_diff_per_step"] = [round(float(x), 6) for x in diffs]
    else:
        result["eager_tok_s"] = None
        result["tokens_match"] = None
    if fidelity:  # greedy and teacher-forced whatever --sample says: it scores distributions, not draws
        from .fidelity import measure_fidelity

        result["fidelity"] = measure_fidelity(model, dec, ids, new_tokens).to_json()
    if as_json:
        click.echo(json.dumps(result, default=str))
    else:
        click.echo(dec.plan.table())
        for k in ("model", "device", "dtype", "new_tokens", "tok_s", "eager_tok_s", "tokens_match", "compile_s"):
            click.echo(f"{k}: {result.get(k)}")
        if fidelity:
            f = result["fidelity"]
            click.echo(f"kl_hercules: {f['kl_hercules']:.6g}  kl_hf_same_dtype: {f['kl_hf_same_dtype']:.6g}  "
                       f"(nats/position over {f['positions']} positions; max {f['max_kl_hercules']:.3g} / "
                       f"{f['max_kl_hf_same_dtype']:.3g})")
            click.echo(f"fidelity gate: {'passed' if f['passed'] else 'FAILED'} ({f['rule']}, tolerance "
                       f"{f['tolerance']:g})")


@click.command("compile")
@_common
def compile_cmd(preset, checkpoint, device, dtype, batch, advisor, budget, languages, cache_dir, no_cache,
                max_seq_len, seed, threads, as_json, llm_base_url, llm_model, exact):
    """Compile a preset or checkpoint and print the plan (per region: implementation, why, times).

    \b
    Examples:
      hercules compile --preset tiny-llama --device cpu --json
      hercules compile --preset tiny-qwen3 --device cpu --advisor none
    """
    _setup(threads, as_json)
    device = _device(device)
    model, name = _load(preset, checkpoint, device, dtype, seed)
    t0 = time.perf_counter()
    dec = _compile(model, device, batch, advisor, budget, languages, cache_dir, no_cache, max_seq_len or 256, seed,
                   llm_base_url, llm_model, exact)
    secs = time.perf_counter() - t0
    if as_json:
        click.echo(json.dumps({"model": name, "compile_s": secs, "plan": dec.plan.to_json()}, default=str))
    else:
        click.echo(dec.plan.table())
        click.echo(f"compile: {secs:.2f} s (cache hit: {dec.plan.cache_hit}); measurements: {dec.plan.measurements}")


# the names src/hercules/cli.py imports
generate_command = generate_cmd
compile_command = compile_cmd
COMMANDS = [generate_cmd, compile_cmd]


@click.group()
def main() -> None:
    """Stand-alone entry for testing: python -m hercules.compile.cli generate ..."""


for _c in COMMANDS:
    main.add_command(_c)

if __name__ == "__main__":
    main()
