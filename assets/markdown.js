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

// Draws `source` into `target` as sanitized Markdown; plain text when the scripts are missing.
function renderMarkdown(target, source) {
  if (!markdownReady) {
    target.textContent = source;
    return;
  }
  const html = marked.parse(String(source));
  target.replaceChildren(DOMPurify.sanitize(html, PURIFY));
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

// A streamed answer: text arrives in small pieces, drawn at most once per frame.
class MarkdownStream {
  constructor(target) {
    this.target = target;
    this.source = "";
    this.pending = false;
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
    renderMarkdown(this.target, this.source);
  }

  // The stream is over: draw what is left now, and colour its code.
  close() {
    this.pending = true;
    this.draw();
    highlightCode(this.target);
  }
}
