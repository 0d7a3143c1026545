// corral's web page, part two: a plain client of the public API (REST /api/v1 and the session
// WebSocket /ws/v1/sessions/{id}); it knows nothing the server does not publish.
"use strict";

const API = "/api/v1";
const PING_MS = 30000; // the protocol drops connections silent for 90 s
const SESSIONS_POLL_MS = 3000;
const BACKOFF_MS = [0, 1000, 2000, 4000, 8000, 16000, 30000];
const MAX_FAILURES = 10;
// Close codes after which retrying cannot help (see the WebSocket protocol).
const FATAL_CLOSE = { 4001: "unauthorized", 4003: "forbidden", 4004: "session not found" };

// ---- token ---------------------------------------------------------------------------

// The link `corral serve` prints carries the token in the fragment (`#token=…`), which a
// browser never sends to a server; `?token=` is read too. Either way it moves to this tab's
// session storage and leaves the address bar, history and bookmarks.
function loadToken() {
  const url = new URL(location.href);
  const fragment = new URLSearchParams(url.hash.slice(1));
  const fromUrl = fragment.get("token") || url.searchParams.get("token");
  if (fromUrl) {
    sessionStorage.setItem("corral-token", fromUrl);
    url.searchParams.delete("token");
    fragment.delete("token");
    const hash = fragment.toString();
    history.replaceState(null, "", url.pathname + url.search + (hash ? "#" + hash : ""));
  }
  state.token = sessionStorage.getItem("corral-token");
  state.authenticated = false;
  show($("token-form"), !state.token);
  show($("forget-token"), !!state.token);
  if (state.token) setConn("checking the token…", "");
}

// The token worked: a request made with it succeeded, so the page is "signed in". It is
// "connected" only once a session's socket has taken the token too: a socket that opened
// may still be refused (4001) a moment later.
function tokenWorked() {
  state.authenticated = true;
  if (!state.ws) setConn("signed in", "ok");
}

function askForToken(reason) {
  sessionStorage.removeItem("corral-token");
  state.token = null;
  state.authenticated = false;
  show($("token-form"), true);
  show($("forget-token"), false);
  setConn(reason || "a token is needed", "bad");
  $("token-input").focus();
}

// ---- REST ----------------------------------------------------------------------------

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + state.token };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(API + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const err = (data && data.error) || {};
    if (res.status === 401) askForToken("token refused: " + (err.message || "unauthorized"));
    const error = new Error(err.message || res.status + " " + res.statusText);
    error.status = res.status;
    throw error;
  }
  tokenWorked();
  return data;
}

function listOf(data, key) {
  if (Array.isArray(data)) return data;
  if (data && Array.isArray(data[key])) return data[key];
  return [];
}

function usageText(usage) {
  if (!usage) return "";
  // REST session info spells usage in camelCase; the WebSocket `usage` message in snake_case.
  const inTok = usage.inputTokens ?? usage.input_tokens ?? 0;
  const outTok = usage.outputTokens ?? usage.output_tokens ?? 0;
  const cost = usage.costUsd ?? usage.cost_usd;
  let text = `${inTok} in / ${outTok} out tokens`;
  if (cost) text += ` · $${Number(cost).toFixed(4)}`;
  return text;
}

async function refreshSessions() {
  if (!state.token) return;
  try {
    state.sessions = listOf(await api("GET", "/sessions"), "sessions");
    show($("sessions-error"), false);
  } catch (e) {
    $("sessions-error").textContent = "Cannot list sessions: " + e.message;
    show($("sessions-error"), true);
    return;
  }
  // The socket knows the current session's status sooner than a listing made meanwhile.
  if (state.live && state.live.id === state.current) {
    const current = state.sessions.find((s) => s.id === state.current);
    if (current && current.status !== "dead") current.status = state.live.status;
  }
  drawSessions();
}

