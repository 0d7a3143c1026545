#!/usr/bin/env python3
"""A stand-in for Google Antigravity's agent (not on any package registry): the prompt on
stdin, the answer as plain text lines on stdout. FAIL in the prompt exits 2."""
import os, sys

prompt = sys.stdin.read()
with open(os.environ["STANDIN_LOG"], "a") as log:
    log.write(repr(sys.argv[1:]) + "\t" + repr(prompt) + "\n")
if "FAIL" in prompt:
    sys.stderr.write("antigravity: no model\n")
    sys.exit(2)
print("ANTIGRAVITY line one")
print("saw " + str(len(prompt.splitlines())) + " lines")
