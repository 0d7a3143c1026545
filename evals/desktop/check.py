#!/usr/bin/env python3
"""The desktop tasks' check: what the program recorded in $CORRAL_EVAL_STATE/result.json.

Usage: check.py saved TEXT | form | picked LABEL | agreed | display VALUE
"""
import json
import os
import sys

path = os.path.join(os.environ["CORRAL_EVAL_STATE"], "result.json")
try:
    with open(path) as f:
        result = json.load(f)
except FileNotFoundError:
    events = os.path.join(os.environ["CORRAL_EVAL_STATE"], "events.log")
    seen = open(events).read().splitlines()[-40:] if os.path.exists(events) else []
    sys.exit("the program recorded nothing: the task was not done; it received:\n" + "\n".join(seen))
what = sys.argv[1]
if what == "form":
    want = {"name": "Ada Lovelace", "email": "ada@example.org"}
    got = {k: result.get(k) for k in want}
elif what == "agreed":
    want, got = True, result.get("agreed")
else:
    want, got = sys.argv[2], result.get(what)
    if isinstance(got, str):
        got = got.strip()
if got != want:
    events = os.path.join(os.environ["CORRAL_EVAL_STATE"], "events.log")
    seen = open(events).read().splitlines()[-40:] if os.path.exists(events) else []
    sys.exit(f"expected {want!r}, the program recorded {got!r}; it received:\n" + "\n".join(seen))
print("ok")
