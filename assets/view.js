// corral's web page, part one: the state of the page and what it draws — the conversation
// log, tool cards and the approval dialog. app.js (loaded after it) talks to the server.
"use strict";

const $ = (id) => document.getElementById(id);

const state = {
  token: null,
  sessions: [],
  current: null, // selected session id
  ws: null,
  lastSeq: -1,
  failures: 0,
  pingTimer: null,
  retryTimer: null,
  running: false,
  text: null, // the streamed assistant message (a MarkdownStream) tokens are appended to
  thought: null, // the open thought block
  preambles: [], // this turn's text shown as preamble (token.final false)
  cards: new Map(), // tool_call_id -> card elements
  plan: null, // the running turn's plan list, updated in place
  confirms: [], // pending tool_confirm_request payloads, first one shown
  inTurn: false, // the socket said a turn is running (its first phase refreshes the list)
  turnFailed: false, // the running turn reported an error: its `done` says it failed
  authenticated: false, // a request with the token succeeded (not merely a socket opened)
};

// ---- helpers -------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function show(node, visible) {
  node.hidden = !visible;
}

// A session's status in words: the list and the header say the same thing, from the same
// field (the session as the server lists it, kept current from the socket).
const STATUS_WORDS = {
  starting: "starting",
  idle: "idle",
  working: "working",
  waiting_approval: "needs approval",
  dead: "closed",
};

function statusBadge(status) {
  return el("span", {
    class: "badge status status-" + (status || "unknown"),
    text: STATUS_WORDS[status] || status || "unknown",
  });
}

function setConn(text, kind) {
  const conn = $("conn");
  conn.textContent = text;
  conn.dataset.kind = kind || "";
}

// A diff as lines coloured by their first character, built with text nodes only.
function renderDiff(pre, diff) {
  pre.textContent = "";
  for (const line of String(diff).split("\n")) {
    let cls = "";
    if (line.startsWith("+++") || line.startsWith("---")) cls = "diff-file";
    else if (line.startsWith("+")) cls = "diff-add";
    else if (line.startsWith("-")) cls = "diff-del";
    else if (line.startsWith("@@")) cls = "diff-hunk";
    pre.append(el("span", { class: cls, text: line + "\n" }));
  }
}

// ---- conversation log ----------------------------------------------------------------

// An error line; the same error again right after it adds to its count instead of a line
// (a server that stays away would otherwise fill the conversation with reconnect lines).
function logError(text, ...extra) {
  const last = $("log").lastElementChild;
  if (last && last.classList.contains("error") && last.dataset.error === text) {
    const count = Number(last.dataset.count || "1") + 1;
    last.dataset.count = String(count);
    last.querySelector(".count").textContent = "×" + count;
    show(last.querySelector(".count"), true);
    return last;
  }
  const item = logItem("error", el("span", { text }), " ",
    el("span", { class: "badge count", hidden: "", text: "×1" }), ...extra);
  item.dataset.error = text;
  item.dataset.count = "1";
  return item;
}

function logItem(cls, ...children) {
  const log = $("log");
  const item = el("li", { class: "entry " + cls }, ...children);
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.append(item);
  if (atBottom) log.scrollTop = log.scrollHeight;
  return item;
}

function closeStreams() {
  if (state.text) state.text.close();
  state.text = null;
  state.thought = null;
}

// An answer from history: drawn whole, code coloured.
function assistantItem(text) {
  const body = el("div", { class: "text" });
  renderMarkdown(body, text);
  highlightCode(body);
  return logItem("assistant", body);
}

function appendText(text, final) {
  if (!state.text) {
    const body = el("div", { class: "text" });
    state.text = new MarkdownStream(body);
    const item = logItem("assistant" + (final === false ? " preamble" : ""), body);
    if (final === false) state.preambles.push(item);
  }
  state.text.append(text);
  state.thought = null;
  const log = $("log");
  log.scrollTop = log.scrollHeight;
}

function appendThought(text) {
  if (!state.thought) {
    state.thought = el("div", { class: "text" });
    const box = el("details", { class: "thought" }, el("summary", { text: "Thinking" }));
    box.append(state.thought);
    logItem("thought-entry", box);
  }
  state.thought.textContent += text;
  state.text = null;
}

