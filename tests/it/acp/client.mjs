// Drives `corral acp` with the official ACP TypeScript SDK (npm @agentclientprotocol/sdk,
// installed by scripts/install-agent-clis): initialize → session/new → a prompt whose tool
// call needs permission (allowed) → a prompt cancelled while its permission question is open
// → set_mode / set_config_option → a second corral process replays the session with
// session/load. Prints one JSON object of what each step returned and every update seen;
// tests/it/acp.rs asserts on it.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const cfg = JSON.parse(process.argv[2]);
const acp = await import(cfg.sdk);
const { client, methods, ndJsonStream } = acp;

const out = { updates: [], permissions: [], replayed: [], fs_reads: [], fs_writes: [] };

function start() {
  const child = spawn(cfg.corral, ["acp", "-m", "llamacpp:fake-model", "--base-url", cfg.base_url], {
    cwd: cfg.cwd,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { child, stream };
}

function withTimeout(promise, ms, what) {
  return Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms)),
  ]);
}

// First process: a live session.
{
  const { child, stream } = start();
  let onPermission = null;
  const app = client({ name: "corral-test-client" })
    .onNotification(methods.client.session.update, async ({ params }) => {
      out.updates.push(params.update);
    })
    .onRequest(methods.client.session.requestPermission, async ({ params }) => {
      out.permissions.push(params);
      return onPermission(params);
    })
    // The editor's buffers: reads answered from memory, writes kept there (not saved).
    .onRequest(methods.client.fs.readTextFile, async ({ params }) => {
      out.fs_reads.push(params);
      return { content: `EDITOR BUFFER of ${params.path.split("/").pop()}` };
    })
    .onRequest(methods.client.fs.writeTextFile, async ({ params }) => {
      out.fs_writes.push(params);
      return {};
    });
  await app.connectWith(stream, async (agent) => {
    out.initialize = await agent.request(methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
    });
    const created = await agent.request(methods.agent.session.new, { cwd: cfg.cwd, mcpServers: [] });
    out.new = created;
    const sessionId = created.sessionId;

    // 1. A write needing approval: allowed once.
    onPermission = async () => ({ outcome: { outcome: "selected", optionId: "allow" } });
    out.first = await withTimeout(
      agent.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "write x" }],
      }),
      30000,
      "first prompt",
    );
    out.updates_after_first = out.updates.length;

    // 2. Cancelled while the permission question is open: the client answers `cancelled`
    // and sends session/cancel, as the spec asks; the prompt answers stopReason cancelled.
    onPermission = async () => {
      await agent.notify(methods.agent.session.cancel, { sessionId });
      return { outcome: { outcome: "cancelled" } };
    };
    out.second = await withTimeout(
      agent.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "run ls" }],
      }),
      30000,
      "second prompt",
    );

    // 3. Modes are presets; the model is a config option.
    out.set_mode = await agent.request(methods.agent.session.setMode, { sessionId, modeId: "readonly" });
    try {
      await agent.request(methods.agent.session.setMode, { sessionId, modeId: "no-such-preset" });
      out.bad_mode = "accepted";
    } catch (e) {
      out.bad_mode = { code: e.code, message: e.message };
    }
    out.set_model = await agent.request(methods.agent.session.setConfigOption, {
      sessionId,
      configId: "model",
      value: "llamacpp:other-model",
    });
    // 4. Reads go through the editor too; a path outside the root never reaches it.
    out.third = await withTimeout(
      agent.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "read notes" }],
      }),
      30000,
      "third prompt",
    );
    try {
      await agent.request(methods.agent.session.prompt, {
        sessionId: "no-such-session",
        prompt: [{ type: "text", text: "hi" }],
      });
      out.unknown_session = "accepted";
    } catch (e) {
      out.unknown_session = { code: e.code, message: e.message };
    }
    out.sessionId = sessionId;
  });
  child.stdin.end();
  out.first_exit = await new Promise((resolve) => child.on("exit", (code) => resolve(code)));
}

// Second process: the session replayed from its event log.
{
  const { child, stream } = start();
  const app = client({ name: "corral-test-client" }).onNotification(
    methods.client.session.update,
    async ({ params }) => {
      out.replayed.push(params.update);
    },
  );
  await app.connectWith(stream, async (agent) => {
    await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
    out.load = await agent.request(methods.agent.session.load, {
      sessionId: out.sessionId,
      cwd: cfg.cwd,
      mcpServers: [],
    });
  });
  child.stdin.end();
  await new Promise((resolve) => child.on("exit", resolve));
}

process.stdout.write(JSON.stringify(out));
process.exit(0);
