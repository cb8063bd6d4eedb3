//! The page and the report in a real browser, headless Chromium (the Debian `chromium` package), used as a person would: the live page of `charter serve` against wiremock models and `--replay` recordings (a run started with the default input, a 422's violations, gates opened to their messages and evidence, outcomes' titles, totals and the trace download, the runs sidebar returning to a run waiting on an `ask`, a cancel, a server killed and restarted, the flow graph lit live, a three-turn conversation in the chat view), the `--html` report (its summary table, failures first, linking to the marked event where a trace departs from its snapshot) and `charter view` of a served run. Screenshots (1280×900) go to `target/browser/`, and to `$CHARTER_SCREENSHOTS` when set.
//!
//! Without Chromium the tests say so and pass, except in CI (`CI` set), where they fail:
//! `.ci/run` installs it.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Chromium's path, or `None` (with a note) when it is absent outside CI.
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
            .find(|path| path.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not installed, and CI must run the browser tests (apt-get install chromium)"
        );
        eprintln!(
            "skipped: chromium is not installed (apt-get install chromium); CI runs this test"
        );
    }
    found
}

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("charter-cli-browser-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// Where screenshots go: `target/browser/`.
fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/browser");
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// A running child process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads lines of `child`'s stderr until one contains `marker`; returns that line and
/// keeps draining the rest.
fn wait_for_line(child: &mut Child, marker: &str) -> String {
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut lines = BufReader::new(stderr).lines();
    let line = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|line| line.contains(marker))
        .unwrap_or_else(|| panic!("the process never said {marker:?}"));
    std::thread::spawn(move || for _ in lines.by_ref() {});
    line
}

/// A page in headless Chromium, driven over the DevTools protocol.
struct Browser {
    _process: Running,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
}