function toolStart(p) {
  closeStreams();
  const status = el("span", { class: "badge status-working", text: "running" });
  const output = el("pre", { class: "tool-output", hidden: "" });
  const result = el("p", { class: "tool-result", hidden: "" });
  const change = el("div", { class: "tool-diff", hidden: "" },
    el("span", { class: "muted", text: "Change" }), el("pre", { class: "diff" }));
  const name = el("code", { text: p.tool || "tool" });
  const head = el("div", { class: "tool-head" }, name, status);
  const input = el("details", { class: "tool-input" }, el("summary", { text: "Input" }));
  input.append(el("pre", { text: pretty(p.input || {}) }));
  const card = logItem("tool-card", head, input, change, output, result);
  card.setAttribute("aria-label", "Tool call " + (p.tool || ""));
  card.dataset.tool = p.tool || "";
  state.cards.set(p.tool_call_id, { card, name, status, output, result, change });
}

function cardFor(p) {
  if (!state.cards.has(p.tool_call_id)) toolStart({ tool: p.tool, tool_call_id: p.tool_call_id });
  return state.cards.get(p.tool_call_id);
}

function toolOutput(p) {
  const c = cardFor(p);
  c.output.hidden = false;
  const chunk = el("span", { class: p.stream === "stderr" ? "stderr" : "", text: p.text || "" });
  c.output.append(chunk);
  c.output.scrollTop = c.output.scrollHeight;
}

function toolEnd(p) {
  const c = cardFor(p);
  // A card rebuilt from history may only know the title; the result names the tool.
  if (p.tool) c.name.textContent = p.tool;
  const failed = p.error != null && p.error !== "";
  c.status.textContent = failed ? "failed" : "done";
  c.status.className = "badge " + (failed ? "status-error" : "status-done");
  const took = p.duration_ms != null ? `${p.duration_ms} ms` : "";
  c.result.textContent = failed ? `Error: ${p.error}${took ? " (" + took + ")" : ""}` : "Finished in " + took;
  c.result.classList.toggle("error", failed);
  c.result.hidden = false;
  // What the tool returned, for every tool: shell and python streamed theirs already.
  if (p.output && c.output.hidden) {
    c.output.textContent = p.output;
    c.output.hidden = false;
  }
  // The change a person approved stays with the call once the dialog is gone.
  if (p.diff) showChange(c, p.diff);
}

function showChange(c, diff) {
  renderDiff(c.change.querySelector("pre"), diff);
  c.change.hidden = false;
}

// The agent's plan: each update replaces the list of the turn's plan box.
function showPlan(p) {
  closeStreams();
  if (!state.plan || !state.plan.isConnected) {
    state.plan = el("ul", { class: "plan-steps" });
    const why = el("p", { class: "plan-why muted", hidden: "" });
    logItem("plan", el("strong", { text: "Plan" }), why, state.plan);
  }
  const why = state.plan.parentNode.querySelector(".plan-why");
  why.textContent = p.explanation || "";
  show(why, !!p.explanation);
  state.plan.textContent = "";
  const marks = { completed: "✔", in_progress: "▸", pending: "○" };
  for (const entry of p.entries || []) {
    const status = marks[entry.status] ? entry.status : "pending";
    const item = el("li", { class: "plan-" + status, "data-status": status },
      el("span", { class: "plan-mark", "aria-hidden": "true", text: marks[status] }),
      el("span", { text: String(entry.content ?? "") }));
    item.setAttribute("aria-label", status.replace("_", " ") + ": " + String(entry.content ?? ""));
    state.plan.append(item);
  }
}

// The project instructions (AGENTS.md files) the session's prompt holds, above the conversation.
function showInstructions(p) {
  const files = (p.files || []).map((f) =>
    `${f.path} (${f.bytes} bytes${f.truncated ? ", truncated" : ""})`);
  if (!files.length) return;
  const item = el("li", { class: "entry instructions" },
    el("strong", { text: "Project instructions: " }), el("span", { text: files.join(" · ") }));
  $("log").prepend(item);
}

function setRunning(running) {
  state.running = running;
  $("cancel-turn").disabled = !running;
  $("send").disabled = running;
}

// ---- approvals -----------------------------------------------------------------------

function findDiff(p) {
  return p.diff || (p.preview && p.preview.diff) || (p.parameters && p.parameters.diff) || null;
}

function showConfirm(p) {
  $("approval-tool").textContent = p.tool || "tool";
  const scope = p.always && p.always.scope;
  $("approval-message").textContent = [p.message, scope].filter(Boolean).join(" — ");
  showDetails(p);
  const params = $("approval-params");
  params.textContent = "";
  for (const [key, value] of Object.entries(p.parameters || {})) {
    params.append(el("dt", { text: key }), el("dd", {}, el("pre", { text: pretty(value) })));
  }
  const dialog = $("approval");
  // "Always" only where the gate offers it, saying exactly what it would cover.
  const always = dialog.querySelector("[data-action=allow_all]");
  always.hidden = !!(p.always && p.always.offered === false);
  $("approval-always-scope").textContent = (p.always && p.always.scope) || "this tool, this session";
  if (!dialog.open) dialog.showModal();
  dialog.querySelector("[data-action=allow]").focus();
  enrichConfirm(p);
}

