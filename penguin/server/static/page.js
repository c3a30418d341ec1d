// The page of `penguin server` (spec S8): the sessions of the project's agents, a form to
// create one, the live conversation of the selected session (its history from
// /messages, then its SSE stream), the composer, Allow / Allow for session / Deny /
// Deny with a reason on pending calls, the approval-mode selector, Abort, Archive and
// Delete.
//
// One ES module, no dependencies. Everything that came from a model, a tool or a file is
// put in the page with textContent (or a Text node), never parsed as HTML. The page is
// served under `default-src 'self'`, so it has no inline script or style.

const POLL_MS = 2500;
// The session list holds the newest LIST_PAGE sessions of each agent, and "Show older
// sessions" adds as many again: the list is polled, and all of a root that holds a few
// batches (thousands of sessions) every POLL_MS would keep the server and the page busy.
const LIST_PAGE = 200;
const LIMIT_MAX = 1000; // the most one listing gives (the API's `limit`)
const REOPEN_MS = 3000;
// A waiting call's buttons take no click in their first ARM_MS, as `penguin chat` takes no
// key (spec chat.md C5.1): a click meant for what was under the pointer a moment before
// (the second click of a double click, the conversation scrolling a new call in) is not
// an answer.
const ARM_MS = 300;
const COLLAPSED_LINES = 4;
const COLLAPSED_CHARS = 600;
// An MCP call's arguments (its tools are mcp__<server>__<tool>): all listed up to
// MCP_ARGUMENTS, each value cut after VALUE_CHARS until expanded, as penguin chat does.
const MCP_PREFIX = "mcp__";
const MCP_ARGUMENTS = 40;
const VALUE_CHARS = 300;

const MODE_HELP = {
  "allow-all": "run every call",
  "read-only": "ask before anything that writes",
  "always-ask": "ask before every call",
  "deny-all": "refuse every call",
};

const STEERING = /^\[user_steering\]\n?([\s\S]*?)\n?\[\/user_steering\]$/;
const FOLLOW_PX = 80;

const MAIN_ARGUMENT = ["cmd", "file_path", "source", "prompt", "chars", "process_id", "session_id"];

// ------------------------------------------------------------------ small helpers

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const init = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "offline", "The server does not answer; is penguin server still running?");
  }
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    if (response.status === 401) signedOut();
    throw new ApiError(response.status, error.code || "http_" + response.status,
      error.message || `The server answered ${response.status}.`);
  }
  return data;
}

let toastTimer = 0;
function toast(message, kind = "error") {
  const node = $("toast");
  node.textContent = message;
  node.className = "toast " + kind;
  node.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { node.hidden = true; }, 6000);
}

function report(error) {
  toast(error instanceof Error ? error.message : String(error));
}

let signedOutShown = false;
function signedOut() {
  if (signedOutShown) return;
  signedOutShown = true;
  const node = $("toast");
  node.textContent = "The server does not accept this page's sign-in any more (it was restarted " +
    "with a new token?). Open the URL penguin server printed.";
  node.className = "toast error sticky";
  node.hidden = false;
  clearTimeout(toastTimer);
}

