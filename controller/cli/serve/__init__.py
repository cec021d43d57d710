"""Long-running processes: the worker, the recorder, the dashboard, the MCP server; the daemons they leave."""
