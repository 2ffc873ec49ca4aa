"""The load bench's traffic: keep-alive clients drawing from the request mix, the writer, its lost-write check."""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from ._common import percentile
from ._load_proc import Server, server_resources
from ._load_store import Workload

__all__ = ["MIX", "SEARCH_LIMIT", "Tally", "run_phase", "warm"]

MIX = {"read": 30, "stat": 20, "list": 10, "exact": 15, "regex": 10, "semantic": 15}
SEARCH_LIMIT = 20
REQUEST_TIMEOUT = 60.0
_COUNTER_VALUE = re.compile(rb"load counter (\d+)")


@dataclass
class Tally:
    """What one phase's clients saw: (kind, milliseconds) per answered request, errors by kind."""

    samples: list[tuple[str, float]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    error_examples: list[str] = field(default_factory=list)
    conflicts: int = 0
    acked: dict[str, int] = field(default_factory=dict)
    midway: dict[str, Any] = field(default_factory=dict)

    def error(self, kind: str, what: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        if len(self.error_examples) < 10:
            self.error_examples.append(f"{kind}: {what}")


def _request(kind: str, work: Workload, rng: random.Random) -> tuple[str, str, dict[str, Any] | None]:
    if kind in ("read", "stat"):
        return "GET", f"/afi/{kind}?path={quote(rng.choice(work.paths), safe='/')}", None
    if kind == "list":
        target = rng.choice(work.lists)
        path, _, glob = target.partition("?glob=")
        url = f"/afi/list?path={quote(path, safe='/')}&limit=100"
        return "GET", url + (f"&glob={quote(glob)}" if glob else ""), None
    query: Any = rng.choice(work.exact)
    if kind == "regex":
        query = {"regex": rng.choice(work.regex)}
    elif kind == "semantic":
        query = {"semantic": rng.choice(work.semantic)}
    return "POST", "/afi/search", {"query": query, "path": "/", "limit": SEARCH_LIMIT}


def _client(url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    return httpx.AsyncClient(base_url=url, limits=limits, timeout=REQUEST_TIMEOUT)


async def _reader(url: str, work: Workload, seed: int, deadline: float, tally: Tally) -> None:
    rng = random.Random(seed)
    kinds, weights = list(MIX), list(MIX.values())
    async with _client(url) as client:
        while time.perf_counter() < deadline:
            kind = rng.choices(kinds, weights)[0]
            method, target, body = _request(kind, work, rng)
            started = time.perf_counter()
            try:
                response = await client.request(method, target, json=body)
            except httpx.HTTPError as err:
                tally.error(kind, f"{type(err).__name__}: {err}")
                continue
            took = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                tally.error(kind, f"HTTP {response.status_code} {response.text[:200]}")
                continue
            tally.samples.append((kind, took))


async def _increment(client: httpx.AsyncClient, path: str, tally: Tally) -> None:
    """Read the counter, write it + 1 with If-Match; retry on a conflict. Count the acknowledged write."""
    while True:
        started = time.perf_counter()
        got = await client.get(f"/afi/read?path={quote(path, safe='/')}")
        tally.samples.append(("counter-read", (time.perf_counter() - started) * 1000))
        if got.status_code != 200:
            tally.error("counter-read", f"HTTP {got.status_code} {got.text[:200]}")
            return
        value = _COUNTER_VALUE.search(got.content)
        etag = got.headers.get("etag")
        if value is None or etag is None:
            tally.error("counter-read", f"no counter value or etag in {got.content[:200]!r}")
            return
        body = f"load counter {int(value.group(1)) + 1}\n".encode()
        started = time.perf_counter()
        put = await client.put(f"/afi/write?path={quote(path, safe='/')}", content=body, headers={"If-Match": etag})
        took = (time.perf_counter() - started) * 1000
        if put.status_code == 200:
            tally.samples.append(("write", took))
            tally.acked[path] = tally.acked.get(path, 0) + 1
            return
        if put.status_code == 409:  # someone else wrote it since our read: read again
            tally.conflicts += 1
            continue
        tally.error("write", f"HTTP {put.status_code} {put.text[:200]}")
        return


async def _writer(url: str, counters: list[str], seed: int, deadline: float, tally: Tally) -> None:
    rng = random.Random(seed)
    async with _client(url) as client:
        while time.perf_counter() < deadline:
            try:
                await _increment(client, rng.choice(counters), tally)
            except httpx.HTTPError as err:
                tally.error("write", f"{type(err).__name__}: {err}")


async def _counter_values(url: str, counters: list[str]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    async with _client(url) as client:
        for path in counters:
            got = await client.get(f"/afi/read?path={quote(path, safe='/')}")
            value = _COUNTER_VALUE.search(got.content) if got.status_code == 200 else None
            out[path] = int(value.group(1)) if value else None
    return out


async def _phase(
    url: str, work: Workload, *, clients: int, writers: int, seconds: float, seed: int, pid: int | None = None
) -> Tally:
    tally = Tally()
    deadline = time.perf_counter() + seconds
    counters = work.file_counters + work.note_counters
    tasks = [_reader(url, work, seed + i, deadline, tally) for i in range(clients)]
    tasks += [_writer(url, counters, seed + 1000 + i, deadline, tally) for i in range(writers)]
    if pid is not None:
        tasks.append(_midway(pid, int(url.rsplit(":", 1)[1]), seconds, clients + writers, tally))
    await asyncio.gather(*tasks)
    return tally


async def _midway(pid: int, port: int, seconds: float, connections: int, tally: Tally) -> None:
    """Sample the server halfway through the phase, again every 50 ms until it holds every client's
    connection (one may be between two: on a busy machine a client can still be connecting) or the
    phase is three quarters through; keep the sample that saw the most connections."""
    await asyncio.sleep(seconds / 2)
    give_up = time.perf_counter() + seconds / 4
    best = server_resources(pid, port)
    while sum(best["connections_by_process"]) < connections and time.perf_counter() < give_up:
        await asyncio.sleep(0.05)
        again = server_resources(pid, port)
        if sum(again["connections_by_process"]) > sum(best["connections_by_process"]):
            best = again
    tally.midway = best


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "count": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values, default=float("nan")),
    }


def run_phase(
    server: Server, work: Workload, *, clients: int, writers: int, seconds: float, seed: int
) -> dict[str, Any]:
    """Drive one phase against a server; return its figures (and the counters' check for a writer)."""
    counters = work.file_counters + work.note_counters
    before_values = asyncio.run(_counter_values(server.url, counters)) if writers else {}
    before = server_resources(server.proc.pid)
    cpu, wall = time.process_time(), time.perf_counter()
    tally = asyncio.run(
        _phase(server.url, work, clients=clients, writers=writers, seconds=seconds, seed=seed, pid=server.proc.pid)
    )
    elapsed = time.perf_counter() - wall
    generator_cpu = time.process_time() - cpu
    after = server_resources(server.proc.pid)
    kinds = sorted({kind for kind, _ in tally.samples} | set(tally.errors))
    latencies = [ms for _, ms in tally.samples]
    figures: dict[str, Any] = {
        "seconds": elapsed,
        "clients": clients,
        "writers": writers,
        "requests": len(tally.samples),
        "req_per_s": len(tally.samples) / elapsed,
        "latency_ms": _stats(latencies),
        "by_kind": {kind: _stats([ms for k, ms in tally.samples if k == kind]) for kind in kinds},
        "errors": sum(tally.errors.values()),
        "errors_by_kind": tally.errors,
        "error_examples": tally.error_examples,
        "server_cpu_percent": 100 * (after["cpu_seconds"] - before["cpu_seconds"]) / elapsed,
        # steadier than req/s on a shared machine: what each request cost, however long it waited for a core
        "server_cpu_ms_per_request": 1000 * (after["cpu_seconds"] - before["cpu_seconds"]) / max(1, len(tally.samples)),
        "generator_cpu_percent": 100 * generator_cpu / elapsed,
        "resources_after": after,
        "resources_midway": tally.midway,
    }
    figures["semantic_p50_ms"] = figures["by_kind"].get("semantic", {}).get("p50", float("nan"))
    if writers:
        after_values = asyncio.run(_counter_values(server.url, counters))
        lost, extra = 0, 0
        for path in counters:
            start, end, acked = before_values.get(path), after_values.get(path), tally.acked.get(path, 0)
            if start is None or end is None:
                lost += acked
                continue
            lost += max(0, acked - (end - start))
            extra += max(0, (end - start) - acked)
        figures.update(
            writes_acked=sum(tally.acked.values()),
            write_conflicts=tally.conflicts,
            lost_writes=lost,
            # increments stored but not acknowledged (only possible when a write's answer was lost)
            unacknowledged_writes=extra,
            counters_before=before_values,
            counters_after=after_values,
        )
    else:
        figures["lost_writes"] = 0
    return figures


def warm(server: Server, work: Workload, *, clients: int, seconds: float, seed: int) -> None:
    """An untimed run of the mix: connections, page cache, every worker's vector index."""
    asyncio.run(_phase(server.url, work, clients=clients, writers=0, seconds=seconds, seed=seed))
