"""The official MCP Python SDK (`mcp`, in .tools/venv) negotiating the tasks extension
(`io.modelcontextprotocol/tasks`) with Hermes' MCP server, for tests/suite/mcp_agents.rs.

The SDK has no built-in tasks client, but its extension interface lets a client claim the
`resultType: "task"` answer of `tools/call` and resolve it: this one follows the task with
`tasks/get` (at the server's poll interval) to its end, and with `cancel` sends `tasks/cancel`
once the task is working.

    python mcp_sdk_tasks.py <url> <token> <tool> <arguments as JSON> [cancel]

prints {"protocol", "task_id", "statuses": [seen by tasks/get], "is_error", "text"}.
"""

import asyncio
import json
import sys
from typing import Any, ClassVar, Literal

from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, TextContent
from mcp_types._types import MCPModel, Request, RequestParams, Result
from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

TASKS = "io.modelcontextprotocol/tasks"


class TaskParams(RequestParams):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    task_id: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    # Tasks requests name their task in the `Mcp-Name` header on the 2026-07-28 wire.
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param: ClassVar[str | None] = "taskId"


class TaskState(Result):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")
    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Ack(Result):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")
    result_type: str | None = None


class CreatedTask(Result):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class Tasks(ClientExtension):
    identifier = TASKS

    def __init__(self, cancel: bool) -> None:
        self.cancel = cancel
        self.task_id: str | None = None
        self.statuses: list[str] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.follow)]

    async def follow(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.task_id = created.task_id
        self.statuses.append(created.status)
        cancel_sent = False
        while True:
            await asyncio.sleep(min(max((created.poll_interval_ms or 1000) / 1000, 0.1), 1.0))
            state = await ctx.session.send_request(GetTask(params=TaskParams(task_id=created.task_id)), TaskState)
            if not self.statuses or self.statuses[-1] != state.status:
                self.statuses.append(state.status)
            if state.status == "completed":
                return CallToolResult.model_validate(state.result)
            if state.status in ("failed", "cancelled"):
                why = state.status_message or json.dumps(state.error)
                return CallToolResult(content=[TextContent(type="text", text=f"{state.status}: {why}")], is_error=True)
            if self.cancel and not cancel_sent and state.status == "working":
                await ctx.session.send_request(CancelTask(params=TaskParams(task_id=created.task_id)), Ack)
                cancel_sent = True


async def main(url: str, token: str, tool: str, arguments: dict, cancel: bool) -> None:
    tasks = Tasks(cancel)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with Client(streamable_http_client(url, http_client=http), extensions=[tasks]) as client:
            result = await client.call_tool(tool, arguments, read_timeout_seconds=120)
            protocol = client.protocol_version
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    print(
        json.dumps(
            {
                "protocol": protocol,
                "task_id": tasks.task_id,
                "statuses": tasks.statuses,
                "is_error": bool(result.is_error),
                "text": "\n".join(texts),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5:] == ["cancel"]))
