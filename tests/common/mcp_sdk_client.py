"""The official MCP Python SDK (`mcp`, in .tools/venv) calling Hermes' MCP server, for the
tests in tests/suite/mcp_agents.rs.

    python mcp_sdk_client.py <url> <token> <tool> <arguments as JSON>

lists the tools, calls <tool> with a plain `tools/call` (no tasks extension) and prints one
JSON object: {"protocol": the negotiated revision, "tools": [names], "is_error": bool, "text": str, "structured": object|null}.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str, tool: str, arguments: dict) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            result = await client.call_tool(tool, arguments, read_timeout_seconds=120)
            protocol = client.protocol_version
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    print(
        json.dumps(
            {
                "protocol": protocol,
                "tools": [t.name for t in tools.tools],
                "is_error": bool(result.is_error),
                "text": "\n".join(texts),
                "structured": result.structured_content,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))
