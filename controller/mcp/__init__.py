"""`panio mcp`: panio's runtime commands as Model Context Protocol tools over stdio.

    tools.py    the table: tool name -> arguments (types, bounds, defaults) -> panio argv
    args.py     checks a call's arguments against that table (a bad call is a JSON-RPC error)
    runner.py   runs one `panio --lab LAB ...` in this process: the CLI's plan and body, output captured, bounded
    results.py  turns a finished command into the tool result text (isError, exit code, JSON error)
    server.py   the SDK's low-level server on stdio (the only module that imports `mcp`)

Only ``server.py`` imports the SDK, and only ``panio mcp`` imports ``server.py``.
"""