impl Browser {
    fn open(chromium: &Path, url: &str) -> Browser {
        // A profile of its own: Chromium refuses a profile another one holds.
        static PROFILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let profile = temp_dir(&format!(
            "profile-{}",
            PROFILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut child = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start chromium: {error}"));
        let line = wait_for_line(&mut child, "DevTools listening on ");
        let address = line
            .split("DevTools listening on ")
            .nth(1)
            .map(str::trim)
            .unwrap_or_default()
            .to_string();
        let (socket, _) = tungstenite::connect(address.as_str())
            .unwrap_or_else(|error| panic!("cannot reach chromium at {address}: {error}"));
        let mut browser = Browser {
            _process: Running(child),
            socket,
            session: String::new(),
            next_id: 0,
        };
        let target = browser.send("Target.createTarget", json!({"url": "about:blank"}), false);
        let attached = browser.send(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
            false,
        );
        browser.session = attached["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        browser.send("Page.enable", json!({}), true);
        browser.send("Page.navigate", json!({"url": url}), true);
        browser
    }

    /// Sends a command and returns its result.
    fn send(&mut self, method: &str, params: Value, in_page: bool) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if in_page {
            message["sessionId"] = json!(self.session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .unwrap_or_else(|error| panic!("{error}"));
        loop {
            let reply = self.socket.read().unwrap_or_else(|error| panic!("{error}"));
            let Message::Text(text) = reply else { continue };
            let value: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
            if value["id"] == json!(id) {
                assert!(value.get("error").is_none(), "{method}: {value}");
                return value["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expression: &str) -> Value {
        let result = self.send(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            true,
        );
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is true in the page (a guard of 60 s against a hang; no
    /// assertion on speed).
    fn wait_until(&mut self, expression: &str) {
        let started = Instant::now();
        while self.eval(expression) != json!(true) {
            let body = self.eval("document.body ? document.body.innerText : ''");
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the page never got to {expression}; it shows:\n{body}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn screenshot(&mut self, name: &str) {
        let shot = self.send("Page.captureScreenshot", json!({"format": "png"}), true);
        let png = base64(shot["data"].as_str().unwrap_or_default());
        let _ = std::fs::write(screenshots().join(name), &png);
        // `CHARTER_SCREENSHOTS=DIR` keeps the shots the README shows (docs/screenshots).
        if let Some(dir) = std::env::var_os("CHARTER_SCREENSHOTS") {
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(Path::new(&dir).join(name), &png);
        }
    }

    /// Runs `script` in the page (a statement list; its value is ignored).
    fn run(&mut self, script: &str) {
        self.eval(&format!("(() => {{ {script} }})(), true"));
    }

    /// The page's text of the element `selector` (empty when there is none).
    fn text(&mut self, selector: &str) -> String {
        let selector = serde_json::to_string(selector).unwrap_or_default();
        self.eval(&format!(
            "(document.querySelector({selector}) || {{}}).textContent || ''"
        ))
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    fn navigate(&mut self, url: &str) {
        self.send("Page.navigate", json!({"url": url}), true);
    }
}

/// `charter serve ARGS` in `project` on a free port (the environment without keys, plus
/// `envs`); the server and its address.
fn serve(project: &Path, args: &[&str], envs: &[(&str, String)]) -> (Running, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_charter"));
    command
        .current_dir(project)
        .arg("serve")
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("CHARTER_TOKEN")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in envs {
        command.env(name, value);
    }
    let mut server = command.spawn().unwrap_or_else(|error| panic!("{error}"));
    let line = wait_for_line(&mut server, "listening on http://");
    let base = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|address| format!("http://{address}"))
        .unwrap_or_else(|| panic!("no address in {line}"));
    (Running(server), base)
}

/// A golden scenario of this repository, by `spec/scenario`.
fn golden(scenario: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../golden")
        .join(scenario)
        .display()
        .to_string()
}

/// Opens `url` in a new headless Chromium (on a blocking thread) and runs `check` on it.
async fn in_browser(url: String, check: impl FnOnce(&mut Browser) + Send + 'static) {
    let Some(chromium) = chromium() else { return };
    tokio::task::spawn_blocking(move || {
        let mut browser = Browser::open(&chromium, &url);
        check(&mut browser);
    })
    .await
    .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()));
}

/// Decodes standard base64 (what DevTools sends screenshots in).
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::new();
    let mut buffer = 0u32;
    let mut bits = 0;
    for digit in text.bytes().filter_map(value) {
        buffer = (buffer << 6) | u32::from(digit);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((buffer >> bits) & 0xff) as u8);
        }
    }
    out
}

fn chat(content: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10}
    }))
}

fn for_role(role: &str) -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(body_partial_json(
        json!({"response_format": {"json_schema": {"name": role}}}),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_page_shows_the_phases_a_score_and_the_answer_apart_and_answers_an_ask() {
    let Some(chromium) = chromium() else { return };
    let project = temp_dir("live");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/fixtures/review_loop.charter");
    let text = std::fs::read_to_string(&fixture).unwrap_or_else(|error| panic!("{error}"));
    let asking = text.replace("spec review_loop", "spec review_ask").replace(
        "deliver = finalize finalizer(best)   -> done",
        "deliver = finalize finalizer(best)   -> confirm\n  confirm = ask \"Publish it?\" max 1  when confirm.approved -> done  else -> write",
    );
    assert_ne!(asking, text, "the fixture's flow changed: update the test");
    let _ = std::fs::write(project.join("review_ask.charter"), asking);

    let model = MockServer::start().await;
    for_role("writer")
        .respond_with(chat(json!({"title": "Rust", "body": "Rust is fast."})))
        .mount(&model)
        .await;
    for_role("reviewer")
        .respond_with(chat(json!({"relevance": 9, "verdict": "PASS"})))
        .mount(&model)
        .await;
    for_role("finalizer")
        .respond_with(chat(
            json!({"candidate_id": "c1", "summary": "one post about Rust"}),
        ))
        .mount(&model)
        .await;
    let mut server = Command::new(env!("CARGO_BIN_EXE_charter"))
        .current_dir(&project)
        .args(["serve", "--port", "0", "review_ask.charter"])
        .env_remove("ANTHROPIC_API_KEY")
        .env("OPENAI_BASE_URL", format!("{}/v1", model.uri()))
        .env("OPENAI_API_KEY", "sk-browser-test-key")
        // A server with a token: the page sends it with each request, and its event
        // stream (EventSource sends no header) as the cookie the page sets.
        .env("CHARTER_TOKEN", "browser-t0ken")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{error}"));
    let line = wait_for_line(&mut server, "listening on http://");
    let _server = Running(server);
    let base = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|address| format!("http://{address}"))
        .unwrap_or_else(|| panic!("no address in {line}"));

    let url = format!(
        "{base}/?spec=review_ask&input=%7B%22goal%22%3A%22rust%22%7D&start=1#token=browser-t0ken"
    );
    let mut browser = tokio::task::spawn_blocking(move || Browser::open(&chromium, &url))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let checked = tokio::task::spawn_blocking(move || {
        browser.wait_until("!document.getElementById('ask').classList.contains('hidden')");
        let question = browser.eval("document.getElementById('question').textContent");
        assert_eq!(question, "Publish it?");
        let phases = browser.eval(
            "[...document.querySelectorAll('#timeline section.phase')].map(s => s.dataset.phase)",
        );
        assert_eq!(
            phases,
            json!(["received", "planning", "evaluating", "finalizing"]),
            "the phases in the order they happened"
        );
        let gate = browser
            .eval("document.querySelector('#timeline [data-kind=gate] .summary').textContent");
        assert_eq!(gate, "gate quality: passed, score 9");
        let output = browser.eval(
            "[...document.querySelectorAll('#timeline [data-kind=role_output] pre')].map(p => p.textContent).join('\\n')",
        );
        assert!(
            output
                .as_str()
                .unwrap_or_default()
                .contains("Rust is fast."),
            "{output}"
        );
        assert_eq!(
            browser.eval("document.getElementById('answer').classList.contains('hidden')"),
            json!(true),
            "no answer before the run ends"
        );
        browser.screenshot("live-ask.png");

        browser.eval("document.getElementById('note').value = 'ship it'; document.getElementById('approve').click(); true");
        browser.wait_until("document.body.dataset.finished === 'true'");
        let outcome = browser.eval("document.getElementById('outcome').textContent");
        assert_eq!(outcome, "completed (gate_passed)");
        let answer = browser.eval("document.getElementById('answer-value').textContent");
        assert!(
            answer
                .as_str()
                .unwrap_or_default()
                .contains("one post about Rust"),
            "{answer}"
        );
        assert_eq!(
            browser.eval(
                "document.getElementById('timeline').contains(document.getElementById('answer'))"
            ),
            json!(false),
            "the answer is apart from the steps"
        );
        let human = browser
            .eval("document.querySelector('#timeline [data-kind=human] .summary').textContent");
        assert!(
            human.as_str().unwrap_or_default().contains("ship it"),
            "{human}"
        );
        browser.screenshot("live-answered.png");
        // The trace downloads from a server with a token (the page sends it).
        browser.run("window.downloaded = null; const made = URL.createObjectURL; URL.createObjectURL = (blob) => { blob.text().then((text) => { window.downloaded = text; }); return made(blob); }; document.getElementById('download').click();");
        browser.wait_until("typeof window.downloaded === 'string'");
        let downloaded =
            browser.eval("window.downloaded.trim().split('\\n').map(l => JSON.parse(l).kind)");
        let kinds = downloaded.as_array().cloned().unwrap_or_default();
        assert!(
            kinds.first() == Some(&json!("run_started")) && kinds.contains(&json!("run_finished")),
            "{downloaded}"
        );
    });
    checked
        .await
        .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()));
    let humans: Vec<String> = std::fs::read_dir(project.join(".charter/runs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| std::fs::read_to_string(entry.path().join("calls.jsonl")).unwrap_or_default())
        .collect();
    assert!(
        humans.concat().contains("ship it"),
        "the page's answer is journaled"
    );
}

/// `charter verify --html` of a copy of closed_loop's library (three scenarios) in which
/// happy_path's cassette was changed so that its trace departs from its snapshot.
fn failing_library_report(name: &str) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = temp_dir(name);
    let copy = |from: &Path, to: &Path| {
        let status = Command::new("cp")
            .arg("-r")
            .arg(from)
            .arg(to)
            .status()
            .unwrap_or_else(|error| panic!("{error}"));
        assert!(status.success());
    };
    let _ = std::fs::create_dir_all(root.join("specs/seeds"));
    let _ = std::fs::create_dir_all(root.join("golden/closed_loop"));
    copy(
        &repo.join("specs/seeds/closed_loop.charter"),
        &root.join("specs/seeds/"),
    );
    copy(
        &repo.join("specs/seeds/closed_loop"),
        &root.join("specs/seeds/"),
    );
    for scenario in ["happy_path", "repair_succeeds", "budget_exhausted"] {
        copy(
            &repo.join("golden/closed_loop").join(scenario),
            &root.join("golden/closed_loop/"),
        );
    }
    let cassette = root.join("golden/closed_loop/happy_path/cassette.yaml");
    let text = std::fs::read_to_string(&cassette).unwrap_or_default();
    let from = "output: \"Heat pumps move heat instead of making it...\"";
    assert!(text.contains(from), "the cassette changed: update the test");
    // The calls after the changed answer see it in their prompts: without their
    // `prompt_hash` pins they replay as answered, and the behaviour change shows.
    let unpinned: String = text
        .replacen(from, "output: \"Heat pumps burn gas.\"", 1)
        .lines()
        .filter(|line| !line.trim_start().starts_with("prompt_hash:"))
        .map(|line| format!("{line}\n"))
        .collect();
    let _ = std::fs::write(&cassette, unpinned);

    let report = root.join("report.html");
    let verified = Command::new(env!("CARGO_BIN_EXE_charter"))
        .arg("verify")
        .arg(&root)
        .arg("--html")
        .arg(&report)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(verified.status.code(), Some(1));
    report
}

#[test]
fn the_html_report_of_a_failing_library_shows_the_failures_diff() {
    let Some(chromium) = chromium() else { return };
    let report = failing_library_report("report");
    let url = format!("file://{}", report.display());
    let dom = Command::new(&chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!(
            "--user-data-dir={}",
            temp_dir("report-profile").display()
        ))
        .arg(&url)
        .stderr(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    let dom = String::from_utf8_lossy(&dom.stdout);
    let failing = dom
        .split("<div class=\"scenario\"")
        .skip(1)
        .find(|part| part.contains("data-name=\"closed_loop/happy_path\""))
        .unwrap_or_else(|| panic!("the failing scenario is not shown:\n{dom}"));
    assert!(failing.contains("data-status=\"CHANGED\""), "{failing}");
    assert!(failing.contains("class=\"diff\""), "{failing}");
    assert!(
        failing.contains("delivery.actual_hash: "),
        "the diff is shown: {failing}"
    );
    assert!(
        failing.contains("data-kind=\"gate\""),
        "its timeline is shown: {failing}"
    );
    let passing = dom
        .split("<div class=\"scenario\"")
        .skip(1)
        .find(|part| part.contains("data-name=\"closed_loop/repair_succeeds\""))
        .unwrap_or_else(|| panic!("the passing scenario is not shown"));
    assert!(passing.contains("data-status=\"passed\"") && !passing.contains("class=\"diff\""));

    let shot = screenshots().join("report.png");
    let _ = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,2400",
        ])
        .arg(format!(
            "--user-data-dir={}",
            temp_dir("report-shot").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_starts_a_replayed_run_with_the_default_input_and_reads_its_gates() {
    let project = temp_dir("replay");
    let (_server, base) = serve(
        &project,
        &[
            "--port",
            "0",
            "--replay",
            &golden("closed_loop/repair_succeeds"),
            "--replay",
            &golden("lead_agent/happy_path"),
        ],
        &[],
    );
    in_browser(format!("{base}/?spec=closed_loop"), |browser| {
        // The input box starts from the scenario's input; `{}` is refused field by field.
        browser.wait_until("document.getElementById('input').value.includes('heat pumps')");
        browser.run("document.getElementById('input').value = '{}'; document.querySelector('#start [type=submit]').click();");
        browser.wait_until("document.querySelectorAll('#violations li').length > 0");
        let violations = browser.text("#violations");
        assert!(violations.contains("goal"), "{violations}");

        browser.run("document.getElementById('spec').value = 'closed_loop'; document.getElementById('spec').dispatchEvent(new Event('change'));");
        browser.wait_until("document.getElementById('input').value.includes('heat pumps')");
        browser.run("document.querySelector('#start [type=submit]').click();");
        browser.wait_until("document.body.dataset.finished === 'true'");
        assert_eq!(browser.text("#outcome"), "completed (gate_passed)");
        assert_eq!(browser.text("#answer-title"), "Answer");
        assert_eq!(
            browser.eval("document.getElementById('answer').className"),
            json!("result outcome-completed")
        );
        let totals = browser.text("#totals");
        for part in ["calls", "tokens", "$", "virtual time", "wall time"] {
            assert!(totals.contains(part), "{part} in {totals}");
        }
        let trace = browser.eval(
            "fetch(document.getElementById('download').href).then(r => r.text()).then(t => t.trim().split('\\n').map(l => JSON.parse(l).kind))",
        );
        let kinds = trace.as_array().cloned().unwrap_or_default();
        assert!(kinds.contains(&json!("run_started")) && kinds.contains(&json!("run_finished")), "{trace}");

        // The frozen plan reads as words, and opens to its pretty JSON.
        let plan = browser.text("#timeline [data-kind=plan_frozen] .summary");
        assert!(plan.starts_with("plan frozen: 4 prompts"), "{plan}");
        let frozen = browser.text("#timeline [data-kind=plan_frozen] details pre");
        assert!(frozen.contains("\n  \"spec_hash\": \"sha256:"), "{frozen}");

        // The failed gate opens to its rule's message, its evidence and the scores
        // against their thresholds.
        let gate = "#timeline .event.failed[data-kind=gate]";
        assert_eq!(browser.eval(&format!("document.querySelector('{gate} details').open")), json!(false));
        browser.run(&format!("document.querySelector('{gate} details summary').click();"));
        assert_eq!(browser.eval(&format!("document.querySelector('{gate} details').open")), json!(true));
        let opened = browser.eval(&format!("document.querySelector('{gate} details').innerText"));
        let opened = opened.as_str().unwrap_or_default();
        for part in [
            "score `relevance` is 4, below 6",
            "T-002 is a history of refrigerators",
            "LOW_RELEVANCE",
            "\u{2265} 6",
            "below 6",
            "all_done",
        ] {
            assert!(opened.contains(part), "{part} in:\n{opened}");
        }
        browser.run(&format!("document.querySelector('{gate}').scrollIntoView();"));
        browser.screenshot("gate-opened.png");

        // A replayed answer shows the question it answered.
        browser.run("document.getElementById('new-run').click(); document.getElementById('spec').value = 'lead_agent'; document.getElementById('spec').dispatchEvent(new Event('change'));");
        browser.wait_until("document.getElementById('run').classList.contains('hidden') && document.getElementById('input').value.length > 2 && !document.getElementById('input').value.includes('heat pumps')");
        browser.run("document.querySelector('#start [type=submit]').click();");
        browser.wait_until("document.body.dataset.finished === 'true' && document.getElementById('spec').value === 'lead_agent'");
        let human = browser.text("#timeline [data-kind=human] .summary");
        assert!(human.contains("Build the workflow as planned?") && human.contains("approved"), "{human}");

        // Every outcome has its colour and title; an error shows its message.
        browser.run("finish({outcome: 'error', message: 'the recording has no call for step plan'});");
        assert_eq!(browser.text("#answer-title"), "Error");
        assert_eq!(browser.text("#outcome"), "error: the recording has no call for step plan");
        assert_eq!(
            browser.eval("document.getElementById('answer').className"),
            json!("result outcome-error")
        );
        browser.run("finish({outcome: 'blocked', reason: 'hard_gate{SECRET_LEAK}', message: 'secret in candidate'});");
        assert_eq!(browser.text("#answer-title"), "Blocked");
        let body = browser.eval("document.body.innerText");
        assert!(!body.as_str().unwrap_or_default().contains("undefined"), "{body}");
    })
    .await;
}

/// The review loop fixture with an `ask` before it is done, written as `review_ask` into
/// `project`.
fn review_ask(project: &Path) {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/fixtures/review_loop.charter");
    let text = std::fs::read_to_string(&fixture).unwrap_or_else(|error| panic!("{error}"));
    let asking = text.replace("spec review_loop", "spec review_ask").replace(
        "deliver = finalize finalizer(best)   -> done",
        "deliver = finalize finalizer(best)   -> confirm\n  confirm = ask \"Publish it?\" max 1  when confirm.approved -> done  else -> write",
    );
    assert_ne!(asking, text, "the fixture's flow changed: update the test");
    let _ = std::fs::write(project.join("review_ask.charter"), asking);
}

/// A model server that answers the review loop's three roles.
async fn review_model(delay: Duration) -> MockServer {
    let model = MockServer::start().await;
    for_role("writer")
        .respond_with(chat(json!({"title": "Rust", "body": "Rust is fast."})).set_delay(delay))
        .mount(&model)
        .await;
    for_role("reviewer")
        .respond_with(chat(json!({"relevance": 9, "verdict": "PASS"})))
        .mount(&model)
        .await;
    for_role("finalizer")
        .respond_with(chat(
            json!({"candidate_id": "c1", "summary": "one post about Rust"}),
        ))
        .mount(&model)
        .await;
    model
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidebar_returns_to_a_run_that_waits_on_an_ask_and_the_page_recovers() {
    let project = temp_dir("sidebar");
    review_ask(&project);
    let model = review_model(Duration::ZERO).await;
    let envs = [
        ("OPENAI_BASE_URL", format!("{}/v1", model.uri())),
        ("OPENAI_API_KEY", "sk-browser-test-key".to_string()),
    ];
    let (server, base) = serve(&project, &["--port", "0", "review_ask.charter"], &envs);
    let port = base.rsplit(':').next().unwrap_or_default().to_string();
    let restart = {
        let project = project.clone();
        move || serve(&project, &["--port", &port, "review_ask.charter"], &envs)
    };
    let server = std::sync::Arc::new(std::sync::Mutex::new(Some(server)));
    let held = server.clone();
    in_browser(format!("{base}/"), move |browser| {
        // Every event stream the page opens, kept to see which it closed.
        browser.send(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": "window.opened = []; const Opened = window.EventSource; window.EventSource = function (url) { const source = new Opened(url); window.opened.push({url: url, source: source}); return source; }; window.EventSource.CLOSED = 2;"}),
            true,
        );
        browser.navigate(&format!("{base}/"));
        let start = |browser: &mut Browser, goal: &str| {
            browser.wait_until("document.getElementById('spec').value === 'review_ask' && page.runId === null");
            browser.run(&format!(
                "document.getElementById('input').value = JSON.stringify({{goal: '{goal}'}}); document.querySelector('#start [type=submit]').click();"
            ));
            browser.wait_until(&format!(
                "(page.runId !== null && document.getElementById('input').value.includes('{goal}') && !document.getElementById('ask').classList.contains('hidden'))"
            ));
            browser.eval("page.runId").as_str().unwrap_or_default().to_string()
        };
        // The skeleton of the request contract: every required field.
        browser.wait_until("document.getElementById('input').value.includes('\"goal\"')");
        let first = start(browser, "rust");
        assert!(browser.text("#ask-context").contains("step confirm has waited"), "{}", browser.text("#ask-context"));
        let subject = browser.text("#ask-subject");
        assert!(
            subject.contains("what is being approved") && subject.contains("one post about Rust"),
            "{subject}"
        );
        browser.run("document.getElementById('new-run').click();");
        let second = start(browser, "go");
        assert_ne!(first, second);
        // The first run is listed, waiting, and one click opens it again.
        browser.wait_until(&format!(
            "!!document.querySelector('#run-list [data-id=\"{first}\"][data-status=waiting]')"
        ));
        browser.wait_until("document.getElementById('waiting-note').textContent === '2 runs wait for an answer'");
        browser.run(&format!("document.querySelector('#run-list [data-id=\"{first}\"] button').click();"));
        browser.wait_until(&format!(
            "page.runId === '{first}' && !document.getElementById('ask').classList.contains('hidden') && document.getElementById('input').value.includes('rust')"
        ));
        assert_eq!(browser.text("#question"), "Publish it?");
        // Only the stream of the run shown is open: the second's was closed on leaving it.
        assert_eq!(
            browser.eval("window.opened.filter(o => o.source.readyState !== 2).map(o => o.url)"),
            json!([format!("/runs/{first}/events")])
        );
        browser.run("document.getElementById('note').value = 'ship it'; document.getElementById('approve').click();");
        browser.wait_until("document.body.dataset.finished === 'true'");
        assert_eq!(browser.text("#outcome"), "completed (gate_passed)");
        assert_eq!(browser.eval("document.getElementById('note').value"), json!(""), "the note is cleared");
        assert!(browser.text("#timeline [data-kind=human] .summary").contains("ship it"));

        // Reloaded, the run keeps its input.
        browser.navigate(&format!("{base}/?run={first}"));
        browser.wait_until("document.body.dataset.finished === 'true' && document.getElementById('input').value.includes('rust')");

        // The second run, cancelled, ends cancelled (never stays "cancelling").
        browser.run(&format!("document.querySelector('#run-list [data-id=\"{second}\"] button').click();"));
        browser.wait_until(&format!("page.runId === '{second}' && !document.getElementById('ask').classList.contains('hidden')"));
        browser.run("document.getElementById('cancel').click();");
        browser.wait_until("document.body.dataset.finished === 'true'");
        assert_eq!(browser.text("#answer-title"), "Cancelled");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(browser.eval("document.getElementById('status').dataset.status"), json!("finished"));

        // A third run waits; the server dies: the page says so and offers no Approve;
        // the server comes back and the page reconnects to the resumed run.
        browser.run("document.getElementById('new-run').click();");
        let third = start(browser, "zig");
        drop(held.lock().ok().and_then(|mut server| server.take()));
        browser.wait_until("document.body.dataset.connection === 'lost' && document.getElementById('ask').classList.contains('hidden')");
        assert!(browser.text("#connection").contains("disconnected"));
        assert_eq!(browser.eval("document.getElementById('status').dataset.status"), json!("disconnected"));
        let (again, _) = restart();
        browser.wait_until(&format!(
            "document.body.dataset.connection === 'ok' && page.runId === '{third}' && !document.getElementById('ask').classList.contains('hidden')"
        ));
        browser.run("document.getElementById('approve').click();");
        browser.wait_until("document.body.dataset.finished === 'true'");
        assert_eq!(browser.text("#outcome"), "completed (gate_passed)");
        drop(again);
    })
    .await;
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flow_graph_marks_the_running_step_while_a_slow_model_answers() {
    let project = temp_dir("graph");
    review_ask(&project);
    let model = review_model(Duration::from_secs(3)).await;
    let envs = [
        ("OPENAI_BASE_URL", format!("{}/v1", model.uri())),
        ("OPENAI_API_KEY", "sk-browser-test-key".to_string()),
    ];
    let (_server, base) = serve(&project, &["--port", "0", "review_ask.charter"], &envs);
    in_browser(
        format!("{base}/?spec=review_ask&input=%7B%22goal%22%3A%22rust%22%7D&start=1"),
        |browser| {
            // The writer's answer takes 3 s: its step is the running one meanwhile.
            browser.wait_until("!!document.querySelector('#graph svg [data-step=write].running')");
            assert_eq!(
                browser.eval("[...document.querySelectorAll('#graph [data-step]')].map(n => n.dataset.step)"),
                json!(["write", "review", "judge", "deliver", "confirm"]),
                "every step is drawn, named"
            );
            assert_eq!(
                browser.eval("document.querySelectorAll('#graph .running').length"),
                json!(1)
            );
            browser.screenshot("page-mid-run.png");
            browser.wait_until("!!document.querySelector('#graph svg [data-step=confirm].running')");
            assert_eq!(
                browser.eval("[...document.querySelectorAll('#graph .visited')].map(n => n.dataset.step)"),
                json!(["write", "review", "judge", "deliver", "confirm"])
            );
            // A click on a step shows only its rows.
            browser.run("document.querySelector('#graph [data-step=judge]').dispatchEvent(new MouseEvent('click', {bubbles: true}));");
            assert_eq!(
                browser.eval("[...document.querySelectorAll('#timeline .event')].filter(r => r.offsetParent !== null).every(r => r.dataset.step === 'judge')"),
                json!(true)
            );
            browser.run("document.getElementById('approve').click();");
            browser.wait_until("document.body.dataset.finished === 'true'");
            assert_eq!(browser.eval("document.querySelectorAll('#graph .running').length"), json!(0));
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_opens_on_a_table_whose_first_row_is_the_failure_and_links_to_its_marked_timeline()
 {
    let report = failing_library_report("report-table");
    in_browser(format!("file://{}", report.display()), |browser| {
        browser.wait_until("document.querySelectorAll('.summary-table tbody tr').length === 3");
        let first = browser.eval(
            "[...document.querySelector('.summary-table tbody tr').children].map(td => td.textContent)",
        );
        assert_eq!(first[0], json!("CHANGED"), "{first}");
        assert_eq!(first[1], json!("closed_loop/happy_path"), "{first}");
        assert!(browser.text(".counts").contains("1 CHANGED, 2 passed"), "{}", browser.text(".counts"));
        assert!(browser.text("#meta").contains(" UTC"), "the time: {}", browser.text("#meta"));
        // The failure links to the first event where its trace departs from the snapshot.
        browser.run("document.querySelector('.summary-table tbody tr a').click();");
        browser.wait_until("location.hash.endsWith('-diverged')");
        let marked = browser.eval(
            "(() => { const row = document.getElementById(location.hash.slice(1)); return {diverged: row.classList.contains('diverged'), scenario: row.closest('.scenario').dataset.name, open: row.closest('details').open, kind: row.dataset.kind}; })()",
        );
        assert_eq!(marked["diverged"], json!(true), "{marked}");
        assert_eq!(marked["scenario"], json!("closed_loop/happy_path"), "{marked}");
        assert_eq!(marked["open"], json!(true), "{marked}");
        assert_eq!(
            browser.eval("document.querySelectorAll('.event.diverged').length"),
            json!(1),
            "only the CHANGED timeline is marked, once"
        );
        browser.screenshot("report-marked.png");
        // A gate row reads its scores against the spec's thresholds.
        let scores = browser.eval(
            "[...document.querySelector('.scenario[data-name=\"closed_loop/happy_path\"] [data-kind=gate] table.scores').querySelectorAll('tr')].map(r => [...r.children].map(c => c.textContent))",
        );
        assert_eq!(scores[0], json!(["score", "weight", "value", "threshold", "result"]), "{scores}");
        let relevance = scores
            .as_array()
            .and_then(|rows| rows.iter().find(|row| row[0] == "relevance"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(relevance[3], json!("\u{2265} 6"), "{scores}");
        assert!(relevance[4].as_str().is_some_and(|result| result.starts_with("meets 6")), "{scores}");
        // The filter keeps what matches.
        browser.run("const f = document.getElementById('filter'); f.value = 'budget'; f.dispatchEvent(new Event('input'));");
        assert_eq!(
            browser.eval("[...document.querySelectorAll('.summary-table tbody tr')].filter(r => !r.classList.contains('hidden')).map(r => r.dataset.name)"),
            json!(["closed_loop/budget_exhausted"])
        );
        browser.run("const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input')); window.scrollTo(0, 0);");
        browser.screenshot("report.png");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_turn_conversation_in_the_chat_view() {
    let project = temp_dir("chat");
    let (_server, base) = serve(
        &project,
        &[
            "--port",
            "0",
            "--replay",
            &golden("mention_roles/conversation_sticky_creative"),
        ],
        &[],
    );
    let sessions = project.join(".charter/sessions");
    in_browser(format!("{base}/?chat=1"), move |browser| {
        browser.wait_until("!document.getElementById('chat-view').classList.contains('hidden') && document.getElementById('chat-spec').value === 'mention_roles'");
        let lines = [
            "@创意伙伴 晚上睡不着，起来写代码，想两个漫画创意",
            "第二个展开讲讲，分成四格",
            "@创意总监 你选哪个？",
        ];
        for (count, line) in lines.iter().enumerate() {
            browser.run(&format!(
                "document.getElementById('chat-input').value = {}; document.querySelector('#chat-form [type=submit]').click();",
                json!(line)
            ));
            browser.wait_until(&format!(
                "document.querySelectorAll('#chat-turns .turn').length === {}",
                count + 1
            ));
        }
        assert_eq!(browser.text("#chat-error"), "");
        assert_eq!(
            browser.eval("[...document.querySelectorAll('#chat-turns .said.you')].map(n => n.textContent)"),
            json!(lines)
        );
        // The second turn sticks to the creative partner; the third switches.
        assert_eq!(
            browser.eval("[...document.querySelectorAll('#chat-turns .who')].map(n => n.textContent)"),
            json!(["creative", "creative", "talker"])
        );
        let third = browser.text("#chat-turns .turn:nth-child(3) .reply .text");
        assert!(third.contains("凌晨三点的编译器"), "{third}");
        browser.screenshot("chat.png");
        // The conversation is kept: opened again, it shows its turns.
        let session = browser.eval("page.session").as_str().unwrap_or_default().to_string();
        assert!(sessions.join(format!("{session}.json")).is_file(), "the session is saved");
        browser.navigate(&format!("{base}/?session={session}"));
        browser.wait_until("document.querySelectorAll('#chat-turns .turn').length === 3");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charter_view_of_a_served_run_shows_role_outputs_the_answer_and_wall_time() {
    let project = temp_dir("view-served");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/fixtures/review_loop.charter");
    let _ = std::fs::copy(&fixture, project.join("review_loop.charter"));
    let model = review_model(Duration::ZERO).await;
    let envs = [
        ("OPENAI_BASE_URL", format!("{}/v1", model.uri())),
        ("OPENAI_API_KEY", "sk-browser-test-key".to_string()),
    ];
    let (_server, base) = serve(&project, &["--port", "0", "review_loop.charter"], &envs);
    let client = reqwest::Client::new();
    let started: Value = client
        .post(format!("{base}/runs"))
        .json(&json!({"spec": "review_loop", "input": {"goal": "rust"}}))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .unwrap_or_else(|error| panic!("{error}"))
        .json()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let id = started["id"].as_str().unwrap_or_default().to_string();
    let begun = Instant::now();
    loop {
        let status: Value = client
            .get(format!("{base}/runs/{id}"))
            .send()
            .await
            .unwrap_or_else(|error| panic!("{error}"))
            .json()
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        if status["status"] == "finished" {
            break;
        }
        assert!(begun.elapsed() < Duration::from_secs(60), "{status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let trace = project.join(".charter/runs").join(&id).join("events.jsonl");
    let page = project.join("served.html");
    let viewed = Command::new(env!("CARGO_BIN_EXE_charter"))
        .arg("view")
        .arg(&trace)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(viewed.status.success(), "{viewed:?}");
    in_browser(format!("file://{}", page.display()), |browser| {
        browser.wait_until("document.querySelectorAll('.event').length > 0");
        let outputs = browser.eval(
            "[...document.querySelectorAll('[data-kind=role_output] pre')].map(p => p.textContent).join('\\n')",
        );
        assert!(outputs.as_str().unwrap_or_default().contains("Rust is fast."), "{outputs}");
        assert_eq!(browser.text(".result h2"), "Answer");
        assert!(browser.text(".result .answer-value").contains("one post about Rust"));
        let summary = browser.text("details.timeline > summary");
        assert!(summary.starts_with("timeline (wall time)"), "{summary}");
        let body = browser.eval("document.body.innerText");
        assert!(!body.as_str().unwrap_or_default().contains("virtual time"), "{body}");
    })
    .await;
}
