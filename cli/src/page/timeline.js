// Charter's timeline view: renders trace events (and a served run's stream) as rows,
// one section per phase; a row with more to it opens (a gate's rules, messages, evidence
// and scores; a repair's action; an ask's question; outputs and tool calls as JSON).
// Everything is written with textContent: no value from a run is ever parsed as HTML.
"use strict";

function charterEl(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function charterText(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function charterPretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function charterNumber(value) {
  return typeof value === "number" ? String(Number(value.toFixed(2))) : String(value);
}

function charterPlace(event) {
  let place = event.step || "";
  if (event.item) place += "[" + event.item + "]";
  if (event.attempt) place += "#" + event.attempt;
  return place;
}

// An answer to an ask, in words: "approved", "rejected: the note".
function charterAnswered(answer) {
  if (answer && typeof answer === "object" && typeof answer.approved === "boolean") {
    return (answer.approved ? "approved" : "rejected") + (answer.note ? ": \u201c" + answer.note + "\u201d" : "");
  }
  return charterText(answer);
}

function charterSummary(event) {
  const list = (values) => (values || []).map(charterText).join(", ");
  switch (event.kind) {
    case "run_started": return "spec " + event.spec + " " + (event.version || "");
    case "plan_frozen": return "plan frozen: " + Object.keys(event.prompts || {}).length + " prompts, " + Object.keys(event.rules || {}).length + " rule blocks";
    case "phase": return event.from + " \u2192 " + event.to;
    case "step_started": return (event.role ? "role " + event.role : "") + (event.items !== undefined ? " (" + event.items + " items)" : "");
    case "model_call": return event.role + " on " + event.model;
    case "model_result": return event.role + ": " + event.input_tokens + " + " + event.output_tokens + " tokens in " + event.latency_ms + " ms";
    case "retry": return event.retry + " retry, attempt " + event.next + " after " + event.delay_ms + " ms: " + (event.reason || "");
    case "timeout": return "timed out after " + event.after_ms + " ms";
    case "tool_call": return "tool " + event.tool + (event.ok === false ? " failed" : "") + (event.args !== undefined ? " " + charterText(event.args).slice(0, 120) : "");
    case "tool_started": return "tool " + event.tool + " started";
    case "tool_finished": return "tool " + event.tool + (event.ok ? " finished" : " failed");
    case "contract_violation": return "broke " + event.contract + ": " + (event.violations || []).map((v) => (v.path || "") + " " + (v.message || "")).join("; ");
    case "candidate": return "candidate " + event.id + " (" + event.items + " item(s)" + (event.failed && event.failed.length ? ", failed " + list(event.failed) : "") + ")";
    case "gate": {
      let text = "gate " + event.gate + ": " + (event.passed ? "passed" : "failed");
      if (event.score !== undefined && event.score !== null) text += ", score " + charterNumber(event.score);
      const issues = (event.issues || []).map((issue) => issue.code || charterText(issue));
      if (issues.length) text += ", issues " + issues.join(", ");
      return text;
    }
    case "repair": return "repair: " + ((event.action && event.action.kind) || "") + " for " + list(event.codes) + (event.invalidated && event.invalidated.length ? "; reruns " + list(event.invalidated) : "");
    case "delivery": return "delivery of " + event.candidate + (event.expected_hash && event.expected_hash === event.actual_hash ? " (hash verified)" : "");
    case "ask": return "asks: " + event.question;
    case "human": return "answered " + charterAnswered(event.answer) + (event.question ? " to \u201c" + event.question + "\u201d" : "");
    case "role_output": return (event.role ? event.role + " " : "") + "answered";
    case "run_finished": return event.outcome + " (" + charterText(event.reason) + ")" + (event.message ? ": " + event.message : "");
    case "answer": return event.outcome + (event.reason ? " (" + charterText(event.reason) + ")" : "") + (event.message ? ": " + event.message : "");
    default: {
      const text = JSON.stringify(charterRest(event));
      return text.length > 300 ? text.slice(0, 300) + "\u2026" : text;
    }
  }
}

// An event without the fields every row shows.
function charterRest(event) {
  const rest = {};
  for (const key of Object.keys(event)) {
    if (!["seq", "t_ms", "round", "step", "item", "attempt", "kind"].includes(key)) rest[key] = event[key];
  }
  return rest;
}

// A table of `rows` (arrays of cells) under `head`.
function charterTable(cls, head, rows) {
  const table = charterEl("table", cls);
  const top = charterEl("tr");
  for (const name of head) top.appendChild(charterEl("th", null, name));
  table.appendChild(top);
  for (const cells of rows) {
    const tr = charterEl("tr");
    for (const cell of cells) {
      if (cell instanceof Node) { const td = charterEl("td"); td.appendChild(cell); tr.appendChild(td); }
      else tr.appendChild(charterEl("td", null, cell === undefined || cell === null ? "" : cell));
    }
    table.appendChild(tr);
  }
  return table;
}

// What a gate row opens to: each rule that raised an issue with its message and its
// `detail` evidence, every rule's result, and each score against its threshold.
function charterGateDetails(event, spec) {
  const box = charterEl("div", "gate-details");
  const known = (spec && spec.gates && spec.gates[event.gate]) || { rules: [], scores: [] };
  const issues = event.issues || [];
  if (issues.length) {
    box.appendChild(charterEl("h4", null, "Issues"));
    for (const issue of issues) {
      const item = charterEl("div", "issue severity-" + (issue.severity || "error"));
      item.appendChild(charterEl("p", "issue-head", issue.code + " (" + (issue.severity || "error") + ", rule " + issue.rule + ")" + (issue.items && issue.items.length ? " on " + issue.items.join(", ") : "")));
      if (issue.message) item.appendChild(charterEl("p", "issue-message", issue.message));
      if (issue.detail !== undefined) {
        item.appendChild(charterEl("p", "evidence-head", "evidence (detail):"));
        item.appendChild(charterEl("pre", "evidence", charterPretty(issue.detail)));
      }
      box.appendChild(item);
    }
  }
  if ((event.rules || []).length) {
    box.appendChild(charterEl("h4", null, "Rules"));
    box.appendChild(charterTable("rules", ["rule", "severity", "result", "code"], event.rules.map((rule) => {
      const code = (known.rules.find((r) => r.name === rule.name) || {}).code;
      return [rule.name, rule.severity, rule.holds ? "holds" : "broken" + (rule.error ? ": " + rule.error : ""), code];
    })));
  }
  if ((event.scores || []).length) {
    box.appendChild(charterEl("h4", null, "Scores" + (event.score !== undefined && event.score !== null ? " (weighted mean " + charterNumber(event.score) + ")" : "")));
    box.appendChild(charterTable("scores", ["score", "weight", "value", "threshold", "result"], event.scores.map((score) => {
      const spec = known.scores.find((s) => s.name === score.name) || {};
      const below = spec.below;
      const raised = issues.find((issue) => issue.rule === score.name);
      const result = score.error ? "error: " + score.error
        : below === undefined ? (raised ? "below" : "")
        : score.value < below ? "below " + charterNumber(below) : "meets " + charterNumber(below);
      return [score.name, charterNumber(score.weight), score.value === undefined ? "\u2013" : charterNumber(score.value), below === undefined ? "" : "\u2265 " + charterNumber(below), result];
    })));
  }
  return box;
}

// What a row opens to, or null when it has nothing more.
function charterDetails(event, spec, context) {
  switch (event.kind) {
    case "gate": return charterGateDetails(event, spec);
    case "repair": {
      const box = charterEl("div", "repair-details");
      box.appendChild(charterEl("p", null, "action: " + charterText((event.action && event.action.kind) || event.action)));
      box.appendChild(charterEl("pre", null, charterPretty(event.action)));
      box.appendChild(charterEl("p", null, "for " + (event.codes || []).join(", ")));
      box.appendChild(charterEl("p", null, "invalidated (rerun): " + ((event.invalidated || []).join(", ") || "nothing") + (event.items && event.items.length ? "; items " + event.items.join(", ") : "")));
      return box;
    }
    case "ask":
    case "human": {
      const box = charterEl("div", "ask-details");
      const question = event.question || (context.lastAsk && context.lastAsk.question);
      if (question) box.appendChild(charterEl("p", "question", "question: " + question));
      if (context.lastOutput) {
        box.appendChild(charterEl("p", null, "about the output of " + (context.lastOutput.role || context.lastOutput.step) + ":"));
        box.appendChild(charterEl("pre", null, charterPretty(context.lastOutput.output)));
      }
      if (event.kind === "human") box.appendChild(charterEl("pre", null, charterPretty(event.answer)));
      return box;
    }
    case "role_output": return charterEl("pre", null, charterPretty(event.output));
    case "tool_call": {
      const box = charterEl("div");
      box.appendChild(charterEl("p", null, "arguments:"));
      box.appendChild(charterEl("pre", null, charterPretty(event.args)));
      box.appendChild(charterEl("p", null, "result:"));
      box.appendChild(charterEl("pre", null, charterPretty(event.result)));
      return box;
    }
    case "phase":
    case "step_started":
    case "model_call":
    case "model_result":
    case "tool_started":
    case "tool_finished":
      return null;
    default: {
      const rest = charterRest(event);
      if (!Object.keys(rest).length) return null;
      // A row whose summary is its whole JSON has nothing more to show.
      const known = ["run_started", "plan_frozen", "candidate", "delivery", "run_finished", "contract_violation", "retry", "answer"];
      if (!known.includes(event.kind) && JSON.stringify(rest).length <= 300) return null;
      return charterEl("pre", null, JSON.stringify(rest, null, 2));
    }
  }
}

// A timeline in `root`; `add(event)` appends one event. `spec` (optional) is what
// `GET /specs/{name}` says of the spec: its gates' thresholds.
function charterTimeline(root, spec) {
  let section = null;
  let lastT = 0;
  const context = { lastOutput: null, lastAsk: null };
  function newSection(title, kind) {
    section = charterEl("section", "phase");
    section.dataset.phase = kind;
    section.appendChild(charterEl("h3", null, title));
    root.appendChild(section);
  }
  function add(event) {
    if (event.kind === "phase") {
      newSection("phase: " + event.to, event.to);
    } else if (!section) {
      newSection("start", "received");
    }
    if (typeof event.t_ms === "number") lastT = event.t_ms;
    const row = charterEl("div", "event kind-" + event.kind);
    row.dataset.kind = event.kind;
    if (event.step) row.dataset.step = event.step;
    if (typeof event.seq === "number") row.dataset.seq = String(event.seq);
    row.appendChild(charterEl("span", "t", (lastT / 1000).toFixed(3) + " s"));
    row.appendChild(charterEl("span", "round", event.round ? "r" + event.round : ""));
    row.appendChild(charterEl("span", "place", charterPlace(event)));
    row.appendChild(charterEl("span", "kind", event.kind));
    row.appendChild(charterEl("span", "summary", charterSummary(event)));
    const more = charterDetails(event, spec, context);
    if (more) {
      const details = charterEl("details", event.kind === "role_output" ? "output more" : "more");
      details.appendChild(charterEl("summary", null, event.kind === "role_output" ? "output" : event.kind === "gate" ? "rules, scores and evidence" : "more"));
      details.appendChild(more);
      row.appendChild(details);
    }
    if (event.kind === "role_output") context.lastOutput = event;
    if (event.kind === "ask") context.lastAsk = event;
    if (event.kind === "gate" && event.passed === false) row.classList.add("failed");
    section.appendChild(row);
    return row;
  }
  return { add: add, context: context };
}
