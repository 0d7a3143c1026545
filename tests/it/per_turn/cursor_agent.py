#!/usr/bin/env python3
"""A stand-in for Cursor's cursor-agent (not on any package registry): `--print
--output-format stream-json [--model=M] [--resume=ID] [--force] -- PROMPT`, writing the
stream-json lines Cursor documents. Each invocation appends its argv to $STANDIN_LOG.
Prompts: USE_TOOL runs a shell call, CRASH dies without a result, GARBAGE writes lines that
are not JSON (one of 20 MB without a newline) before answering."""
import json, os, sys, uuid

argv = sys.argv[1:]
with open(os.environ["STANDIN_LOG"], "a") as log:
    log.write(json.dumps(argv) + "\n")
prompt = argv[argv.index("--") + 1] if "--" in argv else ""
resume = next((a.split("=", 1)[1] for a in argv if a.startswith("--resume=")), None)
session = resume or "cur-" + uuid.uuid4().hex[:8]

def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

out({"type": "system", "subtype": "init", "session_id": session, "model": "stand-in", "cwd": os.getcwd()})
out({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}, "session_id": session})
if "CRASH" in prompt:
    sys.stderr.write("cursor-agent: something broke\n")
    sys.exit(3)
if "GARBAGE" in prompt:
    sys.stdout.write("this is not json\n")
    sys.stdout.write("x" * (20 * 1024 * 1024) + "\n")
    sys.stdout.flush()
if "USE_TOOL" in prompt:
    args = {"command": "echo from-cursor"}
    out({"type": "tool_call", "subtype": "started", "call_id": "c1", "tool_call": {"shellToolCall": {"args": args}}, "session_id": session})
    out({"type": "tool_call", "subtype": "completed", "call_id": "c1", "tool_call": {"shellToolCall": {"args": args, "result": {"success": {"stdout": "from-cursor\n", "exitCode": 0}}}}, "session_id": session})
for piece in ["Hel", "lo ", "resumed=" + str(resume)]:
    out({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": piece}]}, "session_id": session})
out({"type": "result", "subtype": "success", "is_error": False, "result": "done", "session_id": session, "duration_ms": 5})
