"""Failure classifier: the text of a build or a test (build/test output, exit status, signal) -> one
category, a subtype and the line that decided it.

This module is where output that has no type is read: compiler, linker and device-tool lines
(``classify_build``), a native test's output and exit status (``classify_run``), and the error
messages of the CUDA runtime, torch and Python's imports (``read_runtime_error``). An evaluation
core verdict is classified on its typed fields instead (``core_verdict``), reading text only
through these functions. Never the instance's name or label.

Build evidence is searched for the candidate's own errors first (compiler ``error:`` lines, link
errors, missing headers, Python tracebacks); environment causes (no compiler, library file not
found, no GPU) only win when nothing the candidate wrote is blamed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Classified categories (the label each one agrees with is in LABEL_OF).
ENV, BUILD, OOM, ILLEGAL, LAUNCH, TIMEOUT = "env", "build", "oom", "illegal_memory", "launch", "timeout"
WRONG, CRASH, SUSPICIOUS, SLOW, PASSED, UNTESTED = (
    "wrong_result", "crash", "suspicious", "slow", "passed", "untested")
CATEGORIES = (ENV, BUILD, OOM, ILLEGAL, LAUNCH, TIMEOUT, WRONG, CRASH, SUSPICIOUS, SLOW, PASSED, UNTESTED)
LABEL_OF = {BUILD: "compile_error", WRONG: "logic_error", SUSPICIOUS: "logic_error", OOM: "memory_crash",
            ILLEGAL: "memory_crash", LAUNCH: "memory_crash", CRASH: "memory_crash", TIMEOUT: "timeout",
            SLOW: "perf_broken"}

# Headers of CUDA libraries a machine may simply not have (the candidate may still be right): the
# toolkit's optional math and media libraries, and the separately installed CUDA libraries. Matched
# against the header's first path component and its file name (``cute/tensor.hpp``, ``cublas_v2.h``).
LIBRARY_HEADER = re.compile(r"^(cublas|cusparse|cusolver|cufft|curand|cudnn|nccl|nvtx|nvToolsExt|cutlass|cute|"
                            r"cutensor|cudss|cufile|nvshmem|npp|nvjpeg|nvml|nvcomp|cupti|cudla)", re.IGNORECASE)

_COMPILER_ERROR = re.compile(
    r"^(?P<line>(?:[^\s:][^:\n]*?\(\d+\)|[^\s:][^:\n]*?:\d+(?::\d+)?): (?:fatal )?error[^:\n]*: .*)$"
    r"|^(?P<nvcc>nvcc (?:fatal|error)\s*: .*)$", re.MULTILINE)
# The device assembler and linker (resources, unresolved device functions, PTX the target lacks):
# "ptxas error   : Entry function ... uses too much shared data", "nvlink error   : Undefined reference".
_DEVICE_TOOL_ERROR = re.compile(r"^(?P<tool>ptxas|nvlink|fatbinary)(?:\s+\S+, line \d+;)?\s+(?:fatal|error)\s*: "
                                r"(?P<msg>.*)$", re.MULTILINE)
_DEVICE_TOOL_SUMMARY = re.compile(r"aborted due to errors|Ptx assembly aborted", re.IGNORECASE)
_MISSING_HEADER = re.compile(r"fatal error: (?P<h>[^:\n]+): No such file or directory")
_LINK = re.compile(r"undefined reference to|multiple definition of|nvlink error|ld returned \d+ exit status"
                   r"|undefined symbol|relocation .* against", re.IGNORECASE)
_LIB_MISSING = re.compile(r"cannot find -l(\S+)|error while loading shared libraries|"
                          r"cannot open shared object file", re.IGNORECASE)
_PY_ERROR = re.compile(r"^(?P<e>(?:SyntaxError|IndentationError|TabError|NameError|ImportError|TypeError|"
                       r"AttributeError|ValueError|RuntimeError)\b.*)$", re.MULTILINE)
_TOOLCHAIN = re.compile(r"(nvcc|make|c\+\+|g\+\+|ninja): (command )?not found|: command not found|nvcc fatal\s*: (Unsupported gpu "
                        r"architecture|Could not detect|Cannot find compiler)|No CMAKE_CUDA_COMPILER", re.IGNORECASE)
# The build command asks for what this toolkit cannot do (an architecture it dropped or does not
# know yet, a host compiler it does not support): the command's fault on this machine, not the
# candidate's, whatever else the log says.
_TOOLKIT_REFUSES = re.compile(r"nvcc (?:fatal|error)\s*: (?:Unsupported gpu architecture|Value '[^']*' is not "
                              r"defined for option 'gpu-(?:architecture|code)'|Could not detect|Cannot find compiler)"
                              r"|error -- unsupported GNU version", re.IGNORECASE)
_API = re.compile(r"\b(cuda\w*|cu(blas|fft|sparse|solver|rand)\w*|thrust|cub|nvcuda|wmma|at::|torch::|c10::|"
                  r"__\w+|atomic\w*|warp\w*|__shfl\w*|dim3|<<<)", re.IGNORECASE)

_OOM = re.compile(r"out of memory|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED|OutOfMemoryError", re.IGNORECASE)
_ILLEGAL = re.compile(r"illegal memory access|misaligned address|Invalid __(global|shared|local)__ (read|write)|"
                      r"cudaErrorIllegalAddress|cudaErrorMisalignedAddress|illegal instruction|"
                      r"out of bounds|invalid address|Segmentation fault|detected by compute-sanitizer", re.IGNORECASE)
_LAUNCH = re.compile(r"too many resources requested for launch|invalid configuration argument|"
                     r"unspecified launch failure|launch timed out|cudaErrorLaunch\w*|invalid argument|"
                     r"cudaErrorInvalidConfiguration|exceeds (the )?maximum|invalid device function", re.IGNORECASE)
_ENV_RUN = re.compile(r"no CUDA-capable device|CUDA driver version is insufficient|no kernel image is available|"
                      r"cudaErrorNoDevice|cudaErrorInsufficientDriver|ModuleNotFoundError|No module named|"
                      r"Torch not compiled with CUDA|Found no NVIDIA driver|compute-sanitizer: command not found", re.IGNORECASE)
_WRONG = re.compile(r"Assertion .* failed|AssertionError|mismatch|Verification failed|incorrect|wrong|"
                    r"\bFAIL(ED)?\b|does not match|max(imum)? (abs(olute)? )?(diff|error)|^F$", re.IGNORECASE | re.MULTILINE)
SIGNAL_NAMES = {6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV"}
STOP_SIGNALS = ("SIGINT", "SIGTERM")  # what stops a run (a time guard, Ctrl-C, a scheduler)


def killed_by_stop_signal(reason: str) -> bool:
    """A reason that says a process was ended by a signal that stops a run: such an ending is the
    stop's, not the candidate's outcome."""
    return any(f"killed by {name}" in reason for name in STOP_SIGNALS)


@dataclass(frozen=True)
class Classification:
    category: str
    subtype: str = ""
    reason: str = ""  # the evidence line that decided it
    environment_suspect: bool = False  # e.g. a CUDA library header this machine lacks

    @property
    def label(self) -> str | None:
        """The corpus error_category this classification agrees with (None for pass/env/untested)."""
        return LABEL_OF.get(self.category)


def _first(pattern: re.Pattern, text: str) -> str | None:
    m = pattern.search(text)
    if not m:
        return None
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start:end if end >= 0 else len(text)].strip()[:400]


def _subtype_of_compile_error(line: str) -> str:
    message = line.split("error", 1)[-1]
    return "api_misuse" if _API.search(message) else "syntax_type"


def missing_header(text: str) -> str | None:
    """The header a build could not find (``cusparse.h``), or None."""
    m = _MISSING_HEADER.search(text or "")
    return m.group("h").strip().strip("<>\"") if m else None


def classify_build(text: str, timed_out: bool = False) -> Classification:
    """A failed build: the candidate's errors first, then the environment's."""
    if timed_out:
        return Classification(TIMEOUT, "build", "build timed out")
    header = _MISSING_HEADER.search(text)
    compiler = _COMPILER_ERROR.search(text)
    if refused := _first(_TOOLKIT_REFUSES, text):
        return Classification(ENV, "toolchain", refused)
    if header:  # named before other compiler errors, which usually follow from the missing file
        name = header.group("h").strip().strip("<>\"")
        parts = name.split("/")
        return Classification(BUILD, "missing_header", _first(_MISSING_HEADER, text) or name,
                              environment_suspect=any(LIBRARY_HEADER.match(p) for p in (parts[0], parts[-1])))
    if compiler:
        line = compiler.group(0).strip()[:400]
        return Classification(BUILD, _subtype_of_compile_error(line), line)
    if device := _DEVICE_TOOL_ERROR.search(text):
        if device.group("tool") == "nvlink" and re.search(r"Undefined reference|Multiple definition", device.group(0),
                                                          re.IGNORECASE):
            return Classification(BUILD, "link", device.group(0).strip()[:400])
        # the first specific line, not the closing "Ptx assembly aborted due to errors"
        lines = [m.group(0).strip() for m in _DEVICE_TOOL_ERROR.finditer(text)]
        line = next((ln for ln in lines if not _DEVICE_TOOL_SUMMARY.search(ln)), lines[0])
        return Classification(BUILD, "device_code", line[:400])
    if (lib := _first(_LIB_MISSING, text)) and "undefined reference" not in text:
        return Classification(ENV, "library_missing", lib)
    if link := _first(_LINK, text):
        return Classification(BUILD, "link", link)
    if tool := _first(_TOOLCHAIN, text):
        return Classification(ENV, "toolchain", tool)
    if "Traceback (most recent call last)" in text or _PY_ERROR.search(text):
        err = _first(_PY_ERROR, text) or "Python traceback"
        if re.search(r"No module named|ModuleNotFoundError", err):
            return Classification(ENV, "python_module", err)
        return Classification(BUILD, "python", err)
    if lib:
        return Classification(ENV, "library_missing", lib)
    last = next((ln for ln in reversed(text.strip().splitlines()) if ln.strip()), "build failed")
    return Classification(BUILD, "other", last[:400])


def read_runtime_error(text: str) -> Classification | None:
    """The error messages of the CUDA runtime, torch and Python's imports, which carry no type:
    out of memory, a memory fault (illegal address, misaligned, sanitizer reports), a launch the
    device refused (resources, configuration), or an environment this machine lacks (no device,
    driver too old, no kernel image for this GPU, a module not installed). None: none of them."""
    for pattern, category in ((_OOM, OOM), (_ILLEGAL, ILLEGAL), (_LAUNCH, LAUNCH)):
        if line := _first(pattern, text):
            return Classification(category, "", line)
    if line := _first(_ENV_RUN, text):
        return Classification(ENV, "runtime", line)
    return None


def test_printed_failure(stdout: str) -> str | None:
    """The failure line of a test harness that exits 0 but prints its verdict last
    (``compare_output.py`` prints ``F``), or None."""
    lines = [ln.strip() for ln in stdout.strip().splitlines() if ln.strip()]
    if lines and (lines[-1] in ("F", "FAIL", "FAILED") or lines[-1].startswith("FAIL")):
        return lines[-1][:200]
    return None


def classify_run(text: str, returncode: int | None, signal: int | None, timed_out: bool) -> Classification:
    """A test run that did not exit cleanly (or printed a failure)."""
    if timed_out:
        return Classification(TIMEOUT, "test", "test timed out")
    if found := read_runtime_error(text):
        return found
    if signal in (7, 11):
        return Classification(ILLEGAL, "host", f"killed by {SIGNAL_NAMES[signal]}")
    if line := _first(_WRONG, text):
        return Classification(WRONG, "", line)
    if signal:
        # test harnesses check results with assert(): SIGABRT is their "wrong answer"
        if signal == 6:
            return Classification(WRONG, "abort", "aborted (SIGABRT, a failed check)")
        return Classification(CRASH, "signal", f"killed by {SIGNAL_NAMES.get(signal, signal)}")
    if "Traceback (most recent call last)" in text:
        return Classification(CRASH, "python", _first(_PY_ERROR, text) or "Python traceback")
    return Classification(WRONG, "exit_status", f"test exited with status {returncode}")
