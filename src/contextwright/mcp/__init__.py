"""The MCP server, beside the other interfaces (server/, cli/). Inside this package the SDK is
always imported by its absolute name (`mcp.server...`), which never resolves to this package."""
