"""Benchmark: HTTP backends against a loopback server with a fixed latency per request.

N requests with concurrency C against a server that answers each after L seconds: the ideal wall time is
N / C * L. On 2 cores the stub's own CPU makes even a bare aiohttp loop miss it by a margin that moves with the
machine's speed (1.1-1.8x at 64 in flight in one afternoon), so the bare loop is timed in the same run and ours is
also reported against it (`*_over_bare`). Reports ours / ideal for the OpenAI-compatible and the TGI client
(target with cache writes: within 1.3x at concurrency 16, 2x at 64), and requests per CPU-second of this process
(client and cache writer).
The server is a fixed-latency stub speaking each protocol's response format; it does no model work.

usage: .venv/bin/python bench/http_concurrency.py [--requests 400] [--concurrency 16] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import tempfile
import time
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from holistic_dagster.clients.openai_client import OpenAICompatibleClient
from holistic_dagster.clients.tgi_client import TGIClient
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.records import Request
from holistic_dagster.stages.completions import cache_rows
from holistic_dagster.warehouse import BackgroundWriter, Warehouse


def _serve(port: int, latency: float) -> None:
    async def completions(http: HttpRequest) -> JSONResponse:
        await http.json()
        await asyncio.sleep(latency)
        return JSONResponse(
            {
                "id": "x",
                "object": "text_completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "text": " ok", "finish_reason": "stop", "logprobs": None}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }
        )

    async def generate(http: HttpRequest) -> JSONResponse:
        await http.json()
        await asyncio.sleep(latency)
        token = {"id": 1, "text": " ok", "logprob": -0.1, "special": False}
        details = {
            "finish_reason": "length",
            "generated_tokens": 1,
            "seed": None,
            "prefill": [],
            "tokens": [token],
            "top_tokens": [],
            "best_of_sequences": None,
        }
        return JSONResponse({"generated_text": " ok", "details": details})

    async def info(_: HttpRequest) -> JSONResponse:
        return JSONResponse({"model_id": "stub", "model_sha": None, "max_input_tokens": 4096, "version": "stub"})

    app = Starlette(
        routes=[
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/generate", generate, methods=["POST"]),
            Route("/info", info, methods=["GET"]),
        ]
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def fixed_latency_server(latency: float) -> tuple[multiprocessing.Process, int]:
    """The stub runs in its own process, so that what is measured is the client."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = multiprocessing.Process(target=_serve, args=(port, latency), daemon=True)
    process.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("stub server did not start")


def bare_aiohttp(port: int, requests: int, concurrency: int) -> float:
    """Wall seconds of the least any client can do against the stub: one aiohttp session posting the same body
    with the same bound on requests in flight, reading each JSON answer, nothing else (connections warmed). On 2
    cores the stub's own CPU counts: this is the ideal this machine reaches now, beside N / C x L."""
    import aiohttp

    body = {"model": "m", "max_tokens": 1, "temperature": 0.0, "prompt": "prompt 1", "logprobs": 5}
    url = f"http://127.0.0.1:{port}/v1/completions"

    async def run() -> float:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
            gate = asyncio.Semaphore(concurrency)

            async def one() -> None:
                async with gate, session.post(url, json=body) as response:
                    await response.json()

            await asyncio.gather(*(one() for _ in range(concurrency)))
            started = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(requests)))
            return time.perf_counter() - started

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    server, port = fixed_latency_server(args.latency)
    requests = [
        Request(request_id=str(i), instance_id=str(i), kind="generate", prompt=f"prompt {i}", max_tokens=1)
        for i in range(args.requests)
    ]
    ideal = args.requests / args.concurrency * args.latency
    report = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "ideal_s": round(ideal, 3),
    }
    bare = bare_aiohttp(port, args.requests, args.concurrency)
    report["bare_aiohttp_wall_s"] = round(bare, 3)
    report["bare_aiohttp_over_ideal"] = round(bare / ideal, 3)
    clients = {
        "openai": OpenAICompatibleClient(
            ModelSpec(
                name="b",
                backend="openai",
                path="m",
                base_url=f"http://127.0.0.1:{port}/v1",
                max_concurrency=args.concurrency,
            )
        ),
        "tgi": TGIClient(
            ModelSpec(
                name="b", backend="tgi", path="m", base_url=f"http://127.0.0.1:{port}", max_concurrency=args.concurrency
            )
        ),
    }
    for name, client in clients.items():
        client.generate(requests[: args.concurrency])  # warm up connections and imports
        started, cpu = time.perf_counter(), time.process_time()
        results = client.generate(requests)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert all(not c.error for c in results), [c.error for c in results if c.error][:3]
        report[f"{name}_wall_s"] = round(wall, 3)
        report[f"{name}_over_ideal"] = round(wall / ideal, 3)
        report[f"{name}_over_bare"] = round(wall / bare, 3)
        # what one core of ours sustains (this process's CPU, all threads): the server's CPU is not counted
        report[f"{name}_requests_per_cpu_s"] = round(args.requests / cpu)
    # as the completions stage runs it: every response handed to the cache writer as it arrives
    with tempfile.TemporaryDirectory() as tmp:
        warehouse = Warehouse(Path(tmp) / "w.duckdb")
        warehouse.ensure_schema()  # as in a run, the stages before have written to it: creating it is not counted
        with BackgroundWriter(warehouse, "completion_cache") as cache:
            started, cpu = time.perf_counter(), time.process_time()
            clients["openai"].generate(requests, lambda done: cache.put(cache_rows(done, "bench", "bench")))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu  # the writer's last commit included
        cached = Warehouse(Path(tmp) / "w.duckdb").df("SELECT count(*) AS n FROM completion_cache")["n"].iat[0]
        assert cached == args.requests, cached
    report["openai_with_cache_writes_wall_s"] = round(wall, 3)
    report["openai_with_cache_writes_over_ideal"] = round(wall / ideal, 3)
    report["openai_with_cache_writes_over_bare"] = round(wall / bare, 3)
    report["openai_with_cache_writes_requests_per_cpu_s"] = round(args.requests / cpu)
    server.terminate()
    print(json.dumps(report, indent=2))
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "http_concurrency.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