// A session's name: its title (the first prompt, shortened by the server), else its model.
function sessionName(s) {
  return s.title || s.model || "new session";
}

function drawSessions() {
  const list = $("sessions");
  list.textContent = "";
  for (const s of state.sessions) {
    const button = el(
      "button",
      { type: "button", class: "session", "aria-current": String(s.id === state.current) },
      el("span", { class: "session-title", text: sessionName(s) }),
      statusBadge(s.status),
      el("span", { class: "session-model muted", text: [s.model, s.id.slice(0, 8), nodeText(s)].filter(Boolean).join(" · ") }),
      el("span", { class: "session-cwd muted", text: s.worktree ? "⎇ " + s.worktree : s.cwd || "" }),
      el("span", { class: "session-usage muted", text: usageText(s.usage) }),
    );
    button.dataset.id = s.id;
    button.addEventListener("click", () => selectSession(s.id));
    list.append(el("li", {}, button));
  }
  show($("sessions-empty"), state.sessions.length === 0);
  const current = state.sessions.find((s) => s.id === state.current);
  if (current) showSessionMeta(current);
}

// Where a session runs when a node does (`serve --nats`); nothing for a local one.
function nodeText(s) {
  return s.node ? "on " + s.node : "";
}

function showSessionMeta(s) {
  $("session-title").textContent = sessionName(s);
  // A worktree session's directory is its worktree: named once.
  const place = s.worktree ? "worktree " + s.worktree : s.cwd;
  const parts = [s.model, s.id.slice(0, 8), nodeText(s), place, usageText(s.usage)];
  $("session-meta").textContent = parts.filter(Boolean).join(" · ");
  $("session-status").replaceChildren(statusBadge(s.status));
  const dead = s.status === "dead";
  show($("close-session"), !dead);
  show($("cancel-turn"), !dead);
  $("message").disabled = dead;
  if (dead) $("send").disabled = true;
  show($("worktree-toggle"), Boolean(s.worktree));
  if (!s.worktree) show($("worktree-view"), false);
}

// The current session's status as the socket reports it, in the list's words; `phase` (what
// the turn is doing: thinking, writing…) is the badge's tooltip.
function setCurrentStatus(status, phase) {
  state.live = { id: state.current, status };
  const current = state.sessions.find((s) => s.id === state.current);
  if (current && current.status !== "dead") {
    current.status = status;
    drawSessions();
  }
  const badge = $("session-status").firstElementChild;
  if (badge && phase) badge.title = "now: " + phase;
}

const WORKING_PHASES = ["thinking", "analyzing", "researching", "deep_thinking", "writing",
  "delegating"];

// The worktree a session works in: what changed against its base, as a diff.
async function toggleWorktree() {
  const view = $("worktree-view");
  if (!view.hidden) {
    show(view, false);
    return;
  }
  $("worktree-summary").textContent = "Loading…";
  $("worktree-diff").textContent = "";
  show(view, true);
  try {
    const wt = await api("GET", `/sessions/${encodeURIComponent(state.current)}/worktree`);
    const files = wt.files.length;
    $("worktree-summary").textContent =
      `${wt.path} · branch ${wt.branch} · base ${String(wt.base).slice(0, 7)} · ` +
      `${files} changed file${files === 1 ? "" : "s"}`;
    renderDiff($("worktree-diff"), wt.diff || "(no changes)");
  } catch (e) {
    $("worktree-summary").textContent = "Cannot load the worktree: " + e.message;
  }
}

// ---- WebSocket -----------------------------------------------------------------------

function wsUrl(id) {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  let url = `${proto}//${location.host}/ws/v1/sessions/${encodeURIComponent(id)}`;
  url += "?token=" + encodeURIComponent(state.token);
  if (state.lastSeq >= 0) url += "&last_seq=" + state.lastSeq;
  return url;
}

function send(type, payload) {
  if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
    logError("Not connected; " + type + " not sent.");
    return false;
  }
  state.ws.send(JSON.stringify({ type, payload: payload || {} }));
  return true;
}

