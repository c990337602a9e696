"""HTTP routes over ``RewardService`` (aiohttp).

    POST /v1/evaluate        {"problem": NAME | CODE | {"code", "name"}, "candidate": CODE | {"code", "name"}
                              (or "completion": MODEL OUTPUT), "options": {...}, "reward": {...}}
                             -> one answer: status, reward, speedup, cached, deduplicated, attempts, verdict,
                                queue_position and queue_wait_ms (evaluations ahead of it, and its wait
                                for one of the timed evaluations the host runs at once: admission.py)
    POST /v1/evaluate/batch  {"items": [submission, ...], "problem"/"options"/"reward": defaults for every item}
                             -> {"results": [answer, ...]} in the order given
    GET  /v1/problems        the built-in problem names
    GET  /health             200 while the dispatchers run; devices, capacity, max_timed, queue depth
    GET  /metrics            counts, queue depth, p50/p99 latency and queue wait, cache hits, max_timed (JSON)

Every error is JSON, {"error": one line}: 400 for unusable input (the missing or bad field named),
404/405 for an unknown route or method, 413 for a body over MAX_BODY_BYTES, 429 when the queue stays
full, 503 when an evaluation was lost after its retries or the server is stopping (a batch answers
such items with status "error" instead), 500 for a fault of the server itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from hercules import interrupt
from hercules.serve.problems import BadRequest
from hercules.serve.service import QueueFull, RewardService

# Problem and candidate sources are small; a batch of a few hundred stays far below this.
MAX_BODY_BYTES = 64 * 1024 * 1024


class TooLarge(ValueError):
    """The request's body is over MAX_BODY_BYTES (HTTP 413, JSON like every other error)."""


def _aiohttp():
    try:
        from aiohttp import web
    except ImportError:
        raise RuntimeError("hercules serve needs aiohttp: pip install 'hercules[serve]'") from None
    return web


def make_app(service: RewardService):
    web = _aiohttp()

    def reply(data: Any, status: int = 200):
        return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, allow_nan=False))

    async def body(request) -> dict[str, Any]:
        try:
            data = await request.json()
        except web.HTTPRequestEntityTooLarge:
            raise TooLarge(f"the body is over {MAX_BODY_BYTES >> 20} MB (sources and batches are far smaller; "
                           "split a large batch)") from None
        except (ValueError, UnicodeDecodeError):
            raise BadRequest("the body must be a JSON object") from None
        if not isinstance(data, dict):
            raise BadRequest("the body must be a JSON object")
        return data

    @web.middleware
    async def errors(request, handler):
        try:
            return await handler(request)
        except BadRequest as exc:
            service.metrics.count("bad_requests")
            return reply({"error": str(exc)}, 400)
        except QueueFull as exc:
            service.metrics.count("rejected_queue_full")
            return reply({"error": str(exc)}, 429)
        except TooLarge as exc:
            service.metrics.count("bad_requests")
            return reply({"error": str(exc)}, 413)
        except web.HTTPException as exc:  # aiohttp's own answers (unknown route, wrong method): JSON too
            if exc.status < 400:
                raise
            return reply({"error": f"{exc.reason}: {request.method} {request.path}"}, exc.status)
        except Exception as exc:  # noqa: BLE001 -- a fault of the server: one JSON line, logged
            service.metrics.count("server_errors")
            logging.getLogger("hercules.serve").exception("unhandled error on %s", request.path)
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            return reply({"error": f"internal error: {type(exc).__name__}: {first}"}, 500)

    async def evaluate(request):
        answer = await service.evaluate(service.parse(await body(request)))
        return reply(answer.to_json(), 503 if answer.status == "error" else 200)

    async def batch(request):
        data = await body(request)
        items = data.get("items")
        if not isinstance(items, list) or not items:
            raise BadRequest("'items' must be a non-empty list of submissions")
        defaults = {k: data[k] for k in ("problem", "options", "reward") if k in data}
        submissions = []  # all valid, or none run
        for index, item in enumerate(items):
            try:
                submissions.append(service.parse(item, defaults))
            except BadRequest as exc:
                raise BadRequest(f"items[{index}]: {exc}") from None
        answers = await service.evaluate_many(submissions)
        return reply({"results": [a.to_json() for a in answers]})

    async def problems(request):
        from hercules.suite.catalog import suite_problem_names

        return reply({"problems": suite_problem_names()})

    async def health(request):
        state = service.health()
        return reply(state, 200 if state["ok"] else 503)

    async def metrics(request):
        return reply(service.metrics_json())

    async def on_startup(app):
        await service.start()

    async def on_cleanup(app):
        await service.stop()

    app = web.Application(middlewares=[errors], client_max_size=MAX_BODY_BYTES)
    app.add_routes([
        web.post("/v1/evaluate", evaluate),
        web.post("/v1/evaluate/batch", batch),
        web.get("/v1/problems", problems),
        web.get("/health", health),
        web.get("/metrics", metrics),
    ])
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


def run_server(service: RewardService, host: str = "127.0.0.1", port: int = 8700, print_fn=print) -> None:
    """Serve until the run is stopped (``hercules.interrupt``: SIGINT/SIGTERM inside
    ``stop_on_signals``): the evaluations in flight are killed and answered as lost, nothing of
    them cached, the queue dropped. Raises OSError when the address cannot be bound."""
    interrupt.run_until_stopped(_serve(make_app(service), host, port, print_fn))


async def _serve(app, host: str, port: int, print_fn) -> None:
    web = _aiohttp()
    # Connections still open when the server stops get a second, not aiohttp's default minute.
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        print_fn(f"serving on http://{host}:{port}")
        await asyncio.Event().wait()  # until the stop cancels this
    finally:
        await runner.cleanup()
