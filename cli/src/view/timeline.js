// Charter's timeline view: renders trace events (and a served run's stream) as rows,
// one section per phase. Everything is written with textContent: no value from a run is
// ever parsed as HTML.
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

function charterPlace(event) {
  let place = event.step || "";
  if (event.item) place += "[" + event.item + "]";
  if (event.attempt) place += "#" + event.attempt;
  return place;
}

function charterSummary(event) {
  const list = (values) => (values || []).map(charterText).join(", ");
  switch (event.kind) {
    case "run_started": return "spec " + event.spec + " " + (event.version || "");
    case "phase": return event.from + " \u2192 " + event.to;
    case "step_started": return (event.role ? "role " + event.role : "") + (event.items !== undefined ? " (" + event.items + " items)" : "");
    case "model_call": return event.role + " on " + event.model;
    case "model_result": return event.role + ": " + event.input_tokens + " + " + event.output_tokens + " tokens in " + event.latency_ms + " ms";
    case "retry": return event.retry + " retry, attempt " + event.next + " after " + event.delay_ms + " ms: " + (event.reason || "");
    case "timeout": return "timed out after " + event.after_ms + " ms";
    case "tool_call": return "tool " + event.tool + (event.ok === false ? " failed" : "");
    case "candidate": return "candidate " + event.id + " (" + event.items + " item(s)" + (event.failed && event.failed.length ? ", failed " + list(event.failed) : "") + ")";
    case "gate": {
      let text = "gate " + event.gate + ": " + (event.passed ? "passed" : "failed");
      if (event.score !== undefined && event.score !== null) text += ", score " + (typeof event.score === "number" ? Number(event.score.toFixed(2)) : event.score);
      const issues = (event.issues || []).map((issue) => issue.code || charterText(issue));
      if (issues.length) text += ", issues " + issues.join(", ");
      return text;
    }
    case "repair": return "repair: " + ((event.action && event.action.kind) || "") + " for " + list(event.codes) + (event.invalidated && event.invalidated.length ? "; reruns " + list(event.invalidated) : "");
    case "delivery": return "delivery of " + event.candidate + (event.expected_hash && event.expected_hash === event.actual_hash ? " (hash verified)" : "");
    case "ask": return "asks: " + event.question;
    case "human": return "answered: " + charterText(event.answer);
    case "role_output": return (event.role ? event.role + " " : "") + "answered";
    case "run_finished": return event.outcome + " (" + charterText(event.reason) + ")" + (event.message ? ": " + event.message : "");
    case "answer": return event.outcome + " (" + charterText(event.reason) + ")";
    default: {
      const rest = {};
      for (const key of Object.keys(event)) {
        if (!["seq", "t_ms", "round", "step", "item", "attempt", "kind"].includes(key)) rest[key] = event[key];
      }
      const text = JSON.stringify(rest);
      return text.length > 300 ? text.slice(0, 300) + "\u2026" : text;
    }
  }
}

// A timeline in `root`; `add(event)` appends one event.
function charterTimeline(root) {
  let section = null;
  let lastT = 0;
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
    row.appendChild(charterEl("span", "t", (lastT / 1000).toFixed(3) + " s"));
    row.appendChild(charterEl("span", "round", event.round ? "r" + event.round : ""));
    row.appendChild(charterEl("span", "place", charterPlace(event)));
    row.appendChild(charterEl("span", "kind", event.kind));
    row.appendChild(charterEl("span", "summary", charterSummary(event)));
    if (event.kind === "role_output") {
      const details = charterEl("details", "output");
      details.appendChild(charterEl("summary", null, "output"));
      details.appendChild(charterEl("pre", null, typeof event.output === "string" ? event.output : JSON.stringify(event.output, null, 2)));
      row.appendChild(details);
    }
    if (event.kind === "gate" && event.passed === false) row.classList.add("failed");
    section.appendChild(row);
  }
  return { add: add };
}
