# An ACP agent whose tool call changes its title between the announce and the result, as
# real agents do ("Read a.txt" then "Read a.txt (1 line)"): the WebSocket's tool_start and
# tool_end must still name the same tool.
import json, sys, time

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

def update(sid, body):
    send({"jsonrpc": "2.0", "method": "session/update",
          "params": {"sessionId": sid, "update": body}})

for line in sys.stdin:
    message = json.loads(line)
    method, mid = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1,
              "agentCapabilities": {}, "authMethods": []}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "renaming-1"}})
    elif method == "session/prompt":
        sid = message["params"]["sessionId"]
        update(sid, {"sessionUpdate": "agent_message_chunk",
                     "content": {"type": "text", "text": "Looking."}})
        update(sid, {"sessionUpdate": "tool_call", "toolCallId": "r1", "title": "Read a.txt",
                     "kind": "read", "status": "in_progress", "rawInput": {"path": "a.txt"}})
        # The call runs a moment: corral has announced it before it is renamed.
        time.sleep(0.3)
        update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "r1",
                     "title": "Read a.txt (1 line)", "status": "completed",
                     "content": [{"type": "content",
                                  "content": {"type": "text", "text": "hello"}}]})
        update(sid, {"sessionUpdate": "agent_message_chunk",
                     "content": {"type": "text", "text": "It says hello."}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    elif mid is not None and method is not None:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