function disconnect() {
  clearInterval(state.pingTimer);
  clearTimeout(state.retryTimer);
  if (state.ws) {
    state.ws.onclose = null;
    state.ws.close(1000);
    state.ws = null;
  }
}

function connect() {
  const id = state.current;
  if (!id || !state.token) return;
  setConn("connecting…", "");
  const ws = new WebSocket(wsUrl(id));
  state.ws = ws;
  let heard = false;
  ws.onopen = () => {
    // Not "connected" yet: the server checks the token after the upgrade and refuses with
    // 4001; its first message (the session's state) says the token worked.
    setConn("connecting… (checking the token)", "");
    clearInterval(state.pingTimer);
    state.pingTimer = setInterval(() => send("ping"), PING_MS);
  };
  ws.onmessage = (event) => {
    let msg;
    try {
      msg = JSON.parse(event.data);
    } catch {
      return;
    }
    if (!heard) {
      heard = true;
      state.failures = 0;
      state.authenticated = true;
      setConn("connected", "ok");
    }
    if (typeof msg.seq === "number") {
      // Replays after a reconnect may overlap what was already shown.
      if (msg.seq <= state.lastSeq) return;
      // A gap means the server's replay buffer no longer reached back: rebuild from history.
      if (state.lastSeq >= 0 && msg.seq > state.lastSeq + 1) reloadHistory(id);
      state.lastSeq = msg.seq;
    }
    handle(msg.type, msg.payload || {});
  };
  ws.onclose = (event) => {
    clearInterval(state.pingTimer);
    if (state.ws !== ws) return;
    state.ws = null;
    if (FATAL_CLOSE[event.code]) {
      setConn("disconnected: " + FATAL_CLOSE[event.code], "bad");
      if (event.code === 4001) askForToken("token refused by the session socket");
      return;
    }
    state.failures += 1;
    if (state.failures > MAX_FAILURES) {
      setConn("disconnected; gave up after " + MAX_FAILURES + " attempts", "bad");
      logError("Lost the connection to the server.",
        el("button", { type: "button", class: "retry", text: "Reconnect" }));
      return;
    }
    const wait = BACKOFF_MS[Math.min(state.failures - 1, BACKOFF_MS.length - 1)];
    setConn(`reconnecting in ${Math.round(wait / 1000)} s…`, "warn");
    // One line, counted, however often it happens in a row.
    logError("Connection to the server lost; reconnecting.");
    state.retryTimer = setTimeout(connect, wait);
  };
}

