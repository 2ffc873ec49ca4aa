"""FUSE: the real tools through ``afi mount`` against the same tree written out to a native folder.

``python -m bench.fuse [--items 10000] [--rounds 3] [--quick]``. Half the items are fact notes and
half workspace files (in 50 folders), written through the provider; every byte the mount shows is
then written to a native folder with the same layout. In the same run, alternating: ``grep -r WORD``
(cold: the first after mounting; warm: the next rounds), ``find -name``, ``cat`` of 1k files, and
``cat`` of a 50 MiB workspace file (MB/s; cold: the very first read through the mount, before
anything else has been read). Goals: warm ``grep -r`` ≤ 3x native, ``find`` ≤ 2x, sequential read
≥ 0.5x native MB/s.

The same warm tools also run over the *floor* (``bench/_fuse_floor.py``): the native folder served
read-only by the least a pyfuse3 file system can do (answers from memory, no provider). Its ratios
to native are what the transport alone costs (pyfuse3 on trio: a kernel round trip per open, flush
and release), so the gap between the mount's ratio and the floor's is what the AFI binding adds.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import comparison, comparisons, corpus, print_table, write_result

__all__ = ["GOALS", "run"]

SEED = 20241129
WORD = "needle-zq"
BIG_MIB = 50
GOALS = {"grep_warm": 3.0, "find": 2.0, "read_mbps": 0.5}


def _timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=1800)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{cmd[0]} failed in {cwd}: {done.stderr.decode()[:300]}")
    return took


def _populate(db: Path, root: Path, native: Path, items: int) -> list[str]:
    """Write ``items`` notes and files (one in 10 holding WORD) and one big file; return the small paths.

    The native folder gets every byte the provider then reads back for each path, so both trees hold
    the same bytes, and nothing has gone through the mount (its first pass is really cold).
    """
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(db, root)
    owner = provider.authenticate(None)
    texts = corpus(items, seed=SEED)
    paths = []
    for i, text in enumerate(texts):
        body = f"{text} {WORD}\n" if i % 10 == 0 else text + "\n"
        path = f"/facts/note-{i:05d}.md" if i % 2 == 0 else f"/files/d{i % 50:02d}/file-{i:05d}.txt"
        provider.write(owner, path, body.encode())
        paths.append(path)
    big = random.Random(SEED).randbytes(BIG_MIB << 20)
    provider.write(owner, "/files/big.bin", big)
    for path in [*paths, "/files/big.bin"]:
        target = native / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(provider.read(owner, path).data)
    return paths


def _mount(mountpoint: Path, db: Path, root: Path) -> subprocess.Popen[str]:
    mountpoint.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-c", "from afi.cli import main; main()", "mount", str(mountpoint)]
    cmd += ["--db", str(db), "--root", str(root), "--foreground"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("afi: mounted "):
        proc.kill()
        raise RuntimeError(f"afi mount did not start: {line!r}")
    return proc


def _unmount(mountpoint: Path, proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    if os.path.ismount(mountpoint):
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)
    if proc.stdout is not None:
        proc.stdout.close()


def _tools(paths: list[str]) -> dict[str, list[str]]:
    return {
        "grep": ["grep", "-r", "-l", WORD, "facts", "files"],
        "find": ["find", "facts", "files", "-name", "*7.md"],
        "cat": ["cat", *[p.lstrip("/") for p in paths[:1000]]],
        "big": ["cat", "files/big.bin"],
    }


def _measure(mount: Path, native: Path, paths: list[str], rounds: int) -> dict[str, Any]:
    tools = _tools(paths)
    grep, find, cat, big = tools["grep"], tools["find"], tools["cat"], tools["big"]
    out: dict[str, list[float]] = {k: [] for k in ("grep_mount", "grep_native", "find_mount", "find_native")}
    out |= {k: [] for k in ("cat_mount", "cat_native", "big_mount", "big_native", "big_mount_warm")}
    cold_big = _timed(big, mount)
    cold = _timed(grep, mount)
    for _ in range(rounds):
        out["grep_native"].append(_timed(grep, native))
        out["grep_mount"].append(_timed(grep, mount))
        out["find_native"].append(_timed(find, native))
        out["find_mount"].append(_timed(find, mount))
        out["cat_native"].append(_timed(cat, native))
        out["cat_mount"].append(_timed(cat, mount))
        out["big_native"].append(_timed(big, native))
        out["big_mount_warm"].append(_timed(big, mount))
    med = {k: statistics.median(v) for k, v in out.items() if v}
    mib = float(BIG_MIB)
    return {
        "grep_cold_s": cold,
        "grep_warm_s": med["grep_mount"],
        "grep_native_s": med["grep_native"],
        "grep_warm_ratio": med["grep_mount"] / med["grep_native"],
        "grep_cold_ratio": cold / med["grep_native"],
        "find_s": med["find_mount"],
        "find_native_s": med["find_native"],
        "find_ratio": med["find_mount"] / med["find_native"],
        "cat_1k_s": med["cat_mount"],
        "cat_1k_native_s": med["cat_native"],
        "cat_1k_ratio": med["cat_mount"] / med["cat_native"],
        "read_mbps_cold": mib / cold_big,
        "read_mbps_warm": mib / med["big_mount_warm"],
        "read_mbps_native": mib / med["big_native"],
        "read_cold_fraction": (mib / cold_big) / (mib / med["big_native"]),
        "read_warm_fraction": (mib / med["big_mount_warm"]) / (mib / med["big_native"]),
    }


def _floor_mount(native: Path, mountpoint: Path) -> subprocess.Popen[str]:
    mountpoint.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "bench.fuse", "--serve-floor", str(native), str(mountpoint)]
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=root)
    assert proc.stdout is not None
    if not proc.stdout.readline().startswith("floor mounted"):
        proc.kill()
        raise RuntimeError("the floor file system did not start")
    return proc


def _measure_floor(floor: Path, native: Path, paths: list[str], rounds: int) -> dict[str, Any]:
    """Given the floor mounted over ``native``, return its warm figures as ratios to native."""
    tools = _tools(paths)
    cold_big = _timed(tools["big"], floor)
    for name in ("grep", "cat"):
        _timed(tools[name], floor)  # fill the page cache, as the mount's cold pass did
    out: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name in ("grep", "find", "cat", "big"):
            out.setdefault(f"{name}_native", []).append(_timed(tools[name], native))
            out.setdefault(f"{name}_floor", []).append(_timed(tools[name], floor))
    med = {k: statistics.median(v) for k, v in out.items()}
    figures = {f"floor_{name}_ratio": med[f"{name}_floor"] / med[f"{name}_native"] for name in ("grep", "find", "cat")}
    return figures | {"floor_read_cold_fraction": med["big_native"] / cold_big}


def _comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Given the figures, return the mount beside the floor (each as a multiple of native), and the warm
    sequential read beside native."""
    mount, floor = "afi mount", "pyfuse3 floor (does nothing)"
    times = (("grep -r, warm", "grep_warm", "grep"), ("find -name", "find", "find"), ("cat 1k files", "cat_1k", "cat"))
    return comparisons(
        *(
            comparison(
                what,
                "× native time",
                "lower",
                ours=(mount, figures[f"{ours}_ratio"]),
                baseline=(floor, figures[f"floor_{base}_ratio"]),
            )
            for what, ours, base in times
        ),
        comparison(
            f"sequential read of {BIG_MIB} MiB, cold",
            "fraction of native MiB/s",
            "higher",
            ours=(mount, figures["read_cold_fraction"]),
            baseline=(floor, figures["floor_read_cold_fraction"]),
        ),
        comparison(
            f"sequential read of {BIG_MIB} MiB, warm",
            "MiB/s",
            "higher",
            ours=(mount, figures["read_mbps_warm"]),
            baseline=("native folder", figures["read_mbps_native"]),
        ),
    )


