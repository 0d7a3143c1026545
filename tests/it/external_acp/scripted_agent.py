import json, sys

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

next_id = [100]
asks = [0]

def request(method, params):
    next_id[0] += 1
    rid = next_id[0]
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("id") == rid and "method" not in message:
            return message
    sys.exit(0)

def say(sid, text):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
          "update": {"sessionUpdate": "agent_message_chunk",
                     "content": {"type": "text", "text": text}}}})

# Started with --effort, the agent also offers an effort option (ACP category thought_level).
EFFORT = ["medium"] if "--effort" in sys.argv else None

def options(current):
    listed = [{"id": "model", "name": "Model", "category": "model", "type": "select",
               "currentValue": current, "options": [{"value": "small", "name": "Small"},
               {"group": "big", "name": "Big", "options": [{"value": "large", "name": "Large"}]}]}]
    if EFFORT:
        listed.append({"id": "effort", "name": "Effort", "category": "thought_level",
                       "type": "select", "currentValue": EFFORT[0],
                       "options": [{"value": v, "name": v} for v in ("low", "medium", "high")]})
    return listed

for line in sys.stdin:
    message = json.loads(line)
    method, mid = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1,
              "agentCapabilities": {"loadSession": "--no-load" not in sys.argv},
              "authMethods": []}})
    elif method == "session/load":
        if "--die-on-load" in sys.argv:
            sys.stderr.write("scripted agent: cannot load\n")
            sys.exit(3)
        sid = message["params"]["sessionId"]
        with open("session_load.log", "a") as log:
            log.write(sid + "\n")
        say(sid, "REPLAYED")
        send({"jsonrpc": "2.0", "id": mid, "result": {"configOptions": options("small")}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "scripted-1",
              "configOptions": options("small")}})
    elif method == "session/set_config_option":
        params = message["params"]
        if params["configId"] == "effort" and EFFORT:
            EFFORT[0] = params["value"]
            send({"jsonrpc": "2.0", "id": mid, "result": {"configOptions": options("small")}})
            with open("set_config_option.log", "a") as log:
                log.write("effort=" + params["value"] + "\n")
            continue
        assert params["configId"] == "model", params
        send({"jsonrpc": "2.0", "id": mid, "result": {"configOptions": options(params["value"])}})
        with open("set_config_option.log", "a") as log:
            log.write(params["value"] + "\n")
    elif method == "session/prompt":
        sid = message["params"]["sessionId"]
        stop = "end_turn"
        blocks = message["params"]["prompt"]
        # The person's text is the last block; blocks before it are context (instructions).
        for command in blocks[-1]["text"].split(";"):
            command = command.strip()
            if command == "ask-and-crash":
                send({"jsonrpc": "2.0", "id": 7, "method": "session/request_permission",
                      "params": {"sessionId": sid, "toolCall": {"toolCallId": "t9",
                      "title": "rm -rf /", "kind": "execute"}, "options": []}})
                sys.stdout.flush()
                import time
                time.sleep(0.5)
                sys.stderr.write("scripted agent: gave up waiting\n")
                sys.exit(3)
            if command == "crash":
                sys.stderr.write("scripted agent: out of cheese\n")
                sys.stderr.flush()
                sys.exit(3)
            elif command.startswith("ask "):
                title = command[4:]
                asks[0] += 1
                call = "t" + str(asks[0])
                update = {"sessionUpdate": "tool_call", "toolCallId": call, "title": title,
                          "kind": "execute", "status": "pending", "rawInput": {"command": title}}
                send({"jsonrpc": "2.0", "method": "session/update",
                      "params": {"sessionId": sid, "update": update}})
                answer = request("session/request_permission", {"sessionId": sid,
                    "toolCall": {"toolCallId": call}, "options": [
                        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                        {"optionId": "always", "name": "Always", "kind": "allow_always"},
                        {"optionId": "no", "name": "No", "kind": "reject_once"}]})
                outcome = answer["result"]["outcome"]
                chosen = outcome.get("optionId", outcome["outcome"])
                status = "completed" if chosen in ("yes", "always") else "failed"
                update = {"sessionUpdate": "tool_call_update", "toolCallId": call,
                          "status": status, "rawOutput": chosen}
                send({"jsonrpc": "2.0", "method": "session/update",
                      "params": {"sessionId": sid, "update": update}})
                say(sid, "PERMISSION " + chosen + "\n")
            elif command.startswith("edit "):
                # An edit the agent makes with its own tool once allowed, as real agents do.
                path, content = command[5:].split(" ", 1)
                next_id[0] += 1
                call = "e" + str(next_id[0])
                update = {"sessionUpdate": "tool_call", "toolCallId": call,
                          "title": "Write " + path, "kind": "edit", "status": "pending",
                          "locations": [{"path": path}],
                          "content": [{"type": "diff", "path": path, "oldText": None,
                                       "newText": content}],
                          "rawInput": {"file_path": path, "content": content}}
                send({"jsonrpc": "2.0", "method": "session/update",
                      "params": {"sessionId": sid, "update": update}})
                answer = request("session/request_permission", {"sessionId": sid,
                    "toolCall": {"toolCallId": call}, "options": [
                        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                        {"optionId": "no", "name": "No", "kind": "reject_once"}]})
                outcome = answer["result"]["outcome"]
                chosen = outcome.get("optionId", outcome["outcome"])
                if chosen == "yes":
                    with open(path, "w") as f:
                        f.write(content)
                update = {"sessionUpdate": "tool_call_update", "toolCallId": call,
                          "status": "completed" if chosen == "yes" else "failed"}
                send({"jsonrpc": "2.0", "method": "session/update",
                      "params": {"sessionId": sid, "update": update}})
                say(sid, "EDIT " + chosen + "\n")
            elif command == "ask-twice":
                # Two questions at once, as an agent running two tools in parallel would.
                for rid, call in ((201, "p1"), (202, "p2")):
                    send({"jsonrpc": "2.0", "id": rid, "method": "session/request_permission",
                          "params": {"sessionId": sid, "toolCall": {"toolCallId": call,
                          "title": "touch " + call, "kind": "execute"}, "options": [
                              {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                              {"optionId": "no", "name": "No", "kind": "reject_once"}]}})
                answers = {}
                for line in sys.stdin:
                    reply = json.loads(line)
                    if reply.get("id") in (201, 202) and "method" not in reply:
                        outcome = reply["result"]["outcome"]
                        answers[reply["id"]] = outcome.get("optionId", outcome["outcome"])
                        if len(answers) == 2:
                            break
                say(sid, "ANSWERS " + answers.get(201, "?") + " " + answers.get(202, "?") + "\n")
            elif command.startswith("ask-and-read "):
                # A question, then more work while it is open: an update and an fs read,
                # whose answer says whether it came before the question's.
                send({"jsonrpc": "2.0", "id": 301, "method": "session/request_permission",
                      "params": {"sessionId": sid, "toolCall": {"toolCallId": "w1",
                      "title": "touch slow", "kind": "execute",
                      "rawInput": {"command": "touch slow"}}, "options": [
                          {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                          {"optionId": "no", "name": "No", "kind": "reject_once"}]}})
                say(sid, "ASKED\n")
                send({"jsonrpc": "2.0", "id": 302, "method": "fs/read_text_file",
                      "params": {"sessionId": sid, "path": command[len("ask-and-read "):]}})
                replies = {}
                for line in sys.stdin:
                    reply = json.loads(line)
                    if reply.get("id") in (301, 302) and "method" not in reply:
                        replies[reply["id"]] = reply
                        if reply["id"] == 302:
                            order = "READ-FIRST" if 301 not in replies else "READ-LAST"
                            say(sid, order + " " + json.dumps(reply.get("result")) + "\n")
                        if len(replies) == 2:
                            break
                outcome = replies[301]["result"]["outcome"]
                say(sid, "PERMISSION " + outcome.get("optionId", outcome["outcome"]) + "\n")
            elif command == "named-calls":
                # opencode's way (a bare title first, the command as a later title) and
                # claude-agent-acp's (its tool's name in _meta), each asking permission.
                def update(fields):
                    fields.setdefault("sessionUpdate", "tool_call_update")
                    send({"jsonrpc": "2.0", "method": "session/update",
                          "params": {"sessionId": sid, "update": fields}})
                def ask_about(call):
                    answer = request("session/request_permission", {"sessionId": sid,
                        "toolCall": {"toolCallId": call}, "options": [
                            {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                            {"optionId": "no", "name": "No", "kind": "reject_once"}]})
                    outcome = answer["result"]["outcome"]
                    chosen = outcome.get("optionId", outcome["outcome"])
                    update({"toolCallId": call, "rawOutput": chosen,
                            "status": "completed" if chosen == "yes" else "failed"})
                update({"sessionUpdate": "tool_call", "toolCallId": "n1", "title": "bash",
                        "kind": "execute", "status": "pending"})
                import time
                time.sleep(0.3)  # announced under its first title before it is retitled
                update({"toolCallId": "n1", "title": "mkdir made", "status": "in_progress",
                        "rawInput": {"command": "mkdir made"}})
                ask_about("n1")
                update({"sessionUpdate": "tool_call", "toolCallId": "n2", "title": "`ls`",
                        "kind": "execute", "status": "pending", "rawInput": {"command": "ls"},
                        "_meta": {"claudeCode": {"toolName": "Bash"}}})
                update({"toolCallId": "n2", "title": "List the files"})
                ask_about("n2")
            elif command.startswith("stop "):
                stop = command[5:]
            elif command.startswith("think "):
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
                      "update": {"sessionUpdate": "agent_thought_chunk",
                                 "content": {"type": "text", "text": command[6:]}}}})
            elif command == "plan":
                entries = [{"content": "look", "priority": "high", "status": "completed"},
                           {"content": "fix", "priority": "medium", "status": "pending"}]
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
                      "update": {"sessionUpdate": "plan", "entries": entries}}})
            elif command == "usage":
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
                      "update": {"sessionUpdate": "usage_update", "used": 1200, "size": 200000,
                                 "cost": {"amount": 0.25, "currency": "USD"}}}})
            elif command == "whoami":
                import os
                with open("agent.pid", "w") as f:
                    f.write(str(os.getpid()))
                say(sid, "HOME=" + os.environ.get("HOME", "") + "\n")
            elif command.startswith("say "):
                say(sid, command[4:])
            elif command == "blocks":
                say(sid, "BLOCKS " + json.dumps([b.get("text", "") for b in blocks]) + "\n")
            elif command.startswith("read "):
                answer = request("fs/read_text_file", {"sessionId": sid, "path": command[5:]})
                say(sid, "READ " + json.dumps(answer.get("result", answer.get("error"))) + "\n")
            elif command.startswith("write "):
                path, content = command[6:].split(" ", 1)
                answer = request("fs/write_text_file",
                                 {"sessionId": sid, "path": path, "content": content})
                say(sid, "WRITE " + json.dumps(answer.get("result", answer.get("error"))) + "\n")
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": stop,
              "usage": {"inputTokens": 30, "outputTokens": 7}}})
        if "leave-after" in message["params"]["prompt"][-1]["text"]:
            import time
            time.sleep(0.3)
            sys.stderr.write("scripted agent: leaving between turns\n")
            sys.stderr.flush()
            sys.exit(4)
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": method}})
