"""The CUDA math libraries' development files for the installed nvcc: headers and link stubs.

A toolkit installed from NVIDIA's compiler wheels has no ``cublas_v2.h``, ``cusparse.h``,
``cusolverDn.h``, ``cufft.h`` or ``curand_kernel.h`` (and PyTorch's ``ATen/cuda/CUDAContextLight.h``
includes ``cusparse.h``), and nothing to link ``-lcusolver`` against; a third of the corpus's
compile_error instances then cannot be built here at all. ``scripts/setup`` runs this module to fetch
the library wheels that match the toolkit (the ``cuda-toolkit`` meta-package of nvcc's release pins
them) with pip, and keeps only their ``include/`` (3.2 MB for CUDA 13.0) plus a stub of each shared
library (its exported names as empty functions, a few MB): the wheels themselves are 1.0 GB of .so
files, which no compile or link check needs. The stubs satisfy the linker only; nothing here loads
them (a machine that runs the result has the real libraries from a CUDA build of torch).

    python -m hercules.debug.cudalibs            # install for the nvcc found, or say why not
    python -m hercules.debug.cudalibs --check    # print what is installed

Never fails: without nvcc, without network access to the wheels, or when the headers are already
present, it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# what the benchmark's instances and PyTorch's CUDA headers include (the cuda-toolkit extras)
EXTRAS = ("cublas", "cufft", "curand", "cusolver", "cusparse")
KEY_HEADERS = ("cublas_v2.h", "cufft.h", "curand_kernel.h", "cusolverDn.h", "cusparse.h")
COMPLETE = "COMPLETE"  # written last: a folder without it is an interrupted install


def root() -> Path:
    """Where installs live: inside the virtual environment, so removing .venv removes them."""
    return Path(sys.prefix) / "cuda-libs"


def nvcc_release(cuda_home: Path | None) -> str | None:
    """"13.0" from ``nvcc --version`` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    nvcc = cuda_home / "bin" / "nvcc" if cuda_home else None
    if nvcc is None or not nvcc.exists():
        return None
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def installed(release: str | None) -> Path | None:
    """The newest complete install for this toolkit's major version (``cuda-toolkit-13.0.3.0``)."""
    if not release:
        return None
    major = release.split(".")[0]
    found = [d for d in root().glob(f"cuda-toolkit-{major}.*") if (d / COMPLETE).exists()]

    def preference(d: Path) -> tuple[bool, list[int]]:  # the same minor release first, then the newest
        return d.name.startswith(f"cuda-toolkit-{release}."), [int(x) for x in re.findall(r"\d+", d.name)]

    return max(found, key=preference) if found else None


def headers_present(cuda_home: Path | None, major: str) -> list[str]:
    """The key headers the toolkit or an installed ``nvidia-*`` wheel of the same major version (a
    CUDA torch's) already has: CUDA 13's wheels share ``nvidia/cu13/``, older ones ``nvidia/<lib>/``."""
    dirs = [cuda_home / "include"] if cuda_home else []
    pattern = f"cu{major}/include" if int(major) >= 13 else "cu*[!0-9]*/include"
    dirs += [p for entry in sys.path for p in (Path(entry or ".") / "nvidia").glob(pattern)]
    return [h for h in KEY_HEADERS if any((d / h).exists() for d in dirs)]


def _pip_download(spec: list[str], dest: Path) -> subprocess.CompletedProcess:
    # --no-cache-dir: the wheels are read once; pip's cache would keep the 1.0 GB
    return subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-cache-dir",
                           "--disable-pip-version-check", "-d", str(dest), *spec],
                          capture_output=True, text=True, check=False)


def _pins(meta_wheel: Path) -> tuple[str, list[str]]:
    """(meta-package version, ``nvidia-X==V.*`` pins of the wanted extras) from its METADATA."""
    with zipfile.ZipFile(meta_wheel) as z:
        text = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    version = re.search(r"^Version: (\S+)", text, re.MULTILINE).group(1)
    pins = set()
    for m in re.finditer(r"^Requires-Dist: (nvidia-[\w-]+)==([\w.*]+);.*extra == '(\w+)'", text, re.MULTILINE):
        if m.group(3) in EXTRAS and m.group(1).removeprefix("nvidia-") in EXTRAS:
            pins.add(f"{m.group(1)}=={m.group(2)}")
    return version, sorted(pins)


_DEFINED = re.compile(r"^\S+\s+([TWiDBRV])\s+([A-Za-z_]\w*)(?:@@?\S+)?$")


