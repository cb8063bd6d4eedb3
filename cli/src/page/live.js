// The page of `charter serve`: the runs (a sidebar from `GET /runs`), a run started from
// its spec's request contract, watched live (the flow graph, the timeline, an `ask`
// answered, totals and the outcome), and conversations of `session` specs.
"use strict";
const $ = (id) => document.getElementById(id);
// A server started with --token: the page is opened as /#token=TOKEN (a fragment is never
// sent to a server); the token goes with each request.
const token = new URLSearchParams(location.hash.slice(1)).get("token");
// The event stream cannot send a header (EventSource), and a token in its URL would land
// in logs: it goes as a cookie this page sets, which no other site's request carries.
if (token) {
  document.cookie = "charter_token=" + encodeURIComponent(token) + "; path=/; SameSite=Strict";
}

const page = {
  specs: {},      // name -> GET /specs/{name}
  runId: null,
  source: null,   // the open event stream (one at a time)
  lastId: -1,     // the last stream event shown (its SSE id)
  finished: false,
  timeline: null,
  asked: null,    // when the waiting ask was asked (ms since the epoch)
  live: { calls: 0, input: 0, output: 0, t: 0 },
};

class HttpError extends Error {
  constructor(status, value) {
    super(value.error || String(status));
    this.status = status;
    this.value = value;
  }
}