function parseArguments(text) {
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

function mainArgument(args) {
  if (!args) return "";
  for (const name of MAIN_ARGUMENT) {
    if (typeof args[name] === "string" && args[name] !== "") return args[name];
  }
  for (const [name, value] of Object.entries(args)) {
    if (name !== "description" && typeof value === "string" && value !== "") return value;
  }
  return "";
}

function firstLine(text) {
  const line = text.split("\n", 1)[0];
  return line.length < text.length ? line + " …" : line;
}

function shortId(id) {
  return id ? id.slice(-8) : "";
}

function originKey(origin) {
  return origin && origin.length ? origin.join("/") : "";
}

function depthClass(origin) {
  const depth = origin ? Math.min(origin.length, 3) : 0;
  return depth ? " depth-" + depth : "";
}

function relativeTime(iso) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return "";
  const seconds = Math.round((Date.now() - then) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
  if (seconds < 86400) return Math.round(seconds / 3600) + " h ago";
  return new Date(then).toLocaleDateString(undefined, { month: "short", day: "numeric" });
}

function sessionLabel(info) {
  if (info.title) return info.title;
  const created = Date.parse(info.createdAt);
  const when = Number.isNaN(created) ? "" : new Date(created).toLocaleString(undefined, {
    month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
  });
  return `Session ${when || shortId(info.sessionId)}`;
}

function baseName(path) {
  if (!path) return "";
  const trimmed = path.replace(/\/+$/, "");
  return trimmed.slice(trimmed.lastIndexOf("/") + 1) || trimmed;
}

// One inline Markdown span, tried in this order at each place: `code`, **bold** or
// __bold__, *italic* or _italic_ (not inside a word, so snake_case stays as it is),
// ~~struck~~, and [a link](https://…) whose address is http or https.
const INLINE = new RegExp([
  "(`[^`\\n]+`)",
  "\\*\\*(?=\\S)([^\\n]*?\\S)\\*\\*",
  "(?<![\\w_])__(?=\\S)([^\\n]*?\\S)__(?![\\w_])",
  "(?<![\\w*])\\*(?=[^\\s*])([^\\n*]*?[^\\s*])\\*(?![\\w*])",
  "(?<![\\w_])_(?=[^\\s_])([^\\n_]*?[^\\s_])_(?![\\w_])",
  "~~(?=\\S)([^\\n]*?\\S)~~",
  "\\[([^\\]\\n]+)\\]\\((https?:\\/\\/[^\\s()]+)\\)",
].join("|"), "g");

// Text with inline Markdown into `node`, as Text nodes and <code>, <strong>, <em>,
// <del> and <a> elements only: what the text says is set as text, never as markup.
function inline(node, text) {
  let done = 0;
  for (const match of text.matchAll(INLINE)) {
    const [whole, code, bold, boldUnder, italic, italicUnder, struck, label, href] = match;
    if (match.index > done) node.append(document.createTextNode(text.slice(done, match.index)));
    done = match.index + whole.length;
    if (code) {
      node.append(el("code", null, code.slice(1, -1)));
      continue;
    }
    if (label) {
      const link = el("a", "md-link", label);
      link.href = href;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      node.append(link);
      continue;
    }
    const tag = bold || boldUnder ? "strong" : italic || italicUnder ? "em" : "del";
    const span = el(tag);
    inline(span, bold || boldUnder || italic || italicUnder || struck);
    node.append(span);
  }
  if (done < text.length) node.append(document.createTextNode(text.slice(done)));
}

const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

// The cells of one Markdown table row: split on | (not \|), outer pipes dropped.
function tableCells(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
}

function isTableStart(lines, index) {
  return index + 1 < lines.length && lines[index].includes("|") && TABLE_RULE.test(lines[index + 1])
    && lines[index + 1].includes("-") && tableCells(lines[index]).length === tableCells(lines[index + 1]).length;
}

// A Markdown table (header row, rule row with optional :alignment:, body rows) as a
// <table>; each cell's text goes in as text. Alignment is a class, never a style.
function markdownTable(head, rule, rows) {
  const aligns = tableCells(rule).map((cell) => {
    const left = cell.startsWith(":");
    const right = cell.endsWith(":");
    return left && right ? "center" : right ? "right" : left ? "left" : "";
  });
  const table = el("table", "md-table");
  const row = (cells, tag) => {
    const tr = el("tr");
    aligns.forEach((align, index) => {
      const cell = el(tag, align ? "align-" + align : "");
      inline(cell, cells[index] || "");
      tr.append(cell);
    });
    return tr;
  };
  const thead = el("thead");
  thead.append(row(tableCells(head), "th"));
  const tbody = el("tbody");
  for (const line of rows) tbody.append(row(tableCells(line), "td"));
  table.append(thead, tbody);
  const wrap = el("div", "table-wrap");
  wrap.append(table);
  return wrap;
}

const HEADING = /^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;

// The list that starts at lines[start] into `container` (a deeper indent is a list
// inside the item above it; an indented line that is no item continues that item);
// returns the index of the first line after it.
function markdownList(container, lines, start) {
  const open = [];  // the lists being filled, outermost first: {indent, ordered, list, item}
  let index = start;
  for (; index < lines.length; index++) {
    const match = LIST_ITEM.exec(lines[index]);
    if (!match) {
      if (!open.length || !/^\s+\S/.test(lines[index])) break;
      const item = open[open.length - 1].item;
      item.append(document.createTextNode("\n"));
      inline(item, lines[index].trim());
      continue;
    }
    const indent = match[1].replace(/\t/g, "    ").length;
    const ordered = /\d/.test(match[2]);
    while (open.length && indent < open[open.length - 1].indent) open.pop();
    let top = open[open.length - 1];
    if (top && indent === top.indent && top.ordered !== ordered) {
      open.pop();  // the other kind at the same depth: a list of its own
      top = open[open.length - 1];
    }
    if (!top || indent > top.indent) {
      const list = el(ordered ? "ol" : "ul", "md-list");
      const first = parseInt(match[2], 10);
      if (ordered && first !== 1) list.start = first;
      (top ? top.item : container).append(list);
      top = { indent, ordered, list, item: null };
      open.push(top);
    }
    top.item = el("li");
    inline(top.item, match[3]);
    top.list.append(top.item);
  }
  return index;
}

// One paragraph's lines: plain lines as a <p>; Markdown tables, headings, lists,
// quotes and rules as what they are.
function paragraphs(container, paragraph) {
  const lines = paragraph.split("\n");
  let plain = [];
  const flush = () => {
    if (plain.join("").trim()) {
      const p = el("p");
      inline(p, plain.join("\n"));
      container.append(p);
    }
    plain = [];
  };
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index];
    if (!isTableStart(lines, index)) {
      const heading = HEADING.exec(line);
      if (heading) {
        flush();
        const node = el("h" + Math.min(heading[1].length + 2, 6), "md-heading");
        inline(node, heading[2]);
        container.append(node);
      } else if (RULE.test(line)) {
        flush();
        container.append(el("hr", "md-rule"));
      } else if (LIST_ITEM.test(line)) {
        flush();
        index = markdownList(container, lines, index) - 1;
      } else if (QUOTE.test(line)) {
        flush();
        const quoted = [];
        for (; index < lines.length && QUOTE.test(lines[index]); index++) {
          quoted.push(QUOTE.exec(lines[index])[1]);
        }
        index--;
        const quote = el("blockquote", "md-quote");
        paragraphs(quote, quoted.join("\n"));
        container.append(quote);
      } else {
        plain.push(line);
      }
      continue;
    }
    flush();
    const head = lines[index];
    const rule = lines[index + 1];
    const rows = [];
    index += 2;
    while (index < lines.length && lines[index].includes("|") && lines[index].trim()) {
      rows.push(lines[index]);
      index++;
    }
    index--;
    container.append(markdownTable(head, rule, rows));
  }
  flush();
}

