"""A small A2A 1.0 agent written with the official A2A Python SDK (a2a-sdk 1.3.0): a text
statistician that counts the words of what it is sent. A Hermes agent can delegate to it like
to one of its own (`[agents.stats] a2a = { card_url = "http://127.0.0.1:8765" }`).

    pip install "a2a-sdk[http-server]==1.3.0" "uvicorn==0.55.0"
    python examples/a2a/agent.py --port 8765

It serves both bindings (JSON-RPC at /, HTTP+JSON below /) and its card at
/.well-known/agent-card.json, and prints `ready` once it listens. For demos and tests it also
behaves on cue: a task containing "fail" fails, one containing "slow" works for `--slow`
seconds first (and can be cancelled meanwhile), one containing "ask me" asks for input.
With A2A_EXAMPLE_TOKEN set, callers must send `Authorization: Bearer <that token>`.
"""

import argparse
import asyncio
import os
import socket

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse

from a2a.helpers.proto_helpers import get_message_text, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    Task,
    TaskState,
    TaskStatus,
)


class WordCounter(AgentExecutor):
    def __init__(self, slow_seconds: float):
        self.slow_seconds = slow_seconds

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = get_message_text(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message],
            ))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        if "slow" in text:
            await asyncio.sleep(self.slow_seconds)
        if "fail" in text:
            await updater.failed(updater.new_agent_message(
                [new_text_part("I cannot count a text that asks me to fail.")]))
            return
        if "ask me" in text:
            await updater.requires_input(updater.new_agent_message(
                [new_text_part("Which language is the text in?")]))
            return
        words = len(text.split())
        await updater.add_artifact([new_text_part(f"The text has {words} words.")], name="stats")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel(updater.new_agent_message([new_text_part("Counting stopped.")]))


def card(base_url: str) -> AgentCard:
    return AgentCard(
        name="stats",
        description="Counts the words of a text (an A2A agent written with the Python SDK)",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base_url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=base_url, protocol_binding="HTTP+JSON", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="count_words", name="count words",
                           description="Counts the words of a text", tags=["text"])],
    )


def app(base_url: str, slow_seconds: float) -> Starlette:
    agent_card = card(base_url)
    handler = DefaultRequestHandler(
        agent_executor=WordCounter(slow_seconds),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
    )
    routes = (create_agent_card_routes(agent_card)
              + create_jsonrpc_routes(handler, "/")
              + create_rest_routes(handler))
    application = Starlette(routes=routes)
    token = os.environ.get("A2A_EXAMPLE_TOKEN")
    if token:
        @application.middleware("http")
        async def bearer(request, call_next):
            if request.url.path.endswith("agent-card.json"):
                return await call_next(request)
            if request.headers.get("authorization") != f"Bearer {token}":
                return JSONResponse({"error": "send Authorization: Bearer <token>"}, 401)
            return await call_next(request)
    return application


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--slow", type=float, default=5.0, help="seconds a 'slow' task works")
    args = p.parse_args()
    base_url = f"http://{args.host}:{args.port}"
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    print("ready", flush=True)
    config = uvicorn.Config(app(base_url, args.slow), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