// The WebSocket request carries the parameters only; the pending permission as REST lists
// it also has the danger level and, for a file write, the diff against the file as it is.
async function enrichConfirm(p) {
  if (findDiff(p) && (p.danger || p.danger_level)) return;
  let pending;
  try {
    pending = listOf(await api("GET", `/sessions/${encodeURIComponent(state.current)}/permissions`),
      "permissions");
  } catch {
    return; // the dialog already shows everything needed to decide
  }
  const full = pending.find((r) => r.requestId === p.confirmation_id);
  if (!full || state.confirms[0] !== p) return;
  if (full.danger && !p.danger) p.danger = full.danger;
  if (full.diff && !p.diff) p.diff = full.diff;
  if (full.note && !p.note) p.note = full.note;
  if (full.desktop && !p.desktop) p.desktop = full.desktop;
  showDetails(p);
}

// A desktop action's marked screenshot as a data: URL, built from nothing but a known media
// type and text that is standard base64 starting with that format's signature (PNG
// "\x89PNG", JPEG "\xff\xd8\xff"); anything else is no image. The URL is set as the img's
// src property, never written into HTML.
const SCREEN_TYPES = { "image/png": "iVBORw0KGgo", "image/jpeg": "/9j/" };
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function screenUrl(image) {
  if (!image || typeof image !== "object") return null;
  const type = image.mime_type;
  const data = image.data_base64;
  if (!Object.hasOwn(SCREEN_TYPES, type) || typeof data !== "string") return null;
  if (!data.startsWith(SCREEN_TYPES[type]) || !BASE64.test(data)) return null;
  return `data:${type};base64,${data}`;
}

function point(xy) {
  return Array.isArray(xy) && xy.length === 2 && xy.every(Number.isInteger)
    ? `(${xy[0]}, ${xy[1]})` : null;
}

// What a `computer` or `windows` call will do: the marked screen, the action at its real
// coordinates, the window it reaches and the whole text it types. All of it is the model's or
// a window's own text, so it goes in as text nodes only.
function showDesktop(d) {
  const box = $("approval-desktop");
  const image = $("approval-screen");
  const facts = $("approval-desktop-facts");
  facts.textContent = "";
  if (!d || typeof d !== "object") {
    show(box, false);
    image.removeAttribute("src");
    return;
  }
  $("approval-desktop-what").textContent = String(d.description ?? "");
  const url = d.image ? screenUrl(d.image) : null;
  if (url) image.src = url;
  else image.removeAttribute("src");
  show($("approval-screen-box"), !!url);
  $("approval-screen-refused").textContent = d.image && !url
    ? "The screenshot that came with this request is not a PNG or JPEG image; it is not shown." : "";
  show($("approval-screen-refused"), !!(d.image && !url));
  const fact = (key, value) => {
    if (value) facts.append(el("dt", { text: key }), el("dd", {}, el("pre", { text: value })));
  };
  const at = point(d.point);
  const to = point(d.end);
  fact("action", [String(d.action ?? ""), at && to ? `from ${at} to ${to}` : at && `at ${at}`]
    .filter(Boolean).join(" "));
  const w = d.window;
  if (w && typeof w === "object") {
    const pid = Number.isInteger(w.pid) ? ` (pid ${w.pid})` : "";
    fact("window", `${String(w.app ?? "")}${pid} “${String(w.title ?? "")}” [id ${String(w.id ?? "")}]`);
  }
  if (typeof d.text === "string") fact(d.action === "key" ? "keys" : "text to type", d.text);
  show(box, true);
}

function showDetails(p) {
  const danger = p.danger || p.danger_level;
  $("approval-danger").textContent = danger ? "danger: " + danger : "";
  $("approval-danger").className = "badge danger-" + (danger || "none");
  show($("approval-danger"), !!danger);
  showDesktop(p.desktop);
  const diff = findDiff(p);
  show($("approval-diff-box"), !!diff || !!p.note);
  if (diff) renderDiff($("approval-diff"), diff);
  else $("approval-diff").textContent = p.note || "";
}

function answerConfirm(action) {
  const p = state.confirms.shift();
  if (p) send("tool_confirm", { confirmation_id: p.confirmation_id, action });
  if (state.confirms.length) showConfirm(state.confirms[0]);
  else {
    $("approval").close();
    if (action !== "cancel") setCurrentStatus("working", "");
  }
}

// The turn ended (or was cancelled): its open requests can no longer be answered.
function dropConfirms() {
  state.confirms = [];
  if ($("approval").open) $("approval").close();
}
