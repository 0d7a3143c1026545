# Drives `corral mcp` with the official Python MCP SDK (PyPI `mcp`): a client nobody here
# wrote. Prints one JSON object with what each step returned; tests/it/mcp.rs asserts on it.
import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

cfg = json.loads(sys.argv[1])


async def timeout_scenario(call, out):
    """Nobody answers the permission request: the config's approval timeout denies it."""
    opened = await call(
        "agent_open",
        {"cwd": cfg["cwd"], "model": "llamacpp:fake-model", "base_url": cfg["base_url"]},
    )
    aid = opened["agent_id"]
    out["send"] = await call("agent_send", {"agent_id": aid, "text": "write x"})
    deadline = time.monotonic() + 30
    output = {}
    while time.monotonic() < deadline:
        output = await call(
            "agent_output", {"agent_id": aid, "which": "full_turn", "include_tools": True}
        )
        if output.get("done"):
            break
        await asyncio.sleep(0.05)
    out["output"] = output
    out["pending"] = (await call("agent_pending", {"agent_id": aid}))["pending"]


async def main():
    out = {}
    params = StdioServerParameters(
        command=cfg["corral"], args=["mcp"], env=dict(os.environ), cwd=cfg["cwd"]
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            out["server"] = init.serverInfo.name
            out["tools"] = sorted(t.name for t in (await s.list_tools()).tools)

            async def call(name, args):
                res = await s.call_tool(name, args)
                text = res.content[0].text if res.content else ""
                if res.isError:
                    return {"isError": True, "text": text}
                return json.loads(text)

            if cfg.get("scenario") == "timeout":
                await timeout_scenario(call, out)
                print(json.dumps(out))
                return
            out["bad_cwd"] = await call("agent_open", {"cwd": "/nonexistent/dir"})
            out["bad_args"] = await call("agent_open", {"model": "x"})
            opened = await call(
                "agent_open",
                {
                    "cwd": cfg["cwd"],
                    "model": "llamacpp:fake-model",
                    "base_url": cfg["base_url"],
                    "id": "mcp-one",
                },
            )
            out["open"] = opened
            aid = opened["agent_id"]
            out["send"] = await call("agent_send", {"agent_id": aid, "text": "write x"})
            deadline = time.monotonic() + 30
            pending = []
            while not pending and time.monotonic() < deadline:
                pending = (await call("agent_pending", {"agent_id": aid}))["pending"]
                if not pending:
                    await asyncio.sleep(0.05)
            out["pending"] = pending
            out["bad_decision"] = await call(
                "agent_approve",
                {"agent_id": aid, "request_id": pending[0]["requestId"], "decision": "maybe"},
            )
            out["approve"] = await call(
                "agent_approve",
                {"agent_id": aid, "request_id": pending[0]["requestId"], "decision": "allow"},
            )
            output = {}
            while time.monotonic() < deadline:
                output = await call(
                    "agent_output",
                    {"agent_id": aid, "which": "full_turn", "include_tools": True},
                )
                if output.get("done"):
                    break
                await asyncio.sleep(0.05)
            out["output"] = output
            out["last"] = await call("agent_output", {"agent_id": aid, "max_chars": 4})
            out["run"] = await call("agent_run", {"agent_id": aid, "text": "again", "timeout": 30})
            out["set_model"] = await call(
                "agent_set_model", {"agent_id": aid, "model": "llamacpp:other-model"}
            )
            out["bad_model"] = await call("agent_set_model", {"agent_id": aid, "model": "a:b:c"})
            out["run_switched"] = await call(
                "agent_run", {"agent_id": aid, "text": "third", "timeout": 30}
            )
            out["status"] = await call("agent_status", {"agent_id": aid})
            out["close"] = await call("agent_close", {"agent_id": aid})
            out["list"] = await call("agent_list", {})
            out["unknown_agent"] = await call("agent_status", {"agent_id": "nope"})
            # A dead id reopens in its slot; `only` narrows the tools, `effort` is applied.
            out["reopen"] = await call(
                "agent_open",
                {
                    "cwd": cfg["cwd"],
                    "model": "llamacpp:fake-model",
                    "base_url": cfg["base_url"],
                    "id": "mcp-one",
                    "only": ["read_file"],
                    "effort": "high",
                },
            )
            out["reopen_run"] = await call(
                "agent_run", {"agent_id": "mcp-one", "text": "write again", "timeout": 30}
            )
            out["bad_only"] = await call(
                "agent_open", {"cwd": cfg["cwd"], "only": ["no_such_tool"]}
            )
            out["list_after"] = await call("agent_list", {})
            try:
                res = await s.call_tool("no_such_tool", {})
                out["unknown_tool"] = "result: " + str(res)
            except Exception as e:  # the SDK raises McpError for a JSON-RPC error
                out["unknown_tool"] = "protocol error: " + str(e)
    if cfg.get("scenario") != "timeout":
        print(json.dumps(out))


asyncio.run(main())