// Text from the model, as paragraphs, fenced code blocks and the Markdown models write
// (tables, headings, lists, quotes, rules, `code`, bold, italic, struck text, links):
// built from nodes whose content is set as text, so nothing in it is ever markup.
function formatText(container, text) {
  container.replaceChildren();
  const parts = text.split(/^```[^\n]*\n?/m);
  parts.forEach((part, index) => {
    if (index % 2 === 1) {
      container.append(el("pre", "code-block", part.replace(/\n$/, "")));
      return;
    }
    for (const paragraph of part.split(/\n{2,}/)) {
      if (paragraph.trim()) paragraphs(container, paragraph);
    }
  });
}

// What a call would change, for the person who approves it: an edit as the lines it
// removes and adds, a written file's content, a command or prompt of several lines.
function argumentLines(name, args) {
  if (!args) return null;
  const split = (text) => text.replace(/\n$/, "").split("\n");
  const text = (value) => (typeof value === "string" ? value : "");
  if (name === "edit_file" && (text(args.old_string) || text(args.new_string))) {
    return [
      ...(text(args.old_string) ? split(args.old_string).map((line) => ["del", "- " + line]) : []),
      ...(text(args.new_string) ? split(args.new_string).map((line) => ["ins", "+ " + line]) : []),
    ];
  }
  if (name === "write_file" && text(args.content)) {
    return split(args.content).map((line) => ["ins", "+ " + line]);
  }
  for (const key of ["cmd", "prompt", "chars"]) {
    if (text(args[key]).includes("\n")) return split(args[key]).map((line) => ["", line]);
  }
  if (name.startsWith(MCP_PREFIX)) return mcpArgumentLines(args);
  return null;
}

// An MCP tool may take anything, and its line shows one argument: every argument on a
// line of its own, a long value cut (until "Show all of it") so none hides the next.
function mcpArgumentLines(args) {
  const lines = [];
  for (const [key, value] of Object.entries(args)) {
    if (key === "description") continue;
    const whole = typeof value === "string" ? value : JSON.stringify(value);
    const left = whole.length - VALUE_CHARS;
    const short = left > 0 ? `${whole.slice(0, VALUE_CHARS)}… (+${left.toLocaleString("en")} chars)` : whole;
    lines.push(["", `${key}: ${whole}`, `${key}: ${short}`]);
  }
  return lines.length ? lines : null;
}

// Lines shown collapsed to their first `limit` (a line's third item, when it has one, is
// its shorter form), with a button that shows the rest.
function collapsible(className, lines, limit) {
  const box = el("div", "detail " + className);
  const pre = el("pre", "detail-text");
  const toggle = el("button", "link output-toggle");
  toggle.type = "button";
  let expanded = false;
  const cut = lines.some(([, line, short]) => short !== undefined && short !== line);
  const draw = () => {
    const shown = expanded ? lines : lines.slice(0, limit);
    pre.replaceChildren(...shown.map(([kind, line, short]) =>
      el("span", "line " + kind, (expanded || short === undefined ? line : short) + "\n")));
    const hidden = lines.length - limit;
    toggle.hidden = hidden <= 0 && !cut;
    toggle.textContent = expanded ? "Show less"
      : hidden > 0 ? `Show ${hidden} more line${hidden === 1 ? "" : "s"} (${lines.length} in all)`
        : "Show all of it";
    box.classList.toggle("collapsed", (hidden > 0 || cut) && !expanded);
  };
  toggle.addEventListener("click", () => {
    expanded = !expanded;
    draw();
  });
  draw();
  box.append(pre, toggle);
  return box;
}

// ------------------------------------------------------------------ the conversation

class Conversation {
  constructor(root, actions) {
    this.root = root;
    this.actions = actions;
    this.reset();
  }

  reset() {
    this.root.replaceChildren();
    this.calls = new Map();
    this.streams = new Map();
    this.lastOrigin = "";
    this.labelled = new Set();
    this.replaying = false;
  }

  add(node, origin) {
    const key = originKey(origin);
    if (key && !this.labelled.has(key)) {
      this.labelled.add(key);
      const label = el("div", "subagent-label" + depthClass(origin));
      label.append(el("span", "subagent-tag", "subagent"),
        el("span", "mono", origin[origin.length - 1]));
      this.root.append(label);
    }
    node.className += depthClass(origin);
    this.root.append(node);
    return node;
  }

  note(text, kind, origin) {
    return this.add(el("div", "note " + (kind || "")), origin).appendChild(el("span", null, text));
  }

  // One message of the session: from its history or its stream.
  message(message) {
    const payload = message.payload || {};
    const origin = message.origin && message.origin.length ? message.origin : null;
    if (message.type === "session_meta") return;
    switch (payload.type) {
      case "partial_text":
      case "partial_thinking":
        this.streamed(payload, origin);
        return;
      case "text":
        if (payload.role === "user") this.userText(payload, origin);
        else this.completeText("text", payload.text, origin);
        return;
      case "thinking":
        this.completeText("thinking", payload.thinking, origin);
        return;
      case "image_url":
      case "inline_data":
        this.note(`[${payload.role === "user" ? "image sent" : "image"}]`, "muted", origin);
        return;
      case "partial_tool_call":
        if (payload.event_type === "start") this.call(payload.tool_call_id, payload.name, origin);
        return;
      case "tool_call":
        this.fillCall(payload, origin);
        return;
      case "partial_tool_call_output":
        this.partialOutput(payload, origin);
        return;
      case "tool_call_output":
        this.completeOutput(payload, origin);
        return;
      case "approval_decision":
        this.decision(payload, origin);
        return;
      case "abort":
        this.note(payload.reason ? `Interrupted: ${payload.reason}` : "Interrupted.", "warn", origin);
        return;
      case "request_end":
        if (payload.status !== "completed") this.requestFailed(payload, origin);
        return;
      case "compaction_begin":
        this.note("Compacting the conversation…", "muted", origin);
        return;
      case "compaction_end":
        this.note(payload.status === "completed" ? "Conversation compacted."
          : `Compaction ${payload.status}${payload.error_message ? ": " + payload.error_message : ""}`,
        "muted", origin);
        return;
      case "subagent":
        this.note(`Subagent ${payload.session_id} ran here (its messages are in its own trace).`,
          "muted", origin);
        return;
      default:
        // request_begin, token_usage, tool_list_ready, mcp_*: nothing to show.
    }
  }

  userText(payload, origin) {
    if (payload.sender === "harness") {
      this.note(payload.text, "muted harness", origin);
      return;
    }
    // A message sent while a task ran reaches the model wrapped in [user_steering]; the
    // person sees their own words.
    const steering = STEERING.exec(payload.text.trim());
    const node = this.add(el("div", steering ? "turn user steering" : "turn user"), origin);
    node.append(el("div", "who", origin ? "task" : steering ? "You, while it ran" : "You"));
    const body = el("div", "body");
    formatText(body, steering ? steering[1] : payload.text);
    node.append(body);
  }

  textItem(kind, origin) {
    const node = el("div", kind === "thinking" ? "turn thinking" : "turn assistant");
    if (kind === "thinking") {
      const details = el("details");
      details.append(el("summary", null, "Thinking"));
      const body = el("div", "body");
      details.append(body);
      node.append(details);
      node.body = body;
    } else {
      const body = el("div", "body");
      node.append(body);
      node.body = body;
    }
    // Streamed pieces go in as one Text node, its line breaks kept (white-space: pre-wrap).
    node.live = document.createTextNode("");
    const live = el("span", "live-text");
    live.append(node.live);
    node.body.append(live);
    this.add(node, origin);
    return node;
  }

  streamed(payload, origin) {
    const kind = payload.type === "partial_text" ? "text" : "thinking";
    const key = kind + "|" + originKey(origin);
    let item = this.streams.get(key);
    if (payload.event_type === "start" || !item || item.closed) {
      if (payload.event_type === "stop") return;
      item = this.textItem(kind, origin);
      item.classList.add("streaming");
      this.streams.set(key, item);
    }
    const piece = kind === "text" ? payload.text : payload.thinking;
    if (piece) item.live.appendData(piece);
    if (payload.event_type === "stop") {
      item.closed = true;
      item.classList.remove("streaming");
    }
  }

  completeText(kind, text, origin) {
    const key = kind + "|" + originKey(origin);
    let item = this.streams.get(key);
    this.streams.delete(key);
    if (!item) item = this.textItem(kind, origin);
    item.classList.remove("streaming");
    formatText(item.body, text || "");
  }

  // A complete message that the history already showed came again from the stream:
  // what was streamed for it goes.
  dropStreamed(message) {
    const payload = message.payload || {};
    const kind = payload.type === "text" ? "text" : payload.type === "thinking" ? "thinking" : "";
    if (!kind) return;
    const key = kind + "|" + originKey(message.origin);
    const item = this.streams.get(key);
    if (item) {
      item.remove();
      this.streams.delete(key);
    }
  }

  call(id, name, origin) {
    let call = this.calls.get(id);
    if (call) return call;
    const node = el("div", "call running");
    node.dataset.callId = id;
    const line = el("div", "call-line");
    const icon = el("span", "call-icon");
    icon.setAttribute("aria-hidden", "true");
    const tool = el("span", "tool", name || "tool");
    const description = el("span", "description");
    const argument = el("span", "argument mono");
    const verdict = el("span", "verdict");
    const buttons = el("span", "approval-buttons");
    line.append(icon, tool, description, argument, verdict, buttons);
    node.append(line);
    call = {
      node, line, tool, description, argument, verdict, buttons, detail: null, output: null,
      done: false, asked: false,
    };
    this.calls.set(id, call);
    this.add(node, origin);
    return call;
  }

  fillCall(payload, origin) {
    const call = this.call(payload.tool_call_id, payload.name, origin);
    call.tool.textContent = payload.name;
    const args = parseArguments(payload.arguments);
    const description = args && typeof args.description === "string" ? args.description : "";
    call.description.textContent = description;
    const main = args ? mainArgument(args) : payload.arguments;
    call.argument.textContent = firstLine(main || "");
    call.argument.title = main || "";
    call.node.classList.add("filled");
    const detail = argumentLines(payload.name, args);
    if (detail && !call.detail) {
      const limit = payload.name.startsWith(MCP_PREFIX) ? MCP_ARGUMENTS : COLLAPSED_LINES * 2;
      call.detail = collapsible("arguments", detail, limit);
      call.line.after(call.detail);
    }
  }

  outputOf(call) {
    if (call.output) return call.output;
    const box = el("div", "output");
    const pre = el("pre", "output-text");
    const toggle = el("button", "link output-toggle");
    toggle.type = "button";
    toggle.hidden = true;
    box.append(pre, toggle);
    call.node.append(box);
    call.output = { box, pre, toggle, text: "", expanded: false };
    toggle.addEventListener("click", () => {
      call.output.expanded = !call.output.expanded;
      this.drawOutput(call);
    });
    return call.output;
  }

  drawOutput(call) {
    const out = call.output;
    const lines = out.text.replace(/\n$/, "").split("\n");
    const long = lines.length > COLLAPSED_LINES || out.text.length > COLLAPSED_CHARS;
    if (!long || out.expanded) {
      out.pre.textContent = out.text.replace(/\n$/, "");
    } else {
      let shown = lines.slice(0, COLLAPSED_LINES).join("\n");
      if (shown.length > COLLAPSED_CHARS) shown = shown.slice(0, COLLAPSED_CHARS) + " …";
      out.pre.textContent = shown;
    }
    out.box.classList.toggle("collapsed", long && !out.expanded);
    out.toggle.hidden = !long;
    const hidden = lines.length - COLLAPSED_LINES;
    out.toggle.textContent = out.expanded ? "Show less"
      : hidden > 0 ? `Show ${hidden} more line${hidden === 1 ? "" : "s"} (${lines.length} in all)`
        : "Show all of it";
    out.box.hidden = out.text === "";
  }

  partialOutput(payload, origin) {
    const call = this.call(payload.tool_call_id, "", origin);
    if (call.done) return;
    const out = this.outputOf(call);
    if (payload.output) {
      out.text += payload.output;
      this.drawOutput(call);
    }
  }

  completeOutput(payload, origin) {
    const call = this.call(payload.tool_call_id, "", origin);
    const out = this.outputOf(call);
    out.text = payload.output || "";
    if (payload.images && payload.images.length) {
      out.text += `${out.text ? "\n" : ""}[${payload.images.length} image(s)]`;
    }
    this.drawOutput(call);
    call.done = true;
    call.node.classList.remove("running");
    const failed = payload.stop_reason && payload.stop_reason !== "completed";
    call.node.classList.add(failed ? "failed" : "ok");
    if (failed) call.node.title = `The call ended: ${payload.stop_reason}`;
  }

  decision(payload, origin) {
    const call = this.call(payload.tool_call_id, "", origin);
    const shown = { allow: "approved", deny: "denied", forbidden: "forbidden" }[payload.decision]
      || payload.decision;
    const auto = payload.decision === "allow" && !call.asked ? this.autoApproval() : "";
    call.verdict.textContent = auto || shown;
    call.verdict.className = "verdict " + shown + (auto ? " auto" : "");
    if (payload.policy_rule) call.verdict.title = `forbidden by the rule: ${payload.policy_rule}`;
    if (payload.decision !== "allow") {
      call.node.classList.remove("running");
      call.node.classList.add("refused");
    }
    this.setPending(payload.tool_call_id, false);
  }

  // Why a call nobody was asked about was allowed. The trace records only "allow", so it
  // is told from the session's mode: allow-all allows everything unasked. Live, a call
  // this page saw no question for was allowed by the mode (read-only) or the session's
  // allow-list; in the history, where the questions are not recorded, only allow-all says so.
  autoApproval() {
    const mode = this.actions.mode();
    if (mode === "allow-all") return "auto-approved (allow-all)";
    if (this.replaying) return "";
    if (mode === "read-only") return "auto-approved (read-only)";
    if (mode === "always-ask") return "auto-approved (allowed for session)";
    return "";
  }

  requestFailed(payload, origin) {
    let text = `The model request ${payload.status}`;
    if (payload.error_message) text += `: ${payload.error_message}`;
    if (payload.retry_in_ms) text += ` — retrying in ${Math.round(payload.retry_in_ms / 1000)} s`;
    this.note(text, payload.retry_in_ms ? "warn" : "error", origin);
  }

  // Allow / Deny on a call that waits for a person.
  setPending(id, pending, toolCall, origin) {
    let call = this.calls.get(id);
    if (!call && !pending) return;
    if (!call && toolCall) {
      this.fillCall(toolCall.payload, origin);
      call = this.calls.get(id);
    }
    call.node.classList.toggle("pending", pending);
    call.buttons.replaceChildren();
    if (call.reasonForm) {
      call.reasonForm.remove();
      call.reasonForm = null;
    }
    if (!pending) return;
    call.asked = true;
    call.verdict.textContent = "waiting for you";
    call.verdict.className = "verdict waiting";
    const button = (className, text, title) => {
      const node = el("button", className, text);
      node.type = "button";
      if (title) node.title = title;
      return node;
    };
    const allow = button("allow", "Allow");
    const session = button("allow session", "Allow for session",
      "Allow this call, and later calls like it without asking (a command: the same first words)");
    const deny = button("deny", "Deny");
    const reason = button("deny reason", "Deny with reason", "Deny, and tell the model why");
    const all = [allow, session, deny, reason];
    for (const node of all) node.disabled = true;
    setTimeout(() => {
      for (const node of all) node.disabled = false;
    }, ARM_MS);
    allow.addEventListener("click", () => this.actions.decide(id, { decision: "allow" }, all));
    session.addEventListener("click", () =>
      this.actions.decide(id, { decision: "allow", forSession: true }, all));
    deny.addEventListener("click", () => this.actions.decide(id, { decision: "deny" }, all));
    reason.addEventListener("click", () => this.askReason(id, call, all));
    call.buttons.append(allow, session, deny, reason);
  }

  // "Deny with reason": a line to say why; what is typed goes to the model as text.
  askReason(id, call, buttons) {
    if (call.reasonForm) {
      call.reasonForm.querySelector("input").focus();
      return;
    }
    const form = el("form", "reason-form");
    const input = el("input", "reason-input");
    input.type = "text";
    input.maxLength = 2000;
    input.placeholder = "Why not? The model reads this.";
    input.setAttribute("aria-label", "Reason for denying");
    const submit = el("button", "deny", "Deny");
    submit.type = "submit";
    const cancel = el("button", "link", "Cancel");
    cancel.type = "button";
    form.append(input, submit, cancel);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = input.value.trim();
      this.actions.decide(id, text ? { decision: "deny", reason: text } : { decision: "deny" },
        [...buttons, submit, cancel]);
    });
    cancel.addEventListener("click", () => {
      form.remove();
      call.reasonForm = null;
    });
    call.reasonForm = form;
    call.line.after(form);
    input.focus();
  }

  resolved(id, decision) {
    const call = this.calls.get(id);
    this.setPending(id, false);
    if (!call) return;
    if (call.verdict.classList.contains("waiting")) {
      call.verdict.textContent = decision === "allow" ? "approved" : "denied";
      call.verdict.className = "verdict " + call.verdict.textContent;
    }
    if (decision !== "allow") {
      call.node.classList.remove("running");
      call.node.classList.add("refused");
    }
  }

  firstPending() {
    return this.root.querySelector(".call.pending");
  }
}

// ------------------------------------------------------------------ the page

const state = {
  info: null,
  project: "",
  agents: [],
  models: [],
  sessions: new Map(),
  selected: null,
  pollTimer: 0,
  archived: false,
  listLimit: LIST_PAGE,
  more: false,
};

const conversation = new Conversation($("log"), {
  decide,
  mode: () => (state.selected ? state.selected.info.approvalMode : ""),
});

// Stick to the bottom while the person is at the bottom: new text, calls and questions
// scroll into view. Scrolling up stops that until they scroll back down or send.
let following = true;

function atBottom() {
  const scroller = $("conversation");
  return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < FOLLOW_PX;
}

function follow() {
  following = true;
  scrollToEnd();
}

function messageSignature(message) {
  return JSON.stringify([message.timestamp, message.type, message.payload, message.origin || null]);
}

function isComplete(message) {
  const type = message.payload && message.payload.type;
  return message.type !== "session_meta" && !(type && type.startsWith("partial_"));
}

// The selected session: its stream, what it buffers while history loads, its pending calls.
class Selected {
  constructor(info) {
    this.id = info.sessionId;
    this.info = info;
    this.pending = new Map();
    this.loading = true;
    this.buffer = [];
    this.lastEventId = "";
    this.source = null;
    this.reopenTimer = 0;
    this.closed = false;
    this.opened = false;
    this.generation = 0;
  }

  open() {
    if (this.closed) return;
    let url = `/api/sessions/${encodeURIComponent(this.id)}/stream`;
    if (this.lastEventId) url += `?lastEventId=${encodeURIComponent(this.lastEventId)}`;
    const source = new EventSource(url);
    this.source = source;
    setConnection("connecting");
    source.onopen = () => {
      setConnection("live");
      // A connection that comes back without an id to resume from (none was received
      // yet) cannot get the gap: draw the history again instead.
      if (this.opened && !this.lastEventId) this.load();
      this.opened = true;
    };
    source.onmessage = (event) => this.receive(event, "message");
    source.addEventListener("server_event", (event) => this.receive(event, "server_event"));
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (the server refused, or is gone): open a new one later,
        // carrying the last id ourselves.
        setConnection("offline");
        clearTimeout(this.reopenTimer);
        this.reopenTimer = setTimeout(() => this.reopen(), REOPEN_MS);
      } else {
        setConnection("reconnecting");
      }
    };
  }

  async reopen() {
    try {
      await api("GET", `/api/sessions/${encodeURIComponent(this.id)}`);
    } catch (error) {
      if (error.code === "session_not_found") {
        toast("This session was deleted.");
        this.close();
        return;
      }
    }
    this.open();
  }

  close() {
    this.closed = true;
    clearTimeout(this.reopenTimer);
    if (this.source) this.source.close();
  }

  receive(event, kind) {
    if (this.closed) return;
    if (event.lastEventId) this.lastEventId = event.lastEventId;
    let data;
    try {
      data = JSON.parse(event.data);
    } catch {
      return;
    }
    if (kind === "server_event" && data.type === "resync_required") {
      this.load();
      return;
    }
    if (this.loading) {
      this.buffer.push({ kind, data });
      return;
    }
    this.apply(kind, data);
    if (following) scrollToEnd();
  }

  apply(kind, data) {
    if (kind === "message") {
      conversation.message(data);
      return;
    }
    switch (data.type) {
      case "task_state":
        this.info.state = data.state;
        if (data.state === "failed") {
          conversation.note(`The task failed: ${data.message || "see the server's log"}`, "error");
        }
        break;
      case "approval_request": {
        const id = data.toolCall.payload.tool_call_id;
        this.pending.set(id, data);
        conversation.setPending(id, true, data.toolCall, data.origin);
        break;
      }
      case "approval_resolved":
        this.pending.delete(data.toolCallId);
        conversation.resolved(data.toolCallId, data.decision);
        break;
      default:
        return;
    }
    this.info.pendingApprovalCount = this.pending.size;
    drawSelected();
    drawSessions();
  }

  // History from the traces, then what the stream sent meanwhile (S8.2).
  async load() {
    const generation = ++this.generation;
    this.loading = true;
    this.buffer = [];
    const base = `/api/sessions/${encodeURIComponent(this.id)}`;
    let history;
    let approvals;
    try {
      [history, approvals] = await Promise.all([api("GET", `${base}/messages`), api("GET", `${base}/approvals`)]);
    } catch (error) {
      if (generation === this.generation && !this.closed) {
        report(error);
        this.loading = false;
        this.flush(new Set());
      }
      return;
    }
    if (generation !== this.generation || this.closed) return;
    conversation.reset();
    $("welcome").hidden = true;
    this.pending.clear();
    const seen = new Set();
    conversation.replaying = true;
    for (const message of history.messages) {
      conversation.message(message);
      if (isComplete(message)) seen.add(messageSignature(message));
    }
    conversation.replaying = false;
    for (const approval of approvals.approvals) {
      const id = approval.toolCall.payload.tool_call_id;
      this.pending.set(id, approval);
      conversation.setPending(id, true, approval.toolCall, approval.origin);
    }
    this.loading = false;
    this.flush(seen);
    this.info.pendingApprovalCount = this.pending.size;
    drawSelected();
    drawSessions();
    follow();
  }

  flush(seen) {
    const buffered = this.buffer;
    this.buffer = [];
    for (const { kind, data } of buffered) {
      if (kind === "message" && isComplete(data) && seen.has(messageSignature(data))) {
        conversation.dropStreamed(data);
        continue;
      }
      this.apply(kind, data);
    }
  }
}

function scrollToEnd() {
  const scroller = $("conversation");
  scroller.scrollTop = scroller.scrollHeight;
}

function setConnection(what) {
  const node = $("connection");
  node.className = "connection " + what;
  node.textContent = { live: "live", connecting: "connecting…", reconnecting: "reconnecting…", offline: "offline" }[what];
}

async function decide(id, body, buttons) {
  const selected = state.selected;
  if (!selected) return;
  for (const button of buttons) button.disabled = true;
  try {
    await api("POST", `/api/sessions/${encodeURIComponent(selected.id)}/approvals/${encodeURIComponent(id)}`, body);
  } catch (error) {
    if (error.code === "approval_not_found") {
      selected.pending.delete(id);
      conversation.setPending(id, false);
      drawSelected();
      return;
    }
    for (const button of buttons) button.disabled = false;
    report(error);
  }
}

// ------------------------------------------------------------------ drawing

function drawSessions() {
  const list = $("session-list");
  const sessions = [...state.sessions.values()].sort((a, b) => (a.lastActiveAt < b.lastActiveAt ? 1 : -1));
  $("session-empty").hidden = sessions.length > 0;
  $("session-empty").textContent = state.archived ? "No archived sessions."
    : "No sessions yet. Create one above.";
  $("archived-toggle").textContent = state.archived ? "Back to sessions" : "Show archived";
  $("more-sessions").hidden = !state.more;
  const agents = new Set(sessions.map((info) => info.agentId));
  const items = sessions.map((info) => {
    const live = state.selected && state.selected.id === info.sessionId ? state.selected.info : info;
    const item = el("li");
    const button = el("button", "session-item");
    button.type = "button";
    button.dataset.sessionId = info.sessionId;
    if (state.selected && state.selected.id === info.sessionId) button.setAttribute("aria-current", "true");
    const top = el("span", "row");
    top.append(el("span", "name", sessionLabel(live)));
    if (live.pendingApprovalCount > 0) {
      const badge = el("span", "badge pending-count", String(live.pendingApprovalCount));
      badge.title = `${live.pendingApprovalCount} call(s) wait for approval`;
      top.append(badge);
    }
    top.append(stateBadge(live.state));
    const bottom = el("span", "row sub");
    const bits = [];
    if (agents.size > 1 || live.agentId !== (state.info && state.info.agentId)) bits.push(live.agentId);
    bits.push(baseName(live.workspace), live.approvalMode);
    bottom.append(el("span", "where", bits.filter(Boolean).join(" · ")),
      el("span", "when", relativeTime(live.lastActiveAt)));
    button.append(top, bottom);
    button.addEventListener("click", () => select(info.sessionId));
    item.append(button);
    return item;
  });
  list.replaceChildren(...items);
  const waiting = sessions.reduce((sum, info) => {
    const live = state.selected && state.selected.id === info.sessionId ? state.selected.info : info;
    return sum + (live.pendingApprovalCount || 0);
  }, 0);
  const toggle = $("sidebar-toggle");
  toggle.replaceChildren(document.createTextNode("Sessions"));
  if (waiting) toggle.append(el("span", "badge pending-count", String(waiting)));
}

function stateBadge(value) {
  const badge = el("span", "badge state " + value);
  if (value === "running") badge.append(el("span", "spinner"));
  badge.append(document.createTextNode(value));
  return badge;
}

function drawSelected() {
  const selected = state.selected;
  const has = Boolean(selected);
  $("session-controls").hidden = !has;
  $("composer").hidden = !has;
  if (!has) {
    $("session-title").textContent = "No session selected";
    $("session-meta").textContent = "";
    $("pending-bar").hidden = true;
    return;
  }
  const info = selected.info;
  $("session-title").textContent = sessionLabel(info);
  $("session-title").title = info.sessionId;
  const meta = [info.workspace, `${info.provider}/${info.modelId}`, info.agentId].filter(Boolean).join("  ·  ");
  $("session-meta").textContent = meta;
  $("session-meta").title = meta;
  const badge = stateBadge(info.state);
  badge.id = "state-badge";
  $("state-badge").replaceWith(badge);
  const sandbox = $("sandbox-badge");
  sandbox.textContent = `sandbox ${info.sandboxMode || "off"}` + (info.network === false ? " · no network" : "");
  sandbox.classList.toggle("unsandboxed", (info.sandboxMode || "off") === "off");
  const mode = $("mode-select");
  if (document.activeElement !== mode) mode.value = info.approvalMode;
  const running = info.state === "running";
  $("abort-button").hidden = !running;
  $("archive-button").textContent = info.archived ? "Unarchive" : "Archive";
  $("composer-send").textContent = running ? "Steer" : "Send";
  $("composer-input").placeholder = running
    ? "Steer the running task (delivered between its turns)…"
    : "Give the agent a task…";
  const count = selected.pending.size;
  $("pending-bar").hidden = count === 0;
  $("pending-text").textContent = count === 1
    ? "1 call is waiting for your approval."
    : `${count} calls are waiting for your approval.`;
  document.title = (count ? `(${count}) ` : "") + `${sessionLabel(info)} — penguin`;
}

function fillModes(select) {
  const modes = (state.info && state.info.approvalModes) || Object.keys(MODE_HELP);
  select.replaceChildren(...modes.map((mode) => {
    const option = el("option", null, MODE_HELP[mode] ? `${mode} — ${MODE_HELP[mode]}` : mode);
    option.value = mode;
    return option;
  }));
}

function fillCreateForm() {
  const agentId = (state.info && state.info.agentId) || "default_agent";
  const agents = new Set([agentId, ...state.agents]);
  $("agent-names").replaceChildren(...[...agents].map((name) => {
    const option = el("option");
    option.value = name;
    return option;
  }));
  if (!$("create-agent").value) $("create-agent").value = agentId;
  const model = $("create-model");
  const options = [];
  const fallback = state.models.find((entry) => entry.isDefault);
  const first = el("option", null, fallback
    ? `project default (${fallback.provider}/${fallback.modelId})`
    : "project default");
  first.value = "";
  options.push(first);
  for (const entry of state.models) {
    const option = el("option", null, `${entry.provider}/${entry.modelId}`);
    option.value = JSON.stringify([entry.provider, entry.modelId]);
    options.push(option);
  }
  model.replaceChildren(...options);
  fillModes($("create-mode"));
}

// ------------------------------------------------------------------ actions

// The newest `count` sessions at `path`, in pages the API takes (at most LIMIT_MAX each).
async function newestSessions(path, count) {
  const archived = state.archived ? "&archived=1" : "";
  const found = [];
  while (found.length < count) {
    const size = Math.min(LIMIT_MAX, count - found.length);
    const offset = found.length ? `&offset=${found.length}` : "";
    const page = (await api("GET", `${path}?limit=${size}${offset}${archived}`)).sessions;
    found.push(...page);
    if (page.length < size) break;
  }
  return found;
}

async function refreshSessions() {
  const project = encodeURIComponent(state.project);
  const agentId = (state.info && state.info.agentId) || "default_agent";
  let agents;
  try {
    // AgentSummary objects ({agentId}), the reference's shape
    agents = (await api("GET", `/api/projects/${project}/agents`)).agents.map((agent) => agent.agentId);
  } catch (error) {
    if (error.status !== 401) setConnection("offline");
    return;
  }
  state.agents = agents;
  const names = [...new Set([agentId, ...agents])];
  const limit = state.listLimit;
  const lists = await Promise.all(names.map((name) =>
    newestSessions(`/api/projects/${project}/agents/${encodeURIComponent(name)}/sessions`, limit + 1)
      .catch(() => [])));
  state.more = lists.some((list) => list.length > limit);
  const fresh = new Map();
  for (const list of lists) {
    for (const info of list.slice(0, limit)) fresh.set(info.sessionId, info);
  }
  state.sessions = fresh;
  const selected = state.selected;
  if (selected && fresh.has(selected.id)) {
    // The stream knows the state and the pending calls first; the rest comes from here.
    const latest = fresh.get(selected.id);
    selected.info = { ...latest, state: selected.info.state, pendingApprovalCount: selected.pending.size };
    drawSelected();
  }
  drawSessions();
}

function schedulePoll() {
  clearTimeout(state.pollTimer);
  state.pollTimer = setTimeout(async () => {
    if (!document.hidden) await refreshSessions();
    schedulePoll();
  }, POLL_MS);
}

async function select(sessionId) {
  if (state.selected && state.selected.id === sessionId) {
    closeSidebar();
    return;
  }
  let info = state.sessions.get(sessionId);
  if (!info) {
    try {
      info = (await api("GET", `/api/sessions/${encodeURIComponent(sessionId)}`)).session;
    } catch (error) {
      report(error);
      return;
    }
  }
  if (state.selected) state.selected.close();
  conversation.reset();
  $("welcome").hidden = true;
  const selected = new Selected(info);
  state.selected = selected;
  if (location.hash !== "#" + sessionId) history.replaceState(null, "", "#" + sessionId);
  drawSelected();
  drawSessions();
  closeSidebar();
  selected.open();
  await selected.load();
  $("composer-input").focus();
}

async function createSession(event) {
  event.preventDefault();
  const agent = $("create-agent").value.trim();
  const body = { approvalMode: $("create-mode").value };
  if ($("create-sandbox").value) body.sandboxMode = $("create-sandbox").value;
  if (!$("create-network").checked) body.network = false;
  const workspace = $("create-workspace").value.trim();
  if (workspace) body.workspace = workspace;
  const title = $("create-title").value.trim();
  if (title) body.title = title;
  if ($("create-model").value) {
    const [provider, modelId] = JSON.parse($("create-model").value);
    body.provider = provider;
    body.modelId = modelId;
  }
  const button = $("create-button");
  button.disabled = true;
  try {
    const path = `/api/projects/${encodeURIComponent(state.project)}/agents/${encodeURIComponent(agent)}/sessions`;
    const info = (await api("POST", path, body)).session;
    state.sessions.set(info.sessionId, info);
    $("create-title").value = "";
    $("new-session").open = false;
    await select(info.sessionId);
  } catch (error) {
    report(error);
  } finally {
    button.disabled = false;
  }
}

async function send(event) {
  event.preventDefault();
  const selected = state.selected;
  const input = $("composer-input");
  const text = input.value;
  if (!selected || !text.trim()) return;
  const base = `/api/sessions/${encodeURIComponent(selected.id)}`;
  const running = selected.info.state === "running";
  const button = $("composer-send");
  button.disabled = true;
  follow(); // whatever was scrolled or expanded, the answer and its questions show below
  try {
    if (running) {
      await api("POST", `${base}/steer`, { text });
      toast("Sent; the agent reads it after its current turn.", "info");
    } else {
      // The stream says when it runs (task_state); it may already have said it ended.
      await api("POST", `${base}/tasks`, { input: [{ type: "text", text }] });
      if (!selected.info.title) refreshSessions(); // it is named after its first task now
    }
    // Only what was sent is cleared: words typed while the request was on its way stay.
    if (input.value === text) input.value = "";
    growComposer();
    follow();
  } catch (error) {
    report(error);
  } finally {
    button.disabled = false;
    input.focus();
  }
}

async function changeMode() {
  const selected = state.selected;
  if (!selected) return;
  const mode = $("mode-select").value;
  const before = selected.info.approvalMode;
  try {
    const info = (await api("PATCH", `/api/sessions/${encodeURIComponent(selected.id)}`, { approvalMode: mode })).session;
    selected.info = { ...info, state: selected.info.state, pendingApprovalCount: selected.pending.size };
    state.sessions.set(info.sessionId, info);
  } catch (error) {
    selected.info.approvalMode = before;
    report(error);
  }
  drawSelected();
  drawSessions();
}

async function abort() {
  const selected = state.selected;
  if (!selected) return;
  $("abort-button").disabled = true;
  try {
    await api("POST", `/api/sessions/${encodeURIComponent(selected.id)}/abort`);
  } catch (error) {
    report(error);
  } finally {
    $("abort-button").disabled = false;
  }
}

// Archive (or bring back) the selected session: it leaves this list for the other one.
async function toggleArchived() {
  const selected = state.selected;
  if (!selected) return;
  const archived = !selected.info.archived;
  try {
    await api("PATCH", `/api/sessions/${encodeURIComponent(selected.id)}`, { archived });
  } catch (error) {
    report(error);
    return;
  }
  state.sessions.delete(selected.id);
  deselect();
  toast(archived ? "Archived; find it under Show archived." : "Back in the session list.", "info");
  await refreshSessions();
}

function askDelete() {
  if (!state.selected) return;
  $("confirm-text").textContent = `Delete “${sessionLabel(state.selected.info)}”? Its task is `
    + "stopped, its processes ended and its traces removed; the workspace stays.";
  $("confirm-delete").hidden = false;
  $("confirm-yes").focus();
}

async function deleteSession() {
  $("confirm-delete").hidden = true;
  const selected = state.selected;
  if (!selected) return;
  $("delete-button").disabled = true;
  try {
    await api("DELETE", `/api/sessions/${encodeURIComponent(selected.id)}`);
  } catch (error) {
    if (error.code !== "session_not_found") {
      report(error);
      return;
    }
  } finally {
    $("delete-button").disabled = false;
  }
  state.sessions.delete(selected.id);
  deselect();
  toast("Session deleted.", "info");
  await refreshSessions();
}

function deselect() {
  if (state.selected) state.selected.close();
  state.selected = null;
  conversation.reset();
  $("welcome").hidden = false;
  $("confirm-delete").hidden = true;
  history.replaceState(null, "", location.pathname);
  drawSelected();
  drawSessions();
}

async function showOlder() {
  state.listLimit += LIST_PAGE;
  await refreshSessions();
}

async function showArchived() {
  state.archived = !state.archived;
  state.listLimit = LIST_PAGE;
  if (state.selected && Boolean(state.selected.info.archived) !== state.archived) deselect();
  await refreshSessions();
}

function growComposer() {
  const input = $("composer-input");
  input.style.height = "auto";
  input.style.height = Math.min(input.scrollHeight, 240) + "px";
}

function closeSidebar() {
  document.body.classList.remove("sidebar-open");
  $("sidebar-toggle").setAttribute("aria-expanded", "false");
}

function toggleSidebar() {
  const open = document.body.classList.toggle("sidebar-open");
  $("sidebar-toggle").setAttribute("aria-expanded", String(open));
}

// ------------------------------------------------------------------ start

async function start() {
  $("create-form").addEventListener("submit", createSession);
  $("composer").addEventListener("submit", send);
  $("composer-input").addEventListener("input", growComposer);
  $("composer-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("mode-select").addEventListener("change", changeMode);
  $("abort-button").addEventListener("click", abort);
  $("archive-button").addEventListener("click", toggleArchived);
  $("delete-button").addEventListener("click", askDelete);
  $("confirm-yes").addEventListener("click", deleteSession);
  $("confirm-no").addEventListener("click", () => { $("confirm-delete").hidden = true; });
  $("archived-toggle").addEventListener("click", showArchived);
  $("more-sessions").addEventListener("click", showOlder);
  $("conversation").addEventListener("scroll", () => { following = atBottom(); }, { passive: true });
  // Expanding an output moves the bottom away without a scroll: what arrives next then
  // waits below until the person scrolls down or sends.
  $("log").addEventListener("click", (event) => {
    if (event.target.closest(".output-toggle")) following = atBottom();
  });
  $("sidebar-toggle").addEventListener("click", toggleSidebar);
  $("main").addEventListener("click", (event) => {
    if (document.body.classList.contains("sidebar-open") && !$("sidebar-toggle").contains(event.target)) {
      closeSidebar();
    }
  });
  $("pending-jump").addEventListener("click", () => {
    const node = conversation.firstPending();
    if (node) node.scrollIntoView({ block: "center", behavior: "smooth" });
  });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refreshSessions(); });

  try {
    state.info = await api("GET", "/api/server");
  } catch (error) {
    report(error);
    return;
  }
  state.project = state.info.projectId;
  $("project-name").textContent = state.project;
  $("server-version").textContent = `penguin ${state.info.version}`;
  fillModes($("mode-select"));
  try {
    state.models = (await api("GET", `/api/projects/${encodeURIComponent(state.project)}/models`)).models;
  } catch (error) {
    report(error);
  }
  fillCreateForm();
  await refreshSessions();
  if (state.sessions.size === 0) $("new-session").open = true;
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (wanted && state.sessions.has(wanted)) await select(wanted);
  document.body.classList.add("ready");
  schedulePoll();
}

start();