async function call(method, path, body) {
  const response = await fetch(path, {
    method: method,
    headers: Object.assign(body === undefined ? {} : { "content-type": "application/json" }, token ? { authorization: "Bearer " + token } : {}),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const value = await response.json().catch(() => ({}));
  if (!response.ok) throw new HttpError(response.status, value);
  return value;
}

function setConnection(lost) {
  $("connection").textContent = lost ? "disconnected \u2014 reconnecting\u2026" : "";
  document.body.dataset.connection = lost ? "lost" : "ok";
}

async function specInfo(name) {
  if (!page.specs[name]) page.specs[name] = await call("GET", "/specs/" + encodeURIComponent(name));
  return page.specs[name];
}

// The input box starts from the spec's request contract (or the replayed scenario's input).
async function fillInput(name) {
  const info = await specInfo(name);
  $("input").value = JSON.stringify(info.input, null, 2);
  $("contract").textContent = info.request || "none";
  $("spec-note").textContent = info.replay ? "replays a recording: no model is called" : "";
  $("violations").textContent = "";
}

// ---- runs sidebar ----

function clock(millis) {
  return millis ? new Date(millis).toLocaleTimeString() : "";
}

function renderRuns(runs) {
  const list = $("run-list");
  list.textContent = "";
  const waiting = runs.filter((run) => run.status === "waiting");
  $("waiting-note").classList.toggle("hidden", waiting.length === 0);
  $("waiting-note").textContent = waiting.length === 1 ? "1 run waits for an answer" : waiting.length + " runs wait for an answer";
  for (const run of runs) {
    const item = charterEl("li", "run-item status-" + run.status + (run.outcome ? " outcome-" + run.outcome : "") + (run.id === page.runId ? " current" : ""));
    item.dataset.id = run.id;
    item.dataset.status = run.status;
    const button = charterEl("button", "run-open");
    button.type = "button";
    button.appendChild(charterEl("span", "run-spec", run.spec));
    button.appendChild(charterEl("span", "run-state", run.status === "finished" ? run.outcome : run.status === "waiting" ? "waits for an answer" : run.status));
    button.appendChild(charterEl("span", "run-time", clock(run.started)));
    button.title = run.id;
    button.onclick = () => watch(run.id);
    item.appendChild(button);
    list.appendChild(item);
  }
}

async function refreshRuns() {
  try {
    const listed = await call("GET", "/runs");
    setConnection(false);
    renderRuns(listed.runs || []);
    return listed;
  } catch (problem) {
    if (!(problem instanceof HttpError)) setConnection(true);
    return null;
  }
}

// ---- one run ----

function resetRun(id) {
  if (page.source) page.source.close();
  page.source = null;
  page.runId = id;
  page.lastId = -1;
  page.finished = false;
  page.asked = null;
  page.filter = null;
  $("step-filter").textContent = "";
  page.live = { calls: 0, input: 0, output: 0, t: 0 };
  delete document.body.dataset.finished;
  $("run").classList.remove("hidden");
  $("timeline").textContent = "";
  $("answer").className = "hidden";
  $("ask").classList.add("hidden");
  $("cancel").classList.remove("hidden");
  $("totals").textContent = "";
  $("download").classList.add("hidden");
  $("error").textContent = "";
  charterGraphReset();
}

async function watch(id) {
  resetRun(id);
  history.replaceState(null, "", "?run=" + encodeURIComponent(id) + location.hash);
  showStatus("running");
  let status = null;
  try {
    status = await call("GET", "/runs/" + encodeURIComponent(id));
  } catch (problem) {
    $("error").textContent = problem.message;
  }
  if (page.runId !== id) return;
  let spec = null;
  if (status) {
    if ($("spec").value !== status.spec && [...$("spec").options].some((o) => o.value === status.spec)) $("spec").value = status.spec;
    if (status.input !== undefined && status.input !== null) $("input").value = JSON.stringify(status.input, null, 2);
    spec = await specInfo(status.spec).catch(() => null);
    charterGraphLoad(status.spec);
  }
  page.timeline = charterTimeline($("timeline"), spec);
  connect(id);
  refreshRuns();
}

function showStatus(text) {
  $("status").textContent = "run " + page.runId + ": " + text;
  $("status").dataset.status = text;
}

function connect(id) {
  const source = new EventSource("/runs/" + encodeURIComponent(id) + "/events");
  page.source = source;
  source.onopen = async () => {
    if (page.source !== source) return;
    setConnection(false);
    // After a reconnect, what the run is doing now.
    try {
      const status = await call("GET", "/runs/" + encodeURIComponent(id));
      if (page.source !== source || page.finished) return;
      if (status.status === "waiting") showAsk(status.question, status.step, status.asked);
      else if (status.status !== "finished") showStatus(status.status);
    } catch (problem) { /* the stream says the rest */ }
  };
  source.onerror = () => {
    if (page.source !== source || page.finished) return;
    setConnection(true);
    showStatus("disconnected");
    $("ask").classList.add("hidden");
    if (source.readyState === EventSource.CLOSED) {
      // The browser gave up: connect again (the events already shown are skipped).
      setTimeout(() => { if (page.source === source) connect(id); }, 1000);
    }
  };
  source.onmessage = (message) => {
    if (page.source !== source) return;
    const seq = Number(message.lastEventId);
    if (Number.isFinite(seq) && message.lastEventId !== "") {
      if (seq <= page.lastId) return;
      page.lastId = seq;
    }
    onEvent(JSON.parse(message.data));
  };
}

function onEvent(event) {
  if (event.kind === "answer") {
    if (page.source) page.source.close();
    page.source = null;
    finish(event);
    return;
  }
  const row = page.timeline.add(event);
  if (row && page.filter && row.dataset.step !== page.filter) row.classList.add("filtered");
  charterGraphEvent(event);
  countLive(event);
  if (event.kind === "ask") {
    showAsk(event.question, event.step, event.asked);
  } else if (event.kind === "human") {
    $("ask").classList.add("hidden");
    if (!page.finished) showStatus("running");
  }
}

function countLive(event) {
  if (event.kind === "model_call") page.live.calls += 1;
  if (event.kind === "model_result") { page.live.input += event.input_tokens || 0; page.live.output += event.output_tokens || 0; }
  if (typeof event.t_ms === "number") page.live.t = Math.max(page.live.t, event.t_ms);
  $("totals").textContent = page.live.calls + " calls, " + (page.live.input + page.live.output).toLocaleString() + " tokens (" + page.live.input.toLocaleString() + " in, " + page.live.output.toLocaleString() + " out), " + (page.live.t / 1000).toFixed(1) + " s so far";
}

function seconds(millis) {
  return millis >= 60000 ? Math.floor(millis / 60000) + " min " + Math.round((millis % 60000) / 1000) + " s" : (millis / 1000).toFixed(1) + " s";
}

function showAsk(question, step, asked) {
  $("question").textContent = question;
  page.asked = asked || Date.now();
  page.askStep = step;
  const subject = page.timeline && page.timeline.context.lastOutput;
  $("ask-subject").classList.toggle("hidden", !subject);
  if (subject) {
    $("ask-subject").querySelector("summary").textContent = "what is being approved: the output of " + (subject.role || subject.step);
    $("ask-subject-value").textContent = charterPretty(subject.output);
  }
  tickAsk();
  $("ask").classList.remove("hidden");
  showStatus("waiting for an answer");
}

function tickAsk() {
  if (!page.asked) return;
  $("ask-context").textContent = "step " + (page.askStep || "?") + " has waited " + seconds(Math.max(0, Date.now() - page.asked));
}
setInterval(tickAsk, 1000);

const TITLES = {
  completed: "Answer",
  below_target: "Below target",
  blocked: "Blocked",
  failed: "Failed",
  cancelled: "Cancelled",
  error: "Error",
};

function finish(result) {
  page.finished = true;
  page.asked = null;
  $("ask").classList.add("hidden");
  $("cancel").classList.add("hidden");
  const outcome = result.outcome || "error";
  $("answer").className = "result outcome-" + outcome;
  $("answer").dataset.outcome = outcome;
  $("answer-title").textContent = TITLES[outcome] || outcome;
  $("outcome").textContent = outcome + (result.reason ? " (" + charterText(result.reason) + ")" : "") + (result.message ? ": " + result.message : "");
  const shown = result.answer !== undefined ? result.answer : result.best !== undefined ? { best: result.best } : undefined;
  $("answer-value").textContent = shown === undefined ? "(no answer)" : charterPretty(shown);
  $("answer-value").classList.toggle("hidden", shown === undefined && outcome === "error");
  if (result.totals) showTotals(result.totals);
  $("download").href = "/runs/" + encodeURIComponent(page.runId) + "/trace.jsonl";
  $("download").classList.toggle("hidden", outcome === "error" && !result.totals);
  showStatus("finished");
  document.body.dataset.finished = "true";
  charterGraphFinish();
  refreshRuns();
}

function showTotals(totals) {
  const tokens = totals.input_tokens + totals.output_tokens;
  const cost = "$" + Number(totals.cost || 0).toFixed(4) + (totals.unpriced ? " or more (a model has no price)" : "");
  const time = totals.replay
    ? "virtual time " + seconds(totals.t_ms) + ", wall time " + seconds(totals.wall_ms)
    : "wall time " + seconds(totals.wall_ms);
  $("totals").textContent = totals.calls + " calls, " + tokens.toLocaleString() + " tokens (" + totals.input_tokens.toLocaleString() + " in, " + totals.output_tokens.toLocaleString() + " out), " + cost + ", " + time;
}

async function answer(approved) {
  const body = { approved: approved };
  if ($("note").value.trim()) body.note = $("note").value.trim();
  try {
    await call("POST", "/runs/" + encodeURIComponent(page.runId) + "/answers", body);
    $("note").value = "";
    page.asked = null;
    $("ask").classList.add("hidden");
    if (!page.finished) showStatus("running");
    refreshRuns();
  } catch (problem) { $("error").textContent = problem.message; }
}

// The trace download goes through fetch, so a server with a token gets it in the header.
$("download").onclick = async (click) => {
  click.preventDefault();
  try {
    const response = await fetch($("download").href, { headers: token ? { authorization: "Bearer " + token } : {} });
    if (!response.ok) throw new Error("the trace could not be downloaded (" + response.status + ")");
    const url = URL.createObjectURL(await response.blob());
    const link = charterEl("a");
    link.href = url;
    link.download = "trace-" + page.runId + ".jsonl";
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (problem) { $("error").textContent = problem.message; }
};
$("approve").onclick = () => answer(true);
$("reject").onclick = () => answer(false);
$("cancel").onclick = async () => {
  const id = page.runId;
  try {
    await call("DELETE", "/runs/" + encodeURIComponent(id));
    if (page.runId === id && !page.finished) showStatus("cancelling");
  } catch (problem) {
    // A run that ended meanwhile: its stream brings the end.
    if (!(problem instanceof HttpError && problem.status === 409)) $("error").textContent = problem.message;
  }
};

function showViolations(problem) {
  const list = $("violations");
  list.textContent = "";
  for (const violation of (problem.value && problem.value.violations) || []) list.appendChild(charterEl("li", null, violation));
}

$("start").onsubmit = async (submit) => {
  submit.preventDefault();
  $("error").textContent = "";
  $("violations").textContent = "";
  let input;
  try { input = JSON.parse($("input").value); } catch (problem) { $("error").textContent = "the input is not JSON: " + problem.message; return; }
  try {
    const started = await call("POST", "/runs", { spec: $("spec").value, input: input });
    watch(started.id);
  } catch (problem) {
    $("error").textContent = problem.message;
    if (problem instanceof HttpError) showViolations(problem);
  }
};
$("spec").onchange = () => fillInput($("spec").value).catch((problem) => { $("error").textContent = problem.message; });
$("new-run").onclick = () => {
  if (page.source) page.source.close();
  page.source = null;
  page.runId = null;
  page.asked = null;
  delete document.body.dataset.finished;
  $("ask").classList.add("hidden");
  $("run").classList.add("hidden");
  history.replaceState(null, "", location.pathname + location.hash);
  fillInput($("spec").value).catch(() => {});
  refreshRuns();
};

// A click on a step of the graph shows only its rows; a second click, all.
function filterStep(step) {
  page.filter = page.filter === step ? null : step;
  $("step-filter").textContent = page.filter ? "(step " + page.filter + " only; click it again for all)" : "";
  for (const row of document.querySelectorAll("#timeline .event")) {
    row.classList.toggle("filtered", !!page.filter && row.dataset.step !== page.filter);
  }
}

// ---- the flow graph (`GET /specs/{name}/graph.svg`) ----

const graphState = { spec: null, visited: new Set(), current: null };

function charterGraphReset() {
  graphState.visited = new Set();
  graphState.current = null;
  $("graph").textContent = "";
  graphState.spec = null;
}

async function charterGraphLoad(name) {
  graphState.spec = name;
  try {
    const response = await fetch("/specs/" + encodeURIComponent(name) + "/graph.svg", { headers: token ? { authorization: "Bearer " + token } : {} });
    if (!response.ok || graphState.spec !== name) return;
    const text = await response.text();
    const parsed = new DOMParser().parseFromString(text, "image/svg+xml");
    const svg = parsed.documentElement;
    if (svg.nodeName !== "svg" || graphState.spec !== name) return;
    $("graph").textContent = "";
    $("graph").appendChild(document.importNode(svg, true));
    for (const node of $("graph").querySelectorAll("[data-step]")) {
      node.addEventListener("click", () => filterStep(node.dataset.step));
    }
    paintGraph();
  } catch (problem) { /* the page works without its graph */ }
}

function paintGraph() {
  for (const node of $("graph").querySelectorAll("[data-step]")) {
    node.classList.toggle("visited", graphState.visited.has(node.dataset.step));
    node.classList.toggle("running", graphState.current === node.dataset.step);
  }
}

function charterGraphEvent(event) {
  if (!event.step) return;
  if (["step_started", "model_call", "phase", "ask", "tool_call", "tool_started", "gate", "candidate"].includes(event.kind)) {
    graphState.current = event.step;
    graphState.visited.add(event.step);
    paintGraph();
  }
}

function charterGraphFinish() {
  graphState.current = null;
  paintGraph();
}

// ---- conversations (`POST /sessions/{id}/turns`) ----

function newSessionId() {
  return "web-" + Date.now().toString(36) + "-" + Math.floor(Math.random() * 1e9).toString(36);
}

function showView(chat) {
  $("runs-view").classList.toggle("hidden", chat);
  $("chat-view").classList.toggle("hidden", !chat);
  $("show-runs").classList.toggle("active", !chat);
  $("show-chat").classList.toggle("active", chat);
}

function renderTurn(turn) {
  const box = charterEl("div", "turn");
  // What was said: the line typed (the request's one string field), else the request.
  const said = turn.input && typeof turn.input === "object" ? Object.values(turn.input).filter((value) => typeof value === "string") : [];
  box.appendChild(charterEl("div", "said you", typeof turn.input === "string" ? turn.input : said.length === 1 ? said[0] : charterPretty(turn.input)));
  const reply = charterEl("div", "said reply outcome-" + (turn.outcome || "error"));
  if (turn.answered_by) reply.appendChild(charterEl("span", "who", turn.answered_by));
  const answer = turn.answer;
  if (answer && typeof answer === "object" && typeof answer.text === "string") {
    reply.appendChild(charterEl("div", "text", answer.text));
    const rest = Object.assign({}, answer);
    delete rest.text;
    if (Object.values(rest).some((value) => !(Array.isArray(value) && value.length === 0))) reply.appendChild(charterEl("pre", "rest", charterPretty(rest)));
  } else {
    reply.appendChild(charterEl("div", "text", answer !== undefined ? charterPretty(answer) : turn.outcome + (turn.message ? ": " + turn.message : "")));
  }
  if (turn.run) {
    const link = charterEl("a", "turn-run", "turn " + (turn.turn || "") + ": its run");
    link.href = "?run=" + encodeURIComponent(turn.run) + location.hash;
    reply.appendChild(link);
  }
  box.appendChild(reply);
  $("chat-turns").appendChild(box);
}

async function loadSession() {
  $("chat-turns").textContent = "";
  $("chat-id").textContent = page.session;
  try {
    const session = await call("GET", "/sessions/" + encodeURIComponent(page.session));
    for (const turn of session.turns || []) renderTurn(turn);
  } catch (problem) { /* a new conversation has no turns */ }
}

$("show-runs").onclick = () => showView(false);
$("show-chat").onclick = () => { showView(true); if (!page.session) { page.session = newSessionId(); loadSession(); } };
$("chat-new").onclick = () => { page.session = newSessionId(); loadSession(); };
$("chat-form").onsubmit = async (submit) => {
  submit.preventDefault();
  const text = $("chat-input").value.trim();
  if (!text) return;
  $("chat-error").textContent = "";
  $("chat-input").disabled = true;
  try {
    const turn = await call("POST", "/sessions/" + encodeURIComponent(page.session) + "/turns", { spec: $("chat-spec").value, input: text });
    $("chat-input").value = "";
    renderTurn(turn);
    refreshRuns();
  } catch (problem) {
    $("chat-error").textContent = problem.message;
  } finally {
    $("chat-input").disabled = false;
    $("chat-input").focus();
  }
};

// ---- start ----

(async () => {
  const listed = await call("GET", "/runs");
  const conversations = listed.sessions || [];
  for (const name of listed.specs) $("spec").appendChild(charterEl("option", null, name));
  for (const name of conversations) $("chat-spec").appendChild(charterEl("option", null, name));
  $("show-chat").classList.toggle("hidden", conversations.length === 0);
  renderRuns(listed.runs || []);
  setInterval(refreshRuns, 2000);
  const params = new URLSearchParams(location.search);
  if (params.get("spec")) $("spec").value = params.get("spec");
  if (params.get("run")) { await watch(params.get("run")); return; }
  if ($("spec").value) await fillInput($("spec").value);
  if (params.get("input")) $("input").value = params.get("input");
  if (params.get("session")) { page.session = params.get("session"); showView(true); loadSession(); }
  else if (params.get("chat") === "1" && conversations.length) { page.session = newSessionId(); showView(true); loadSession(); }
  if (params.get("start") === "1") $("start").requestSubmit();
})().catch((problem) => { $("error").textContent = problem.message; });