def make_stub(so_path: Path, out_dir: Path, soname: str) -> int:
    """A shared library exporting ``so_path``'s names with empty bodies; returns how many."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(so_path)], capture_output=True, text=True,
                         check=True).stdout
    funcs, data = set(), set()
    for line in out.splitlines():
        if m := _DEFINED.match(line.strip()):
            (funcs if m.group(1) in "TWi" else data).add(m.group(2))
    source = out_dir / f"{soname}.c"
    source.write_text("".join(f"void {f}(void) {{}}\n" for f in sorted(funcs))
                      + "".join(f"char {d}[8];\n" for d in sorted(data - funcs)))
    subprocess.run(["cc", "-shared", "-fPIC", "-fno-builtin", "-w", "-o", str(out_dir / soname),
                    f"-Wl,-soname,{soname}", str(source)], check=True, capture_output=True, text=True)
    source.unlink()
    link = out_dir / (soname.split(".so")[0] + ".so")  # what -lcusolver looks for
    if not link.exists():
        link.symlink_to(soname)
    return len(funcs) + len(data)


def _unpack(wheel: Path, target: Path, scratch: Path) -> None:
    """include/ as is, each lib/*.so.N as a stub (unpacked one at a time: cublasLt alone is 542 MB)."""
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            parts = name.split("/")
            if "include" in parts[:-1] and not name.endswith("/"):
                dest = target / "include" / "/".join(parts[parts.index("include") + 1:])
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(z.read(name))
            elif len(parts) >= 2 and parts[-2] == "lib" and ".so." in parts[-1]:
                so = Path(z.extract(name, scratch))
                make_stub(so, target / "lib", parts[-1])
                so.unlink()


def install(cuda_home: Path | None) -> str:
    """Fetch and unpack; returns the line to print."""
    release = nvcc_release(cuda_home)
    if release is None:
        return "note: no nvcc found; CUDA library headers not installed"
    if done := installed(release):
        return f"CUDA library headers for nvcc {release}: {done} (already installed)"
    major = release.split(".")[0]
    if len(headers_present(cuda_home, major)) == len(KEY_HEADERS):
        return f"CUDA library headers for nvcc {release}: already with the toolkit or torch's nvidia wheels"
    if not shutil.which("nm") or not shutil.which("cc"):
        return "note: nm or cc missing; CUDA library headers not installed"
    root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cuda-libs-", dir=root()) as tmp:
        work = Path(tmp)
        for spec in (f"cuda-toolkit=={release}.*", f"cuda-toolkit=={major}.*"):
            proc = _pip_download([spec], work / "meta")
            if proc.returncode == 0:
                break
        else:
            return (f"note: CUDA library headers for nvcc {release} not installed (pip could not fetch "
                    f"cuda-toolkit=={major}.*: {(proc.stderr.strip().splitlines() or ['?'])[-1][:160]})")
        version, pins = _pins(next((work / "meta").glob("*.whl")))
        proc = _pip_download(pins, work / "wheels")
        if proc.returncode != 0:
            return (f"note: CUDA library headers for nvcc {release} not installed (pip could not fetch "
                    f"{' '.join(pins)}: {(proc.stderr.strip().splitlines() or ['?'])[-1][:160]})")
        target = root() / f"cuda-toolkit-{version}"
        shutil.rmtree(target, ignore_errors=True)
        (target / "lib").mkdir(parents=True)
        for wheel in sorted((work / "wheels").glob("*.whl")):
            _unpack(wheel, target, work / "scratch")
            wheel.unlink()
        wheels = "\n".join(p.name for p in sorted((work / "meta").glob("*.whl"))) + "\n" + "\n".join(pins)
        (target / COMPLETE).write_text(wheels + "\n")
    return f"CUDA library headers for nvcc {release}: {target} ({', '.join(pins)}; include/ and link stubs only)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print what is installed; fetch nothing")
    args = parser.parse_args(argv)
    from hercules.debug.toolchain import find_cuda_home

    cuda_home = find_cuda_home()
    if args.check:
        release = nvcc_release(cuda_home)
        print(f"nvcc {release}: {installed(release) or 'no CUDA library headers installed'}")
        return 0
    try:
        print(install(cuda_home))
    except (OSError, subprocess.CalledProcessError, zipfile.BadZipFile, StopIteration, AttributeError) as exc:
        print(f"note: CUDA library headers not installed ({type(exc).__name__}: {str(exc)[:160]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
