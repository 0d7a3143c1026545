// corral's web page: a model's answer as Markdown, made safe. The answer is untrusted (a
// prompt injection can make a model write anything), so the HTML `marked` makes always goes
// through DOMPurify before it reaches the page, and only then are code blocks highlighted
// (highlight.js writes text into spans, never markup it was given). Raw HTML in an answer is
// shown as text: an answer about HTML stays readable, and nothing in it acts.
"use strict";

// What an answer never needs, whatever the sanitizer's defaults allow: nothing that loads
// (an image URL can carry secrets out), nothing that asks for input, no styles.
const FORBIDDEN_TAGS = ["img", "picture", "video", "audio", "source", "iframe", "frame",
  "object", "embed", "form", "input", "button", "textarea", "select", "style", "link",
  "meta", "base", "svg", "math", "dialog", "template"];

const PURIFY = {
  FORBID_TAGS: FORBIDDEN_TAGS,
  FORBID_ATTR: ["style", "id", "name", "srcset", "action", "formaction"],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

const markdownReady = typeof marked !== "undefined" && typeof DOMPurify !== "undefined"
  && DOMPurify.isSupported;

if (markdownReady) {
  marked.use({
    gfm: true,
    renderer: {
      html(token) {
        return escapeHtml(token.text || token.raw || "");
      },
    },
  });
  // The one class an answer keeps: marked's `language-x` on a code block, for the
  // highlighter. Any other would let an answer dress itself as the page's own parts.
  DOMPurify.addHook("uponSanitizeAttribute", (node, data) => {
    if (data.attrName !== "class") return;
    data.keepAttr = node.tagName === "CODE" && /^language-[\w+#-]+$/.test(data.attrValue);
  });
  // Links leave the page in a new tab, telling the target nothing about it.
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  });
}
if (typeof hljs !== "undefined") hljs.configure({ ignoreUnescapedHTML: true });

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  })[c]);
}

// `source` as sanitized Markdown: a fragment with nothing in it that can run or load.
function safeFragment(source) {
  return DOMPurify.sanitize(marked.parse(String(source)), PURIFY);
}

// Draws `source` into `target` as sanitized Markdown; plain text when the scripts are missing.
function renderMarkdown(target, source) {
  if (!markdownReady) {
    target.textContent = source;
    return;
  }
  target.replaceChildren(safeFragment(source));
  target.classList.add("markdown");
}

// Colours the code blocks of a rendered answer (once it stops changing: highlighting is the
// costly part, and a block still streaming would be coloured again at every token).
function highlightCode(target) {
  if (typeof hljs === "undefined") return;
  for (const code of target.querySelectorAll("pre code:not(.hljs)")) {
    hljs.highlightElement(code);
  }
}

// A streamed answer: text arrives in small pieces, drawn at most once per frame. Blocks
// that are finished (a later block has begun) are drawn once and kept; each frame draws
// only the open block, so a long answer costs no more per token than a short one. When the
// stream ends the whole answer is drawn once more, so anything a later block changed (a
// reference link defined at the end) comes out as a whole render would.
class MarkdownStream {
  constructor(target) {
    this.target = target;
    this.source = "";
    this.pending = false;
    this.committed = 0; // characters of `source` drawn into `fixed` for good
    this.fixed = document.createElement("div");
    this.open = document.createElement("div");
    this.fixed.className = "md-fixed";
    this.open.className = "md-open";
    target.replaceChildren(this.fixed, this.open);
    target.classList.add("markdown");
  }

  append(text) {
    this.source += text;
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => this.draw());
  }

  draw() {
    if (!this.pending) return;
    this.pending = false;
    if (!markdownReady) {
      this.target.textContent = this.source;
      return;
    }
    const rest = this.source.slice(this.committed);
    const tokens = marked.lexer(rest);
    let last = tokens.length - 1;
    while (last >= 0 && tokens[last].type === "space") last -= 1;
    if (last > 0) {
      const finished = tokens.slice(0, last).map((t) => t.raw).join("");
      // Only a clean cut: the finished blocks must be exactly the text they came from.
      if (finished && rest.startsWith(finished)) {
        this.fixed.append(safeFragment(finished));
        this.committed += finished.length;
      }
    }
    this.open.replaceChildren(safeFragment(this.source.slice(this.committed)));
  }

  // The stream is over: the whole answer drawn as one, and its code coloured.
  close() {
    this.pending = false;
    renderMarkdown(this.target, this.source);
    highlightCode(this.target);
  }
}
