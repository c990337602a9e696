"""Every unusable input to every command ends as one line on stderr and exit status 2, nothing on
stdout: a table of real ``hercules`` command lines, run one after another in one driver process
(tests/cli_batch.py: each through ``hercules.cli.main`` with file descriptors 1 and 2 of its own,
its exit status from ``sys.exit``), so that the ~2 s of a process start and torch import is paid
once instead of ~40 times (~80 s of the 2-core CI machine); what the driver's own imports print
would be on every command's stderr, and must be nothing. (The HTTP routes of ``serve`` have their
own table in tests/serve/test_serve_interrupt.py.) And every command's --help examples name files
that exist and parse as written, from the project's root."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import cli_batch
import click
import pytest
import torch

from hercules.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = "src/hercules/suite/problems/mish_fp32.py"
CANDIDATE = "src/hercules/suite/candidates/mish_fp32/torch_mish.py"
NO_GPU = not torch.cuda.is_available()


def hercules(*args: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "hercules.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


@pytest.fixture(scope="module")
def binary(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bad") / "binary.py"
    path.write_bytes(bytes(range(256)) * 8)
    return path


# Inputs of 2**50 float32 values (4.5 PB): more than any host or device has, known from shapes alone.
HUGE = (ROOT / "tests" / "fixtures" / "scale_relu.py").read_text().replace("torch.randn(128, 256)",
                                                                          "torch.randn(1 << 34, 1 << 16)")


@pytest.fixture(scope="module")
def huge(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("huge") / "huge_relu.py"
    path.write_text(HUGE)
    return path


# (command line, with {binary} for a binary file, and text the one line must hold)
CASES = [
    ("eval --problem {P} --candidate {binary}", "not UTF-8 text"),
    ("eval --problem {P} --candidate src", "is a folder"),
    ("eval --problem {P} --candidate missing.py", "no such candidate file"),
    ("eval --problem {binary} --candidate {C}", "not UTF-8 text"),
    ("eval --problem src --candidate {C}", "is a folder"),
    ("eval --problem {P}", "Missing option '--candidate'"),
    ("eval --problem {P} --candidate {C} --device tpu", "use auto, cpu, cuda or cuda:N"),
    ("eval --problem {P} --candidate {C} --trials 0", "--trials"),
    ("eval --problem {P} --candidate {C} --budget -1", "--budget"),
    ("eval --problem {P} --candidate {C} --budget abc", "not a valid float"),
    ("eval --problem {P} --candidate {C} --baselines eagre", "unknown baselines eagre"),
    ("eval --problem {P} --candidate {C} --tolerance loose", "--tolerance"),
    ("eval --problem {P} --candidate {C} --cache-dir README.md", "is a file, not a folder"),
    ("eval --problem {P} --candidate {C} --artifacts README.md", "is a file, not a folder"),
    ("eval --problem {huge} --candidate {C} --device cpu", "needs at least 4503599.6 GB for its inputs (4503599.6 GB)"),
    ("bench missing_folder", "no such file or folder"),
    ("bench --filter no_such_problem", "none matches --filter"),
    ("bench {P} --candidates missing_folder", "no such candidates folder"),
    ("bench --run-dir README.md --filter mish", "is a file, not a folder"),
    ("bench --eval-jobs 0", "--eval-jobs"),
    ("list missing_folder", "no such file or folder"),
    ("list {binary}", "not UTF-8 text"),
    ("optimize --problem {binary}", "not UTF-8 text"),
    ("optimize --problem {P} --backend replay", "needs --replay"),
    ("optimize --problem {P} --rounds 0", "--rounds"),
    ("serve --port 70000", "--port"),
    ("serve --cache src", "is a directory"),
    ("serve --workers 0", "--workers"),
    ("debug run --corpus missing_folder", "does not exist"),
    ("debug run --protocol n=x", "--protocol"),
    ("debug validate --jobs 0", "--jobs"),
    ("generate --preset no_such_model --device cpu", "unknown preset"),
    ("generate --preset tiny-llama --device cpu --new-tokens -1", "--new-tokens"),
    ("compile --preset tiny-llama --device cpu --batch 0", "--batch"),
    # Numbers out of range and paths in the way, for the options of every command (an infinite
    # budget would time one call forever; a bad URL failed at the first model call, rounds later).
    ("eval --problem {P} --candidate {C} --budget inf", "positive, finite number"),
    ("bench {P} --candidates README.md", "is a file, not a folder"),
    ("optimize --problem {P} --base-url notaurl --model M", "not an http(s) URL"),
    ("optimize --problem {P} --concurrency 0", "--concurrency"),
    ("optimize --problem {P} --top-p 2", "--top-p"),
    ("optimize --problem {P} --llm-timeout 0", "--llm-timeout"),
    ("optimize --problem {P} --token-budget -5", "--token-budget"),
    ("optimize --problem {P} --limit 0", "--limit"),
    ("optimize --problem {P} --backend replay --replay src/hercules/suite/candidates --out README.md",
     "is a file, not a folder"),
    ("serve --retries -1", "--retries"),
    ("serve --admission-timeout -1", "--admission-timeout"),
    ("serve --budget inf", "positive, finite number"),
    ("debug run --limit 0", "--limit"),
    ("debug list --limit -1", "--limit"),
    ("debug list --task no_such_task", "--task no_such_task: not in the corpus"),
    ("debug run --category compile_errr --device cpu", "it has compile_error, logic_error"),
    ("debug run --fixer http --base-url notaurl --model M --device cpu --limit 1", "not an http(s) URL"),
    ("debug run --device cpu --limit 1 --out README.md/run", "cannot create the folder"),
    ("serve --device cpu --ray-address nohost.invalid:6379", "cannot reach the Ray cluster at nohost.invalid:6379"),
    ("bench --filter mish --device cpu --ray-address 127.0.0.1:1", "cannot reach the Ray cluster at 127.0.0.1:1"),
    ("no_such_command", "No such command"),
]
if NO_GPU:  # a GPU asked for on a machine without one: the one line names it, not torch's assertion
    CASES += [(f"{command} --device cuda", "no CUDA device")
              for command in ("eval --problem {P} --candidate {C}", "bench --filter mish", "optimize --problem {P}",
                              "serve", "debug run", "compile --preset tiny-llama")]


@pytest.fixture(scope="module")
def unusable_runs(request, binary, huge, tmp_path_factory) -> cli_batch.Batch:
    """The selected cases' command lines, in one driver process (project root as working folder)."""
    selected = [i.callspec.params["command"] for i in request.session.items
                if i.module.__name__ == __name__ and i.originalname == "test_an_unusable_input_is_one_line_and_exit_2"]
    runs = {command: cli_batch.Run(tuple(shlex.split(command.format(P=PROBLEM, C=CANDIDATE, binary=binary, huge=huge))),
                                   ROOT, {}) for command in selected}
    return cli_batch.run_batch(runs, tmp_path_factory.mktemp("unusable"), timeout=120 * max(1, len(runs)))


