//! Unit tests of what the live providers share: `Retry-After`, HTTP dates, error mapping, redaction, routing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::json;

use super::*;
use crate::engine::provider::CallKey;

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        if let Ok(value) = HeaderValue::from_str(value) {
            map.insert(*name, value);
        }
    }
    map
}

fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds)
}

#[test]
fn retry_after_is_seconds_or_an_http_date() {
    let now = at(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
    let check = |pairs: &[(&'static str, &str)], expect: Option<Duration>| {
        assert_eq!(retry_after(&headers(pairs), now), expect, "{pairs:?}");
    };
    check(&[("retry-after", "7")], Some(Duration::from_secs(7)));
    check(&[("retry-after", " 0 ")], Some(Duration::ZERO));
    check(&[("retry-after", "1.5")], Some(Duration::from_millis(1500)));
    check(
        &[("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT")],
        Some(Duration::from_secs(30)),
    );
    // A date in the past asks for no wait.
    check(
        &[("retry-after", "Sat, 05 Nov 1994 08:49:37 GMT")],
        Some(Duration::ZERO),
    );
    check(
        &[("retry-after-ms", "250"), ("retry-after", "9")],
        Some(Duration::from_millis(250)),
    );
    check(&[("retry-after", "soon")], None);
    check(&[("retry-after", "-3")], None);
    check(&[], None);
}

#[test]
fn http_dates_parse_to_unix_seconds() {
    assert_eq!(
        parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
        Some(784_111_777)
    );
    assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
    assert_eq!(
        parse_http_date("Tue, 29 Feb 2028 12:00:00 GMT"),
        Some(1_835_438_400)
    );
    for bad in [
        "",
        "Sun, 06 Nov 1994 08:49:37 PST",
        "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49 GMT",
        "Sun, 06 Nov 1969 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
    ] {
        assert_eq!(parse_http_date(bad), None, "{bad}");
    }
}

#[test]
fn statuses_map_to_transient_throttled_and_permanent_errors() {
    let key = ApiKey::new("sk-test-123");
    let throttled = status_error(
        429,
        &headers(&[("retry-after", "3")]),
        r#"{"error": {"message": "rate limited"}}"#,
        Some(&key),
        URL,
        &Limits::default(),
    );
    assert_eq!(
        throttled,
        ProviderError::Throttled {
            status: 429,
            retry_after: Duration::from_secs(3),
            message: "rate limited".into()
        }
    );
    assert!(throttled.is_transient());
    assert_eq!(throttled.retry_after(), Some(Duration::from_secs(3)));
    assert_eq!(throttled.status(), Some(429));
    let plain_429 = status_error(429, &HeaderMap::new(), "", None, URL, &Limits::default());
    assert!(plain_429.is_transient() && plain_429.retry_after().is_none());
    assert!(
        status_error(
            502,
            &HeaderMap::new(),
            "bad gateway",
            None,
            URL,
            &Limits::default()
        )
        .is_transient()
    );
    let denied = status_error(
        401,
        &HeaderMap::new(),
        r#"{"error": {"message": "Incorrect API key provided: sk-test-123"}}"#,
        Some(&key),
        URL,
        &Limits::default(),
    );
    assert!(!denied.is_transient());
    assert_eq!(
        denied.to_string(),
        "provider error 401: Incorrect API key provided: <redacted>"
    );
}

#[test]
fn a_retry_after_is_cut_to_the_cap() {
    let hour = headers(&[("retry-after", "3600")]);
    let throttled = status_error(503, &hour, "", None, URL, &Limits::default());
    assert_eq!(throttled.retry_after(), Some(Duration::from_secs(60)));
    let limits = Limits {
        max_retry_after: Duration::from_secs(5),
        ..Limits::default()
    };
    let throttled = status_error(429, &hour, "", None, URL, &limits);
    assert_eq!(throttled.retry_after(), Some(Duration::from_secs(5)));
}

#[test]
fn error_bodies_are_summarized() {
    assert_eq!(error_message(r#"{"error": {"message": "m"}}"#), "m");
    assert_eq!(
        error_message(
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#
        ),
        "Overloaded"
    );
    assert_eq!(error_message(r#"{"error": "plain"}"#), "plain");
    assert_eq!(error_message("  "), "(empty body)");
    let long = "x".repeat(2000);
    assert_eq!(
        error_message(&long).chars().count(),
        301,
        "300 characters and `…`"
    );
}

#[test]
fn keys_never_show() {
    let key = ApiKey::new("sk-secret");
    assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
    assert_eq!(
        key.redact("a sk-secret b sk-secret"),
        "a <redacted> b <redacted>"
    );
    assert_eq!(ApiKey::new("").redact("text"), "text");
    let config = OpenAiConfig::new("http://localhost:1/v1", Some(key.clone()));
    assert!(!format!("{config:?}").contains("sk-secret"));
}

#[test]
fn model_names_drop_the_provider() {
    assert_eq!(model_name("openai:gpt-4o"), "gpt-4o");
    assert_eq!(model_name("ollama:llama3:8b"), "llama3:8b");
    assert_eq!(model_name("gpt-4o"), "gpt-4o");
    assert_eq!(trim_base_url("http://h/v1/"), "http://h/v1");
}

#[tokio::test]
async fn calls_are_routed_by_provider() {
    struct Fixed(&'static str);
    impl Provider for Fixed {
        fn complete(
            &self,
            _request: ModelRequest,
        ) -> BoxFuture<'_, Result<ModelResponse, ProviderError>> {
            let name = self.0;
            Box::pin(async move {
                Ok(ModelResponse {
                    output: ModelOutput::Json(json!(name)),
                    usage: Default::default(),
                    tool_calls: Vec::new(),
                    latency: Duration::ZERO,
                })
            })
        }
    }
    let providers = Providers::new()
        .with("openai", Arc::new(Fixed("o")))
        .with("anthropic", Arc::new(Fixed("a")));
    let request = |model: &str| ModelRequest {
        key: CallKey::new("s"),
        role: "r".into(),
        model: model.into(),
        prompt: String::new(),
        chat: None,
        output_schema: std::sync::Arc::new(serde_json::Value::Null),
        tools: Vec::new(),
        max_tool_calls: None,
        previous_error: None,
        settings: Default::default(),
        log: Default::default(),
    };
    let answer = providers.complete(request("anthropic:claude")).await;
    assert_eq!(
        answer.map(|response| response.output),
        Ok(ModelOutput::Json(json!("a")))
    );
    let missing = providers.complete(request("gemini:pro")).await;
    assert_eq!(
        missing.err().map(|error| error.to_string()),
        Some(
            "provider error: no provider `gemini` is configured for model `gemini:pro` (configured: anthropic, openai)"
                .to_string()
        )
    );
    assert_eq!(
        format!("{providers:?}"),
        r#"Providers { names: ["anthropic", "openai"] }"#
    );
}

#[test]
fn final_texts_become_json_when_they_parse() {
    assert_eq!(
        output_from_text("```json\n{\"a\": 1}\n```"),
        ModelOutput::Json(json!({"a": 1}))
    );
    assert_eq!(
        output_from_text("not json {"),
        ModelOutput::Text("not json {".into())
    );
}

#[test]
fn live_settings_come_from_the_variables_given() {
    let variables = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect::<Vec<_>>()
    };
    let spec = crate::testing::compile_spec(
        r#"spec t version "1"
contract Request { goal: string }
contract Essay { text: string }
role a { model: "openai:gpt-4o-mini" prompt: """x""" input: Request output: Essay }
role b { model: "anthropic:claude" prompt: """x""" input: Request output: Essay }
role c { model: "anthropic:claude" prompt: """x""" input: Request output: Essay }
flow {
  s1 = a(request) -> s2
  s2 = b(request) -> s3
  s3 = c(request) -> done
}
"#,
    );
    let none =
        LiveSettings::from_variables(variables(&[("OPENAI_API_KEY", " "), ("PATH", "/bin")]));
    assert!(none.available().is_empty());
    assert_eq!(
        none.missing_for(&spec),
        [
            "roles b, c use `anthropic`: set ANTHROPIC_API_KEY",
            "roles a use `openai`: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)",
        ]
    );
    // A local server needs no key.
    let local = LiveSettings::from_variables(variables(&[(
        "OPENAI_BASE_URL",
        "http://localhost:11434/v1",
    )]));
    assert_eq!(
        local.available().into_iter().collect::<Vec<_>>(),
        ["openai"]
    );
    let both = LiveSettings::from_variables(variables(&[
        ("OPENAI_API_KEY", "sk-openai-1"),
        ("ANTHROPIC_API_KEY", "sk-anthropic-1"),
    ]));
    assert!(both.missing_for(&spec).is_empty());
    assert_eq!(both.secrets(), ["sk-openai-1", "sk-anthropic-1"]);
    // A placeholder key (a local server takes any) is not scrubbed: every `x` would go.
    let placeholder = LiveSettings::from_variables(variables(&[("OPENAI_API_KEY", "x")]));
    assert!(placeholder.secrets().is_empty());
    let providers = both
        .providers(Arc::new(crate::world::tools::ToolBox::empty()))
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(providers.names(), ["anthropic", "openai"]);
    let shown = format!("{both:?}");
    assert!(
        !shown.contains("sk-o") && !shown.contains("sk-a"),
        "{shown}"
    );
}

const URL: &str = "http://127.0.0.1:9/v1/chat/completions";

#[test]
fn error_bodies_are_shortened_and_keep_no_server_paths() {
    let body = r#"Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/llama_cpp/server/app.py", line 12, in create
  File "C:\srv\llama\app.py", line 3
ValueError: Input should be 'text' or 'json_object' (see https://docs.example.org/errors/a/b)"#;
    let message = error_message(body);
    assert!(!message.contains("site-packages"), "{message}");
    assert!(!message.contains("srv"), "{message}");
    assert!(message.contains("\"<path>\""), "{message}");
    assert!(
        message.contains("https://docs.example.org/errors/a/b"),
        "{message}"
    );
    let long = "x".repeat(5000);
    assert!(error_message(&long).chars().count() <= 301);
    let not_found = status_error(
        404,
        &HeaderMap::new(),
        r#"{"detail":"Not Found"}"#,
        None,
        URL,
        &Limits::default(),
    );
    let text = not_found.to_string();
    assert!(
        text.contains(URL) && text.contains("/v1") && text.contains("Not Found"),
        "{text}"
    );
}