def run(*, quick: bool = False, items: int | None = None, rounds: int = 3) -> dict[str, Any]:
    """Build the tree, mount it, measure against native; print and store the figures."""
    count = items if items is not None else (1000 if quick else 10_000)
    with tempfile.TemporaryDirectory(prefix="afi-bench-fuse-") as tmp:
        base = Path(tmp)
        db, root, mountpoint, native = base / "afi.db", base / "files", base / "mnt", base / "native"
        start = time.perf_counter()
        paths = _populate(db, root, native, count)
        built = time.perf_counter() - start
        proc = _mount(mountpoint, db, root)
        try:
            figures = _measure(mountpoint, native, paths, rounds)
        finally:
            _unmount(mountpoint, proc)
        floor = base / "floor"
        proc = _floor_mount(native, floor)
        try:
            figures |= _measure_floor(floor, native, paths, rounds)
        finally:
            _unmount(floor, proc)
    figures |= {"items": count, "rounds": rounds, "build_s": built, "goals": GOALS}
    rows = [
        ("grep -r warm (x native)", figures["grep_warm_ratio"], GOALS["grep_warm"]),
        ("grep -r warm, floor (x native)", figures["floor_grep_ratio"], "-"),
        ("grep -r cold (x native)", figures["grep_cold_ratio"], "-"),
        ("find -name (x native)", figures["find_ratio"], GOALS["find"]),
        ("find -name, floor (x native)", figures["floor_find_ratio"], "-"),
        ("cat 1k files (x native)", figures["cat_1k_ratio"], "-"),
        ("cat 1k files, floor (x native)", figures["floor_cat_ratio"], "-"),
        ("50 MiB read cold (fraction of native MB/s)", figures["read_cold_fraction"], GOALS["read_mbps"]),
        ("50 MiB read cold, floor (fraction of native)", figures["floor_read_cold_fraction"], "-"),
        ("50 MiB read warm (fraction of native MB/s)", figures["read_warm_fraction"], GOALS["read_mbps"]),
    ]
    print_table(f"FUSE over {count} notes and files", ["measure", "value", "goal"], rows)
    figures["comparisons"] = _comparisons(figures)
    write_result("fuse", figures)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve-floor", nargs=2, metavar=("FOLDER", "MOUNTPOINT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_floor:
        from ._fuse_floor import serve_floor

        serve_floor(Path(args.serve_floor[0]), Path(args.serve_floor[1]))
    else:
        run(quick=args.quick, items=args.items, rounds=args.rounds)
