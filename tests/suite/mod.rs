mod mcp_client;
