#!/usr/bin/env python3
"""A `llama-server` command for machines without llama.cpp: runs llama.cpp's own HTTP server
from the xllamacpp wheel (scripts/setup installs both) and accepts the llama-server flags
corral passes. Unknown flags are refused, so a mismatch is loud, not silent."""
import argparse
import signal
import sys
import threading

import xllamacpp


def main() -> int:
    p = argparse.ArgumentParser(prog="llama-server", description=__doc__)
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("-c", "--ctx-size", type=int, default=8192)
    p.add_argument("-t", "--threads", type=int, default=1)
    p.add_argument("-tb", "--threads-batch", type=int, default=None)
    p.add_argument("-np", "--parallel", type=int, default=1)
    p.add_argument("-a", "--alias", default=None)
    p.add_argument("--jinja", action="store_true", default=True)
    p.add_argument("--no-jinja", dest="jinja", action="store_false")
    p.add_argument("--chat-template-file", default=None)
    p.add_argument("--metrics", action="store_true")
    args = p.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostname = args.host
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads_batch or args.threads
    params.use_jinja = args.jinja
    params.endpoint_slots = True
    params.endpoint_props = True
    params.endpoint_metrics = args.metrics
    if args.alias:
        params.model_alias = args.alias
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as f:
            params.chat_template = f.read()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = xllamacpp.Server(params)
    print(f"llama-server (xllamacpp) listening on {server.listening_address}", flush=True)
    stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
