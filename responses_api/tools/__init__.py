"""Tools the gateway runs itself on a model's behalf: remote MCP servers
(:mod:`responses_api.tools.mcp`), called by the tool loop."""