@pytest.mark.parametrize("command, message", CASES, ids=[c for c, _ in CASES])
def test_an_unusable_input_is_one_line_and_exit_2(command, message, unusable_runs):
    assert unusable_runs.stdout == "" and unusable_runs.stderr == "", (
        "the driver's start-up printed (it would be on every command's own output)",
        unusable_runs.stdout[-1000:], unusable_runs.stderr[-2000:])
    result = unusable_runs.results[command]
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hercules: error:"), result.stderr[-2000:]
    assert message in lines[0], lines[0]


def test_an_address_serve_cannot_listen_on_is_one_line_without_a_banner():
    """The banner (devices, timed evaluations at once, cache) comes only once the address is bound."""
    result = hercules("serve", "--device", "cpu", "--host", "256.1.1.1", "--port", "0", "--no-cache")
    assert result.returncode == 2 and result.stdout == "", result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hercules: error: cannot listen on 256.1.1.1"), lines


# ---- --help examples ------------------------------------------------------------------------------


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(prefix, group)]
    for name, command in getattr(group, "commands", {}).items():
        found += _commands(command, (*prefix, name)) if isinstance(command, click.Group) else [((*prefix, name), command)]
    return found


COMMANDS = _commands(main)


def _examples(command: click.Command) -> list[list[str]]:
    """The command lines under 'Examples' of a command's help (comments and pipes cut off)."""
    text = command.help or ""
    block = text.split("Examples", 1)[1] if "Examples" in text else ""
    lines = []
    for line in block.splitlines():
        line = line.strip()
        if line.startswith("hercules "):
            line = re.split(r"\s+#\s", line)[0].split(" | ")[0]
            lines.append(shlex.split(line)[1:])
    return lines


@pytest.mark.parametrize("path, command", COMMANDS, ids=[" ".join(p) or "hercules" for p, _ in COMMANDS])
def test_every_command_has_examples_that_parse_and_name_files_that_exist(path, command):
    examples = _examples(command)
    assert examples, f"hercules {' '.join(path)} --help has no examples"
    assert "DESIGN.md" not in (command.help or "") + "".join(p.help or "" for p in command.params
                                                             if isinstance(p, click.Option))
    for args in examples:
        for word in args:  # every file or folder named by the examples is in the project
            if word.startswith("src/") or word.endswith(".py"):
                assert (ROOT / word).exists(), f"{word} (in: hercules {' '.join(args)})"
        # Parsed as the command line would be (options, choices, required ones), without running.
        leaf, rest = main, list(args)
        while isinstance(leaf, click.Group) and rest and rest[0] in leaf.commands:
            leaf, rest = leaf.commands[rest[0]], rest[1:]
        try:
            leaf.make_context(leaf.name, list(rest))  # click consumes the list it parses
        except click.BadParameter as exc:
            # A run folder an earlier example of the same help makes (hercules debug run --out runs/...).
            made_before = any(w.startswith("runs/") and w in exc.format_message() for w in rest)
            if not (made_before and "does not exist" in exc.format_message()):
                raise


def test_the_list_and_eval_examples_run_as_written():
    listed = hercules("list", "src/hercules/suite/problems/matmul_fp32.py", "--json")
    assert listed.returncode == 0, listed.stderr
    assert '"flops": 4294967296' in listed.stdout
    evaluated = hercules("eval", "--problem", PROBLEM, "--candidate", CANDIDATE, "--tolerance", "kernelbench",
                         "--no-timing", "--trials", "1", timeout=300)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
