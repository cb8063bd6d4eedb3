//! `charter lsp` at the protocol level: the built binary is started, spoken to in JSON-RPC
//! with Content-Length framing over its stdin and stdout, and its answers on the seed
//! specs are checked. Every read has a time limit, so a hung server fails the test.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(30);

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    messages: Receiver<Value>,
    next_id: i64,
    /// Notifications read while waiting for a response.
    pending: Vec<Value>,
}

impl Client {
    /// Starts `charter lsp` and completes the handshake with the capabilities an old
    /// client (Neovim 0.7) sends: none worth naming.
    fn start() -> (Client, Value) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_charter"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("charter lsp starts");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, messages) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(message) = read_message(&mut reader) {
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut client = Client {
            child,
            stdin,
            messages,
            next_id: 0,
            pending: Vec::new(),
        };
        let root = uri(&support::repository().display().to_string());
        let result = client.request(
            "initialize",
            json!({"processId": null, "rootUri": root, "capabilities": {}}),
        );
        client.notify("initialized", json!({}));
        (client, result)
    }

    fn send(&mut self, message: Value) {
        let body = message.to_string();
        let stdin = self.stdin.as_mut().expect("stdin open");
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        stdin.flush().expect("flush");
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn next(&mut self) -> Value {
        self.messages
            .recv_timeout(TIMEOUT)
            .unwrap_or_else(|_| panic!("no message from the server within {TIMEOUT:?}"))
    }

    /// The whole response to a request (`result` or `error`).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.next();
            if message["id"] == json!(id) {
                return message;
            }
            self.pending.push(message);
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params);
        assert!(response.get("error").is_none(), "{method}: {response}");
        response["result"].clone()
    }

    /// The next diagnostics published for `uri`.
    fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let published = |message: &Value| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == uri
        };
        if let Some(at) = self.pending.iter().position(published) {
            let message = self.pending.remove(at);
            return message["params"]["diagnostics"]
                .as_array()
                .cloned()
                .unwrap_or_default();
        }
        loop {
            let message = self.next();
            if published(&message) {
                return message["params"]["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
            }
        }
    }

    fn open(&mut self, path: &str, text: &str) -> String {
        let uri = uri(path);
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "charter", "version": 1, "text": text}}),
        );
        uri
    }

    fn change(&mut self, uri: &str, version: i64, text: &str) {
        self.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
        );
    }

    /// `shutdown`, `exit`, and the server's exit code.
    fn stop(mut self) -> Option<i32> {
        self.request("shutdown", Value::Null);
        self.notify("exit", Value::Null);
        self.stdin = None;
        wait(&mut self.child)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait(child: &mut Child) -> Option<i32> {
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn uri(path: &str) -> String {
    format!("file://{path}")
}

fn seed(relative: &str) -> (String, String) {
    let path = support::repository().join("specs/seeds").join(relative);
    let path = std::fs::canonicalize(&path).expect("the seed exists");
    let text = std::fs::read_to_string(&path).expect("the seed reads");
    (path.display().to_string(), text)
}

/// The zero-based line and UTF-16 column of the `nth` `needle` in `text`, plus `within`
/// characters.
fn position(text: &str, needle: &str, nth: usize, within: usize) -> Value {
    let at = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` is in the text"))
        .0;
    let before = &text[..at];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |index| index + 1);
    let column: usize = text[line_start..at].encode_utf16().count() + within;
    json!({"line": line, "character": column})
}

fn line_of(text: &str, needle: &str) -> u64 {
    position(text, needle, 0, 0)["line"]
        .as_u64()
        .expect("a line")
}

#[test]
fn initialize_advertises_every_feature_and_shutdown_exits_0() {
    let (client, result) = Client::start();
    let capabilities = &result["capabilities"];
    assert_eq!(capabilities["textDocumentSync"], json!(1), "full text sync");
    for feature in [
        "hoverProvider",
        "definitionProvider",
        "referencesProvider",
        "documentSymbolProvider",
        "documentFormattingProvider",
    ] {
        assert_eq!(capabilities[feature], json!(true), "{feature}");
    }
    assert_eq!(
        capabilities["renameProvider"]["prepareProvider"],
        json!(true)
    );
    assert!(
        capabilities["completionProvider"]["triggerCharacters"]
            .as_array()
            .is_some_and(|t| t.contains(&json!(".")))
    );
    let legend = &capabilities["semanticTokensProvider"]["legend"]["tokenTypes"];
    assert_eq!(legend[0], "keyword");
    assert_eq!(capabilities["semanticTokensProvider"]["full"], json!(true));
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn exit_without_shutdown_exits_1() {
    let (mut client, _) = Client::start();
    client.notify("exit", Value::Null);
    client.stdin = None;
    assert_eq!(wait(&mut client.child), Some(1));
}

#[test]
fn diagnostics_follow_edits_of_the_spec() {
    let (path, text) = seed("lead_agent.charter");
    let broken = text.replacen("checker(create, validate)", "chekker(create, validate)", 1);
    let (mut client, _) = Client::start();
    let uri = client.open(&path, &broken);
    let found = client.diagnostics(&uri);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["code"], "E002");
    assert_eq!(found[0]["severity"], 1);
    assert_eq!(
        found[0]["range"]["start"]["line"].as_u64(),
        Some(line_of(&broken, "chekker"))
    );
    assert!(
        found[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("did you mean `checker`")),
        "{}",
        found[0]
    );
    client.change(&uri, 2, &text);
    assert_eq!(client.diagnostics(&uri), Vec::<Value>::new());
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn an_imported_template_gets_its_own_diagnostics() {
    let (path, text) = seed("lead_agent/prompts/planner.md.j2");
    let broken = text.replace("{{ request.message }}", "{{ request.mesage }}");
    let (mut client, _) = Client::start();
    let uri = client.open(&path, &broken);
    let found = client.diagnostics(&uri);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["code"], "E014");
    assert_eq!(
        found[0]["range"]["start"],
        position(&broken, "mesage", 0, 0)
    );
    client.change(&uri, 2, &text);
    assert_eq!(client.diagnostics(&uri), Vec::<Value>::new());
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn hover_on_a_step_shows_its_role() {
    let (path, text) = seed("lead_agent.charter");
    let (mut client, _) = Client::start();
    let uri = client.open(&path, &text);
    let hover = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": position(&text, "check    = checker", 0, 2)}),
    );
    let shown = hover["contents"]["value"].as_str().expect("markdown");
    for expected in [
        "role checker",
        "model: default",
        "input: WorkflowDraft, ValidationReport",
        "output: CheckReport",
    ] {
        assert!(shown.contains(expected), "{expected} in {shown}");
    }
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn definition_of_a_template_field_is_the_contract_field_and_references_cross_files() {
    let (spec_path, spec_text) = seed("lead_agent.charter");
    let (path, text) = seed("lead_agent/prompts/checker.md.j2");
    let (mut client, _) = Client::start();
    let uri = client.open(&path, &text);
    let found = client.request(
        "textDocument/definition",
        json!({"textDocument": {"uri": uri}, "position": position(&text, "workflow_draft.version", 0, 16)}),
    );
    assert_eq!(found[0]["uri"], json!(self::uri(&spec_path)));
    assert_eq!(
        found[0]["range"]["start"],
        position(&spec_text, "version: int(1..)", 0, 0)
    );
    let references = client.request(
        "textDocument/references",
        json!({"textDocument": {"uri": uri}, "position": position(&text, "workflow_draft.version", 0, 2),
               "context": {"includeDeclaration": true}}),
    );
    let uris: Vec<&str> = references
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|l| l["uri"].as_str())
        .collect();
    assert!(
        uris.contains(&self::uri(&spec_path).as_str()) && uris.contains(&uri.as_str()),
        "{uris:?}"
    );
    assert!(uris.len() >= 6, "{uris:?}");
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn renaming_a_step_edits_the_spec_and_its_templates() {
    let (path, text) = seed("auto_agent.charter");
    let (mut client, _) = Client::start();
    let uri = client.open(&path, &text);
    let at = position(&text, "execute   = executor", 0, 1);
    let prepared = client.request(
        "textDocument/prepareRename",
        json!({"textDocument": {"uri": uri}, "position": at}),
    );
    assert_eq!(prepared["placeholder"], "execute");
    let edit = client.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri}, "position": at, "newName": "run_task"}),
    );
    let changes = edit["changes"].as_object().expect("changes by file");
    let in_spec = changes[&uri].as_array().expect("spec edits");
    assert_eq!(in_spec.len(), 7, "{in_spec:?}");
    let history = position(&text, "history: [execute", 0, "history: [".len());
    assert!(in_spec.iter().any(|e| e["range"]["start"] == history));
    for template in ["executor.md.j2", "summarizer.md.j2", "analyzer.md.j2"] {
        let (template_path, _) = seed(&format!("auto_agent/prompts/{template}"));
        let edits = changes
            .get(&self::uri(&template_path))
            .unwrap_or_else(|| panic!("{template} in {changes:?}"));
        assert!(
            edits
                .as_array()
                .is_some_and(|e| e.iter().all(|e| e["newText"] == "run_task"))
        );
    }
    let clash = client.call(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri}, "position": at, "newName": "supervise"}),
    );
    assert!(
        clash["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already exists")),
        "{clash}"
    );
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn completion_after_request_dot_lists_its_fields() {
    let (path, text) = seed("lead_agent.charter");
    let typed = text.replacen("planner(request)", "planner(request.)", 1);
    let (mut client, _) = Client::start();
    let uri = client.open(&path, &text);
    client.change(&uri, 2, &typed);
    let items = client.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": uri}, "position": position(&typed, "request.)", 0, 8)}),
    );
    let labels: Vec<&str> = items
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|i| i["label"].as_str())
        .collect();
    assert_eq!(labels, ["message"]);
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn document_symbols_and_semantic_tokens() {
    let (path, text) = seed("lead_agent.charter");
    let (mut client, _) = Client::start();
    let uri = client.open(&path, &text);
    let symbols = client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri}}),
    );
    let flow = symbols
        .as_array()
        .expect("a list")
        .iter()
        .find(|s| s["name"] == "flow")
        .expect("the flow");
    let steps: Vec<&str> = flow["children"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(steps.first(), Some(&"intent"));
    assert!(steps.contains(&"check") && steps.contains(&"report"));
    let tokens = client.request(
        "textDocument/semanticTokens/full",
        json!({"textDocument": {"uri": uri}}),
    );
    let data: Vec<u64> = tokens["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(data.len() % 5, 0);
    // `spec` at 0:0, four units long, a keyword (type 0).
    assert_eq!(&data[..5], &[0, 0, 4, 0, 0]);
    // Decoded, the token at `check    = checker`'s role is a function (type 2).
    let target = position(&text, "check    = checker", 0, 11);
    let (mut line, mut column) = (0u64, 0u64);
    let mut found = None;
    for token in data.chunks(5) {
        line += token[0];
        column = if token[0] == 0 {
            column + token[1]
        } else {
            token[1]
        };
        if json!({"line": line, "character": column}) == target {
            found = Some(token[3]);
        }
    }
    assert_eq!(found, Some(2));
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn positions_are_utf16_after_non_ascii_text() {
    let root = std::fs::canonicalize(support::repository()).expect("the repository");
    let path = root.join("specs/utf16_probe.charter").display().to_string();
    let text = "spec probe version \"1\"\ncontract Ask { question: string }\nrole answerer {\n  model: \"openai:gpt-4o-mini\"\n  prompt: \"审查 — 𝄞 {{ ask.question }}\"\n  input: Ask\n  output: Delivery\n}\nflow {\n  answer = finalize answerer(request) -> done\n}\n";
    let (mut client, _) = Client::start();
    let uri = client.open(&path, text);
    let found = client.request(
        "textDocument/definition",
        json!({"textDocument": {"uri": uri}, "position": position(text, "ask.question", 0, 5)}),
    );
    assert_eq!(
        found[0]["range"]["start"],
        position(text, "question: string", 0, 0)
    );
    let hover = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": position(text, "ask.question", 0, 5)}),
    );
    assert_eq!(
        hover["range"]["start"],
        position(text, "ask.question", 0, 4)
    );
    assert_eq!(hover["range"]["end"], position(text, "ask.question", 0, 12));
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn lsp_help_shows_how_to_set_up_an_editor() {
    let output = Command::new(env!("CARGO_BIN_EXE_charter"))
        .args(["lsp", "--help"])
        .output()
        .expect("charter lsp --help runs");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "vim.lsp.start_client",
        "buf_attach_client",
        "VS Code",
        "[language-server.charter]",
    ] {
        assert!(help.contains(expected), "{expected} in {help}");
    }
}

#[test]
fn closing_a_template_clears_its_diagnostics() {
    let (path, text) = seed("lead_agent/prompts/planner.md.j2");
    let broken = text.replace("{{ request.message }}", "{{ nobody }}");
    let (mut client, _) = Client::start();
    let uri = client.open(&path, &broken);
    let found = client.diagnostics(&uri);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`nobody`")),
        "{}",
        found[0]
    );
    client.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    assert_eq!(client.diagnostics(&uri), Vec::<Value>::new());
    assert_eq!(client.stop(), Some(0));
}

#[test]
fn input_that_is_not_json_rpc_exits_2() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_charter"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("charter lsp starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"hello\r\n\r\n").expect("write");
    drop(stdin);
    assert_eq!(wait(&mut child), Some(2));
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(stderr.contains("language server"), "{stderr}");
}

#[test]
fn formatting_gives_charter_fmts_layout_as_one_edit() {
    let (path, text) = seed("lead_agent.charter");
    // The seed is formatted; squeeze a step's spacing and it no longer is.
    let messy = text.replacen(
        "  plan     = planner(request)",
        "plan=planner( request )",
        1,
    );
    assert_ne!(messy, text, "the seed's plan step");
    let (mut client, _) = Client::start();
    let uri = client.open(&path, &messy);
    let params =
        json!({"textDocument": {"uri": uri}, "options": {"tabSize": 2, "insertSpaces": true}});
    let edits = client.request("textDocument/formatting", params.clone());
    let edits = edits.as_array().expect("a list of edits");
    assert_eq!(edits.len(), 1, "{edits:?}");
    assert_eq!(
        edits[0]["range"]["start"],
        json!({"line": 0, "character": 0})
    );
    assert_eq!(edits[0]["newText"], json!(text), "charter fmt's layout");

    // Formatted text needs no edit; a file whose header does not parse is refused, with its line.
    client.change(&uri, 2, &text);
    assert_eq!(
        client.request("textDocument/formatting", params.clone()),
        json!([])
    );
    client.change(&uri, 3, &format!("spec {{\n{text}"));
    let refused = client.call("textDocument/formatting", params);
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot format") && message.contains("line 1"),
        "{refused}"
    );
    assert_eq!(client.stop(), Some(0));
}
