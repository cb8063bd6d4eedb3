//! What several CLI test binaries share: the repository's root, copying its seed files into a test project, a model server's answer, how many requests it got for a role, a cassette without its pins and running `charter` with text typed on its stdin.

use std::path::{Path, PathBuf};

/// The repository's root (the seeds and goldens are copied from there).
#[allow(dead_code)] // not every test binary reads the seeds
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Copies one file, making its parent directories.
#[allow(dead_code)] // not every test binary copies files
pub fn copy_file(from: &Path, to: &Path) {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|error| panic!("{error}"));
    }
    std::fs::copy(from, to).unwrap_or_else(|error| panic!("{}: {error}", from.display()));
}

/// Copies a directory tree.
#[allow(dead_code)] // not every test binary copies files
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|error| panic!("{error}"));
    let entries = std::fs::read_dir(from).unwrap_or_else(|error| panic!("{error}"));
    for entry in entries.flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            copy_file(&path, &target);
        }
    }
}

/// An OpenAI chat-completions answer whose message content is `content` as JSON, for a
/// wiremock model server.
#[allow(dead_code)] // only the test binaries that run against a model server call it
pub fn openai_answer(content: serde_json::Value) -> wiremock::ResponseTemplate {
    wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10}
    }))
}

/// A cassette's text without the `prompt_hash` of its calls (a block entry's line and a
/// flow entry's field): what a hand-written cassette looks like, whose calls replay as
/// answered whatever their prompts now show.
#[allow(dead_code)] // only the test binaries that edit a pinned cassette call it
pub fn without_prompt_hashes(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|line| !line.trim_start().starts_with("prompt_hash:"))
        .map(|line| {
            let Some(start) = line.find("prompt_hash: \"") else {
                return line.to_string();
            };
            let value = start + "prompt_hash: \"".len();
            let end = line[value..]
                .find('"')
                .map_or(line.len(), |end| value + end + 1);
            let rest = line[end..].strip_prefix(", ").unwrap_or(&line[end..]);
            format!("{}{rest}", &line[..start])
        })
        .collect()
}

/// Runs `command` with `stdin` typed into it (what a person at the terminal would type).
#[allow(dead_code)] // not every test binary types into charter
pub fn typed(mut command: std::process::Command, stdin: &str) -> std::process::Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run charter: {error}"));
    if let Some(mut input) = child.stdin.take() {
        // A command that refuses its arguments exits before reading: the pipe is closed.
        let _ = input.write_all(stdin.as_bytes());
    }
    child
        .wait_with_output()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// How many requests the mock model server received for `role` (the name of the JSON
/// schema its answer is asked in).
#[allow(dead_code)] // only the test binaries that count a mock's requests call it
pub async fn requests_for(server: &wiremock::MockServer, role: &str) -> usize {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|request| {
            serde_json::from_slice::<serde_json::Value>(&request.body)
                .is_ok_and(|body| body["response_format"]["json_schema"]["name"] == role)
        })
        .count()
}