function handle(type, p) {
  switch (type) {
    case "token":
      appendText(p.text || "", p.final);
      break;
    case "thought":
      appendThought(p.text || "");
      break;
    case "tool_start":
      toolStart(p);
      break;
    case "tool_output":
      toolOutput(p);
      break;
    case "tool_end":
      toolEnd(p);
      break;
    case "tool_confirm_request":
      setCurrentStatus("waiting_approval", "waiting for an answer");
      if (state.confirms.some((c) => c.confirmation_id === p.confirmation_id)) break;
      state.confirms.push(p);
      if (state.confirms.length === 1) showConfirm(p);
      break;
    case "agent_state":
      if (WORKING_PHASES.includes(p.state)) {
        // A turn began: its prompt may have just given the session its title.
        if (!state.inTurn) refreshSessions();
        state.inTurn = true;
        setRunning(true);
        if (!state.confirms.length) setCurrentStatus("working", p.state.replace("_", " "));
      }
      if (p.state === "error") state.turnFailed = true;
      if (["idle", "done", "error"].includes(p.state)) {
        state.inTurn = false;
        setRunning(false);
        dropConfirms();
        setCurrentStatus("idle", "");
      }
      break;
    case "usage":
      $("session-meta").title = usageText(p.usage || p);
      break;
    case "plan":
      showPlan(p);
      break;
    case "instructions":
      showInstructions(p);
      break;
    case "error":
      closeStreams();
      logError((p.code || "ERROR") + ": " + (p.message || ""));
      if (p.code === "CANCELLED") setRunning(false);
      break;
    case "done": {
      closeStreams();
      // token.final is false throughout a turn without tool calls: that text was the answer.
      if (!p.tool_calls) state.preambles.forEach((item) => item.classList.remove("preamble"));
      state.preambles = [];
      const parts = [];
      if (p.duration_ms != null) parts.push((p.duration_ms / 1000).toFixed(1) + " s");
      if (p.total_tokens != null) parts.push(p.total_tokens + " tokens");
      if (p.tool_calls != null) parts.push(p.tool_calls + (p.tool_calls === 1 ? " tool call" : " tool calls"));
      // `stop_reason` from this server; the turn's `agent_state error` from any.
      const failed = p.stop_reason === "error" || state.turnFailed;
      state.turnFailed = false;
      const end = failed ? "Turn failed" : p.stop_reason === "max_steps"
        ? "Turn stopped at the step limit" : "Turn finished";
      logItem(failed ? "done failed" : "done",
        el("span", { text: end + (parts.length ? " · " + parts.join(" · ") : "") }));
      state.plan = null;
      setRunning(false);
      dropConfirms();
      refreshSessions();
      break;
    }
    default:
      break; // pong and message types this page does not show
  }
}

// ---- history and selection -----------------------------------------------------------

function renderHistory(data) {
  for (const m of listOf(data, "messages")) {
    const text = typeof m.text === "string" ? m.text : pretty(m.text ?? "");
    if (m.role === "user") logItem("user", el("div", { class: "text", text }));
    else if (m.role === "assistant") assistantItem(text);
    else if (m.role === "tool") {
      const t = m.tool || {};
      const id = t.call_id || "history-" + Math.random();
      toolStart({ tool: t.name || t.title || "tool", tool_call_id: id, input: t.input || {} });
      if (t.duration_ms != null || t.error != null) {
        toolEnd({ tool_call_id: id, duration_ms: t.duration_ms, error: t.error, output: t.output,
          diff: t.diff });
      }
    }
  }
  closeStreams();
}

async function reloadHistory(id) {
  let data;
  try {
    data = await api("GET", `/sessions/${encodeURIComponent(id)}/messages`);
  } catch (e) {
    logError("Cannot load the history: " + e.message);
    return;
  }
  if (state.current !== id) return;
  $("log").textContent = "";
  state.cards.clear();
  renderHistory(data);
}

// Requests opened before this page connected are not replayed on the socket; the REST list
// of pending permissions has them, so a page opened later can still answer.
async function loadPendingConfirms(id) {
  let pending;
  try {
    pending = listOf(await api("GET", `/sessions/${encodeURIComponent(id)}/permissions`),
      "permissions");
  } catch {
    return;
  }
  if (state.current !== id) return;
  for (const r of pending) {
    if (state.confirms.some((c) => c.confirmation_id === r.requestId)) continue;
    state.confirms.push({
      confirmation_id: r.requestId,
      tool: r.tool,
      parameters: (r.toolCall && r.toolCall.rawInput) || {},
      message: r.reason || "",
      danger: r.danger,
      diff: r.diff,
      note: r.note,
      desktop: r.desktop,
    });
  }
  if (state.confirms.length) {
    setRunning(true);
    showConfirm(state.confirms[0]);
  }
}

async function selectSession(id) {
  disconnect();
  state.current = id;
  state.live = null;
  state.turnFailed = false;
  state.lastSeq = -1;
  state.failures = 0;
  state.closeArmed = false;
  $("close-session").textContent = "Close session";
  state.cards.clear();
  dropConfirms();
  closeStreams();
  setRunning(false);
  $("log").textContent = "";
  show($("no-session"), false);
  show($("session-view"), true);
  const info = state.sessions.find((s) => s.id === id);
  if (info) showSessionMeta(info);
  for (const b of document.querySelectorAll("#sessions .session")) b.setAttribute("aria-current", "false");
  refreshSessions();
  await reloadHistory(id);
  await loadPendingConfirms(id);
  // A closed session has nothing to stream: its history is all there is.
  const closed = state.sessions.find((s) => s.id === id)?.status === "dead";
  if (state.current === id && !closed) connect();
  // On a narrow window the conversation sits below the forms: bring it into view.
  if (window.matchMedia("(max-width: 720px)").matches) {
    $("create-box").open = false;
    $("session-view").scrollIntoView();
  }
  $("message").focus();
}

// Closing asks twice (the first click arms the button): it ends the session's turn and its
// processes, and a closed session cannot be reopened from here.
async function closeSession() {
  const button = $("close-session");
  if (!state.closeArmed) {
    state.closeArmed = true;
    button.textContent = "Close it: click again";
    return;
  }
  state.closeArmed = false;
  button.textContent = "Close session";
  const id = state.current;
  try {
    await api("DELETE", `/sessions/${encodeURIComponent(id)}`);
  } catch (e) {
    logError("Cannot close the session: " + e.message);
    return;
  }
  if (state.current !== id) return;
  disconnect();
  setRunning(false);
  dropConfirms();
  setCurrentStatus("dead", "");
  await refreshSessions();
}

// ---- wiring --------------------------------------------------------------------------

function init() {
  loadToken();
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const token = $("token-input").value.trim();
    if (!token) return;
    sessionStorage.setItem("corral-token", token);
    $("token-input").value = "";
    loadToken();
    refreshSessions();
    if (state.current) connect();
  });
  $("forget-token").addEventListener("click", () => {
    disconnect();
    askForToken("token forgotten");
  });
  $("create-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { permission: $("new-permission").value, worktree: $("new-worktree").checked };
    for (const [key, id] of [["cwd", "new-cwd"], ["model", "new-model"], ["base_url", "new-base-url"]]) {
      const value = $(id).value.trim();
      if (value) body[key] = value;
    }
    show($("create-error"), false);
    try {
      const created = await api("POST", "/sessions", body);
      const id = created && (created.id || (created.session && created.session.id));
      await refreshSessions();
      if (id) selectSession(id);
    } catch (err) {
      $("create-error").textContent = "Cannot create the session: " + err.message;
      show($("create-error"), true);
    }
  });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("message").value;
    if (!text.trim() || state.running) return;
    if (!send("user_message", { text, mode: "normal" })) return;
    closeStreams();
    state.turnFailed = false;
    logItem("user", el("div", { class: "text", text }));
    $("message").value = "";
    setRunning(true);
  });
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("composer").requestSubmit();
  });
  $("cancel-turn").addEventListener("click", () => send("cancel"));
  $("close-session").addEventListener("click", closeSession);
  $("worktree-toggle").addEventListener("click", toggleWorktree);
  $("log").addEventListener("click", (e) => {
    if (e.target.classList.contains("retry")) {
      state.failures = 0;
      connect();
    }
  });
  for (const b of document.querySelectorAll("#approval [data-action]")) {
    b.addEventListener("click", () => answerConfirm(b.dataset.action));
  }
  // Escape must not dismiss a request silently: the agent waits for an answer.
  $("approval").addEventListener("cancel", (e) => e.preventDefault());
  // A link with a (new) token opened in this tab: only the fragment changed, no reload.
  window.addEventListener("hashchange", () => {
    if (!new URLSearchParams(location.hash.slice(1)).has("token")) return;
    disconnect();
    loadToken();
    refreshSessions();
    if (state.current) connect();
  });
  if (state.token) refreshSessions();
  setInterval(refreshSessions, SESSIONS_POLL_MS);
}

init();
